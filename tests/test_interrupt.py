"""An interrupted run keeps every record that finished (append + fsync per case), and says so.

SIGINT, SIGTERM and SIGHUP end a run cleanly, for ``harness run`` (pytest in-process) and for
plain ``pytest`` with the plugin, serial and under pytest-xdist: summary.md and the terminal say
INTERRUPTED with the number of cases not run, the exit status is 128 + the signal (130, 143,
129), and a rerun into the same directory supersedes the interrupted run's records case by case.
Real signals to real process groups. Every wait is for an event (a record on disk, the hanging
case entered, a handler installed, the process gone), bounded only by ``waiting.PATIENCE``: no
timing is asserted and no fixed short timeout can fail a loaded machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import catches, default_signals, kill_group, wait_exit, wait_for_records, wait_until

SUITE = '''
import os
import pathlib
import time


def test_a_quick(variant, harness):
    harness.metrics["done"] = 1.0


def test_b_hangs(variant, harness):
    events = pathlib.Path(os.environ["HARNESS_TEST_EVENTS"])
    (events / f"hanging-{os.getpid()}").write_text("x")  # the event the test waits for
    # short sleeps, as a case doing work returns to Python often: a signal the kernel hands to
    # another thread (torch's, ORT's) does not cut one long sleep of the main thread short
    for _ in range(36000):
        time.sleep(0.1)
'''


def _events(tmp_path: Path) -> Path:
    events = tmp_path / "events"
    events.mkdir(exist_ok=True)
    return events


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HARNESS_TEST_EVENTS": str(_events(tmp_path))}


def _hanging(tmp_path: Path) -> bool:
    return any(_events(tmp_path).glob("hanging-*"))


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_slow_suite.py").write_text(SUITE)
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", "run",
           "--suites", str(suites), "--models", "bert-tiny", "--precisions", "fp32", "--providers", "torch_cpu",
           "--out", str(out)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=default_signals, env=_env(tmp_path)), out


def test_killed_run_keeps_finished_records(tmp_path):
    proc, out = _start(tmp_path)
    try:
        (line,) = wait_for_records(out / "results.jsonl", 1, proc)
        os.killpg(proc.pid, signal.SIGKILL)  # no cleanup at all
        wait_exit(proc)
    finally:
        kill_group(proc)
    record = json.loads(line)
    assert record["id"] == "test_a_quick[bert-tiny-fp32-torch_cpu]"
    assert record["verdict"] == "pass" and record["metrics"] == {"done": 1.0}


def test_interrupted_run_exits_nonzero_and_keeps_records(tmp_path):
    proc, out = _start(tmp_path)
    try:
        wait_for_records(out / "results.jsonl", 1, proc)
        wait_until(lambda: _hanging(tmp_path), "test_b entered", proc)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        code = wait_exit(proc)
    finally:
        kill_group(proc)
    assert code != 0
    ids = [json.loads(line)["id"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert ids[0] == "test_a_quick[bert-tiny-fp32-torch_cpu]"


# -- INTERRUPTED, not PASSED (issue 11) ----------------------------------------------------------

SUITE_3 = SUITE + '''

def test_c_later(variant, harness):
    harness.metrics["done"] = 1.0
'''
#: 2 precisions x 2 providers = 4 variants; 3 tests -> 12 cases, 4 finish before the hang
MATRIX = ["--precisions", "fp32,fp16", "--providers", "torch_cpu,ort_cpu"]
CASES, QUICK = 12, 4


def _start_run(tmp_path: Path, runner: str, workers: int, out: Path | None = None,
               suite: str = SUITE_3) -> tuple[subprocess.Popen, Path, Path]:
    suites = tmp_path / "suites"
    suites.mkdir(exist_ok=True)
    (suites / "test_slow_suite.py").write_text(suite)
    out = out or tmp_path / "run"
    if runner == "harness":
        cmd = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", "run",
               "--suites", str(suites), "--models", "bert-tiny", *MATRIX, "--out", str(out)]
        if workers:
            cmd += ["-n", str(workers)]
    else:
        cmd = [sys.executable, "-m", "pytest", str(suites), "-p", "no:cacheprovider", "-q",
               "--harness-models", "bert-tiny", "--harness-precisions", "fp32,fp16",
               "--harness-providers", "torch_cpu,ort_cpu", f"--harness-out={out}"]
        if workers:
            cmd += ["-n", str(workers)]
    log = tmp_path / f"terminal-{runner}-{workers}.txt"
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True,
                                preexec_fn=default_signals, env=_env(tmp_path))
    return proc, out, log


def _interrupt(proc: subprocess.Popen, out: Path, sig: int, records: int) -> int:
    try:
        wait_for_records(out / "results.jsonl", records, proc)
        tmp_path = out.parent
        wait_until(lambda: _hanging(tmp_path), "a worker in test_b", proc)  # the quick cases are done
        os.killpg(proc.pid, sig)
        return wait_exit(proc)
    finally:
        kill_group(proc)


@pytest.mark.parametrize("runner,workers,sig", [
    ("harness", 0, signal.SIGINT),
    ("harness", 0, signal.SIGTERM),
    ("harness", 2, signal.SIGTERM),
    ("pytest", 0, signal.SIGHUP),
    ("pytest", 2, signal.SIGINT),
], ids=lambda v: getattr(v, "name", str(v)))
def test_interrupted_run_says_interrupted(tmp_path, runner, workers, sig):
    proc, out, log = _start_run(tmp_path, runner, workers)
    code = _interrupt(proc, out, sig, QUICK)
    terminal = log.read_text()
    assert code == 128 + sig, terminal[-3000:]  # 130 SIGINT, 143 SIGTERM, 129 SIGHUP: not 0, 1 or 2
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    quick = [r for r in records if r["id"].startswith("test_a_quick")]
    assert len(quick) == QUICK and all(r["verdict"] == "pass" for r in quick)
    not_run = CASES - len(records)
    summary = (out / "summary.md").read_text()
    assert "PASSED" not in summary
    assert f"**INTERRUPTED by {sig.name}** — {not_run} case(s) not run; {len(records)} finished" in summary
    assert "## Not run" in summary and "test_c_later[bert-tiny-fp32-torch_cpu]" in summary
    assert f"INTERRUPTED by {sig.name} — {not_run} case(s) not run" in terminal
    # CI reads junit.xml: every selected case is a testcase, the unfinished ones <error>s
    import xml.etree.ElementTree as ET

    junit = ET.parse(out / "junit.xml").getroot()
    assert junit.get("tests") == str(CASES) and junit.get("errors") == str(not_run)
    stopped = [c for c in junit.iter("testcase") if c.find("error") is not None]
    assert len(stopped) == not_run and all(f"interrupted by {sig.name}" in (c.find("error").get("message") or "")
                                            for c in stopped)
    # re-rendered later from the directory, the run still reads as interrupted, never PASSED
    from harness.cli import main

    assert main(["report", str(out), "--markdown", str(tmp_path / "again.md"), "--html", str(tmp_path / "again.html")]) == 0
    again = (tmp_path / "again.md").read_text()
    assert "PASSED" not in again and f"**INTERRUPTED by {sig.name}** — {not_run} case(s) not run" in again
    assert f"INTERRUPTED by {sig.name}" in (tmp_path / "again.html").read_text()
    assert f'<span class="v-not-run">{not_run} not-run</span>' in (tmp_path / "again.html").read_text()


def test_rerun_into_the_same_directory_supersedes(tmp_path):
    """Documented rule: a rerun runs every selected case again and appends; each case's newest
    record supersedes (what report, baseline and history read); summary.md is the rerun's."""
    from harness.results.rundir import read_results

    proc, out, _ = _start_run(tmp_path, "harness", 0)
    assert _interrupt(proc, out, signal.SIGINT, QUICK) == 130
    assert (out / "interrupted.json").is_file()
    first = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    finishing = SUITE_3.replace("time.sleep(0.1)", "harness.metrics[\"done\"] = 2.0")
    proc, _, log = _start_run(tmp_path, "harness", 0, out=out, suite=finishing)
    assert wait_exit(proc) == 0, log.read_text()[-3000:]
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == len(first) + CASES  # appended, nothing rewritten
    latest = read_results(out)
    assert len(latest) == CASES and len({r.run_id for r in latest}) == 1
    assert latest[0].run_id != first[0]["run_id"]
    assert all(r.verdict == "pass" for r in latest)
    summary = (out / "summary.md").read_text()
    assert summary.splitlines()[2].startswith(f"**PASSED** — {CASES} cases")
    assert not (out / "interrupted.json").exists()  # the finished rerun cleared the first run's marker


