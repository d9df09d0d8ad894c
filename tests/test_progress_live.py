"""The live progress display on a real terminal (issue 26 item 2): ``harness run`` under a
pseudo-terminal draws cases done/total, each running case with its phase, and leaves pytest's
and the harness's final output intact -- serially (where pytest's fd capture points fd 1 at a
file while a case runs) and under ``-n 2`` (the workers report their phases to the controller).

Event-driven, never timed: each case waits inside its ``reference`` phase until the test has
*seen* a frame naming it in that phase, then the test lets it go.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.waiting import PATIENCE

SUITE = '''
import os
import time
from pathlib import Path

from harness.core import phases


def test_waits(variant, harness):
    gate = Path(os.environ["LIVE_GATE"]) / variant.id
    with phases.phase("reference"):
        deadline = time.monotonic() + float(os.environ["LIVE_PATIENCE"])
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    harness.metrics["answer"] = 42.0
'''

VARIANTS = ("bert-tiny-fp32-ort_cpu", "bert-tiny-int8-ort_cpu")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _screen_text(raw: bytes) -> str:
    """The bytes a terminal received, without colours and cursor moves (each redraw is a line)."""
    return ANSI.sub("", raw.decode("utf-8", "replace")).replace("\r", "\n")


def run_under_pty(args: list[str], gate: Path, cwd: Path) -> tuple[int, str]:
    """Run ``harness run`` on a 160x40 pseudo-terminal; open each case's gate once a frame shows
    it running in its ``reference`` phase. Returns (exit code, what the terminal received)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {**os.environ, "LIVE_GATE": str(gate), "LIVE_PATIENCE": str(PATIENCE), "TERM": "xterm-256color"}
    env.pop("COLUMNS", None)
    env.pop("HARNESS_PROGRESS", None)
    proc = subprocess.Popen([sys.executable, "-c", "from harness.cli import entrypoint; entrypoint()", *args],
                            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, close_fds=True)
    os.close(slave)
    raw = b""
    released: set[str] = set()
    deadline = time.monotonic() + PATIENCE
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                raw += chunk
            elif proc.poll() is not None:
                break
            screen = _screen_text(raw)
            for variant in VARIANTS:
                if variant not in released and re.search(rf"{re.escape(variant)} waits\s+reference [\d.]+ s", screen):
                    (gate / variant).touch()
                    released.add(variant)
        else:
            raise AssertionError(f"no exit after {PATIENCE:.0f} s:\n{_screen_text(raw)[-3000:]}")
    finally:
        for variant in VARIANTS:  # whatever happened, no case is left waiting
            (gate / variant).touch()
        code = proc.wait()
        os.close(master)
    return code, _screen_text(raw)


@pytest.mark.parametrize("workers", [1, 2], ids=["serial", "xdist-2"])
def test_live_display_on_a_terminal(tmp_path: Path, workers: int) -> None:
    (tmp_path / "test_live_suite.py").write_text(SUITE)
    gate = tmp_path / "gate"
    gate.mkdir()
    out = tmp_path / "run"
    args = ["run", "--suites", str(tmp_path / "test_live_suite.py"), "--models", "bert-tiny", "--precisions", "fp32",
            "int8", "--providers", "ort_cpu", "--out", str(out)] + (["-n", str(workers)] if workers > 1 else [])
    code, screen = run_under_pty(args, gate, tmp_path)
    assert code == 0, screen[-3000:]
    # frames: the counter, each case with its phase (xdist: with its worker), then the last count
    assert re.search(r"harness 0/2 cases", screen), screen[-3000:]
    for variant in VARIANTS:
        row = re.search(rf"(gw\d|▶)\s+{re.escape(variant)} waits\s+reference [\d.]+ s\s+\(case [\d.]+ s\)", screen)
        assert row, screen[-3000:]
        assert (row.group(1).startswith("gw")) == (workers > 1)
    assert re.search(r"harness 1/2 cases\s+\S+\s+1 PASS", screen), screen[-3000:]
    assert re.search(r"harness 2/2 cases\s+\S+\s+2 PASS\s+elapsed", screen), screen[-3000:]
    # the final output is whole: pytest's progress and totals, the harness's summary, its files
    tail = screen.split("harness 2/2 cases")[-1]
    assert "[100%]" in tail and "harness summary" in tail and re.search(r"2 passed", tail), tail
    for variant in VARIANTS:
        assert f"test_waits[{variant}]" in tail
    assert f"results: {out / 'results.jsonl'}" in tail
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    # the piped per-case lines are not drawn on a terminal
    assert not re.search(r"^\[\d/2\] PASS", screen, flags=re.M)


def test_eta_reads_the_durations_history_scaled_by_this_runs_speed() -> None:
    from harness.plugins.progress import Estimator

    history = {"test_a[m]": 10.0, "test_b[m]": 20.0, "test_c[m]": 40.0}
    est = Estimator(history)
    # nothing finished yet: the history as it is, running cases for what they have left
    assert est.eta(["s.py::test_b[m]", "s.py::test_c[m]"], {"s.py::test_a[m]": 4.0}, {}, 1) == 6.0 + 20.0 + 40.0
    # test_a took twice its history: the machine is slower, the rest is expected twice as long
    assert est.eta(["s.py::test_c[m]"], {}, {"s.py::test_a[m]": 20.0}, 1) == 80.0
    # two workers share what is left; a case never timed counts this run's mean
    assert est.eta(["s.py::test_c[m]", "s.py::test_new[m]"], {}, {"s.py::test_a[m]": 10.0}, 2) == (40.0 + 10.0) / 2
    # no history: this run's mean; nothing to go on: no estimate
    assert Estimator().eta(["x", "y"], {}, {"z": 3.0}, 1) == 6.0
    assert Estimator().eta(["x"], {}, {}, 1) is None
