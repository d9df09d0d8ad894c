"""Signals from the first instruction to the last: a signal at any instant of start-up -- inside
a library's import, while the reference model is built, inside the ONNX export, as a session is
created -- ends the run with 128 + N, the INTERRUPTED summary, no crash dump and no process left
in its group (docs/reliability.md, "Untrusted inputs"). Each test pauses the process at its
instant (``start_up_pause.py`` writes a marker there), sends the signal to the process group as
a terminal's Ctrl-C does, then lets it go on: no timing is assumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import default_signals, kill_group, wait_exit, wait_until

PAUSE = Path(__file__).with_name("start_up_pause.py")

LIBRARY_IMPORT = r'''
import signal, sys
from harness.core.interrupts import Interrupted, SignalGuard

guard = SignalGuard()
guard.install()
sent = []

def audit(event, args):
    # the moment email.mime.text's own top-level code imports its base class: a library import
    if event == "import" and args[0] == "email.mime.nonmultipart" and not sent:
        sent.append(1)
        signal.raise_signal(signal.SIGINT)

sys.addaudithook(audit)
try:
    import email.mime.text
    import time
    for _ in range(100000):  # the signal is acted on once the import is done
        time.sleep(0.01)
    print("never interrupted")
except Interrupted:
    whole = "email.mime.text" in sys.modules and hasattr(sys.modules["email.mime.text"], "MIMEText")
    print("interrupted after the import" if whole else "interrupted inside the import")
'''


def test_a_signal_inside_a_library_import_is_acted_on_once_the_import_is_done() -> None:
    """An exception raised inside a library's top-level code leaves it half-imported (torch
    without torch.distributed, onnx without onnx.defs; native registries that abort the process
    when the import runs again): the signal waits for the import, then stops the run."""
    done = subprocess.run([sys.executable, "-c", LIBRARY_IMPORT], capture_output=True, text=True,
                          preexec_fn=default_signals)
    assert done.stdout.strip() == "interrupted after the import", done.stdout + done.stderr


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache the import, build and session instants share (the export instant needs an empty one)."""
    return tmp_path_factory.mktemp("cache")


INSTANTS = [("import:torch.nn", signal.SIGINT), ("build", signal.SIGTERM), ("export", signal.SIGINT),
            ("session", signal.SIGHUP)]


@pytest.mark.parametrize("instant,sig", INSTANTS, ids=[f"{i}-{s.name}" for i, s in INSTANTS])
def test_a_signal_at_each_instant_of_start_up_ends_the_run_cleanly(tmp_path: Path, warm_cache: Path, instant: str,
                                                                    sig: signal.Signals) -> None:
    marker, release, out = tmp_path / "paused", tmp_path / "release", tmp_path / "run"
    cache = tmp_path / "cache" if instant == "export" else warm_cache
    env = {**os.environ, "HARNESS_CACHE": str(cache)}
    cmd = [sys.executable, str(PAUSE), str(marker), str(release), instant, "run", "--models", "bert-tiny",
           "--precisions", "fp32", "--providers", "ort_cpu", "--out", str(out)]
    log = tmp_path / "log"
    with log.open("w") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                preexec_fn=default_signals)
    try:
        wait_until(marker.exists, f"the run paused at {instant}", proc)
        os.killpg(proc.pid, sig)
        release.write_text("go")
        code = wait_exit(proc)
    finally:
        kill_group(proc)
    text = log.read_text()
    assert code == 128 + sig, text[-3000:]
    assert "Fatal Python error" not in text and "Traceback" not in text, text[-3000:]
    assert f"INTERRUPTED by {sig.name}" in (out / "summary.md").read_text()
    assert (out / "interrupted.json").is_file()
    with pytest.raises(ProcessLookupError):  # nothing of the run is left in its process group
        os.killpg(proc.pid, 0)