# -- the pieces, without a subprocess -----------------------------------------------------------------

def test_summary_of_an_interrupted_run_never_says_passed():
    from harness.core.interrupts import Interruption
    from harness.report.summary import render_summary

    record = {"schema": "harness.result/1", "id": "test_a[m-fp32-torch_cpu]", "verdict": "pass"}
    stopped = Interruption(signal.SIGTERM, tuple(f"s.py::test_b[m-{i}]" for i in range(60)), 61)
    text = render_summary([record], interruption=stopped)
    assert "PASSED" not in text and "**INTERRUPTED by SIGTERM** — 60 case(s) not run; 1 finished" in text
    assert "(exit 143)" in text and "`test_b[m-0]`" in text and "… and 10 more" in text
    assert render_summary([record]).splitlines()[2].startswith("**PASSED** — 1 cases")


def test_signal_guard_installs_over_defaults_only_and_restores():
    from harness.core.interrupts import Interrupted, SignalGuard

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # this session's own guard may hold them
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
        guard = SignalGuard()
        guard.install()
        try:
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN  # left alone
            assert signal.getsignal(signal.SIGTERM) == guard._handle
            with pytest.raises(Interrupted) as caught:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(10**8):  # the handler raises at the next bytecode; no sleep to bet on
                    pass
            assert caught.value.signum == signal.SIGTERM and guard.received == signal.SIGTERM
        finally:
            guard.uninstall()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) == signal.default_int_handler
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def test_only_signals_count_as_interrupts():
    """pytest-xdist stops a `-x` run by raising its own KeyboardInterrupt subclass: a failed run,
    not an interrupted one (exit 1, not 130)."""
    from harness.core.interrupts import Interrupted, signal_of

    class XdistInterrupted(KeyboardInterrupt):
        pass

    assert signal_of(Interrupted(signal.SIGTERM)) == signal.SIGTERM
    assert signal_of(KeyboardInterrupt()) == signal.SIGINT
    assert signal_of(XdistInterrupted("stopping after 1 failures")) is None
    assert signal_of(SystemExit(3)) is None


def test_interrupt_during_collection_still_says_interrupted(tmp_path):
    marker = tmp_path / "collecting"
    slow_import = (f"import pathlib, time\npathlib.Path({str(marker)!r}).write_text('x')\n"
                   "for _ in range(36000):\n    time.sleep(0.1)\n" + SUITE)
    proc, out, log = _start_run(tmp_path, "harness", 0, suite=slow_import)
    try:
        wait_until(marker.exists, "the suite's import started", proc)
        os.killpg(proc.pid, signal.SIGTERM)
        code = wait_exit(proc)
    finally:
        kill_group(proc)
    assert code == 143, log.read_text()[-3000:]
    summary = (out / "summary.md").read_text()
    assert "**INTERRUPTED by SIGTERM** — stopped before the cases were collected" in summary
    assert "INTERRUPTED by SIGTERM" in log.read_text()


# -- signals from the first instruction (issue 25, item 4) ----------------------------------------------

def _harness_command() -> list[str]:
    """The ``harness`` console script of this environment, else exactly what it runs."""
    script = Path(sys.executable).parent / "harness"
    if script.is_file():
        return [sys.executable, str(script)]
    return [sys.executable, "-c", "import sys; sys.argv[0] = 'harness'; from harness.cli import entrypoint; entrypoint()"]


@pytest.mark.parametrize("runner,sig", [
    ("harness", signal.SIGTERM),
    ("harness", signal.SIGINT),
    ("harness", signal.SIGHUP),
    ("pytest", signal.SIGTERM),
], ids=lambda v: getattr(v, "name", str(v)))
def test_a_signal_during_start_up_still_writes_the_run_directory(tmp_path, runner, sig):
    """Sent the moment the process can take it (its handler is installed: the first thing
    ``harness`` does; the plugin's import under plain pytest), long before the first case: the
    run directory still gets summary.md and interrupted.json, and the status is 128 + N.
    Before: SIGTERM killed the process silently; SIGINT left one line and no directory."""
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_slow_suite.py").write_text(SUITE)
    out = tmp_path / "run"
    if runner == "harness":
        cmd = [*_harness_command(), "run", "--suites", str(suites), "--models", "bert-tiny", "--precisions", "fp32",
               "--providers", "torch_cpu", "--out", str(out)]
    else:
        cmd = [sys.executable, "-m", "pytest", str(suites), "-p", "no:cacheprovider", "-q", "--harness-models",
               "bert-tiny", "--harness-precisions", "fp32", "--harness-providers", "torch_cpu", f"--harness-out={out}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            start_new_session=True, preexec_fn=default_signals, env=_env(tmp_path))
    try:
        wait_until(lambda: catches(proc.pid, signal.SIGTERM), "the harness's signal handler installed", proc)
        os.killpg(proc.pid, sig)
        stdout, stderr = proc.communicate()
    finally:
        kill_group(proc)
    assert proc.returncode == 128 + sig, stdout[-2000:] + stderr[-3000:]
    summary = (out / "summary.md").read_text()
    assert f"**INTERRUPTED by {sig.name}**" in summary and "PASSED" not in summary
    marker = json.loads((out / "interrupted.json").read_text())
    assert marker["signum"] == sig and marker["signal"] == sig.name
    assert not (out / "results.jsonl").exists() and not _hanging(tmp_path)  # stopped before any case
    if runner == "harness":
        assert stderr.strip().splitlines() == [f"harness: interrupted by {sig.name}; results written so far are kept"]
