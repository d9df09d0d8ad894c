"""An interrupted run keeps every record that finished (append + fsync per case), and says so.

SIGINT, SIGTERM and SIGHUP end a run cleanly, for ``harness run`` (pytest in-process) and for
plain ``pytest`` with the plugin, serial and under pytest-xdist: summary.md and the terminal say
INTERRUPTED with the number of cases not run, the exit status is 128 + the signal (130, 143,
129), and a rerun into the same directory supersedes the interrupted run's records case by case.
Real signals to real process groups; every wait is bounded, no timing is asserted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SUITE = '''
import time


def test_a_quick(variant, harness):
    harness.metrics["done"] = 1.0


def test_b_hangs(variant, harness):
    time.sleep(120)
'''


def _wait_for_lines(path: Path, count: int, timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            lines = [line for line in path.read_text().splitlines() if line.strip()]
            if len(lines) >= count:
                return lines
        time.sleep(0.2)
    raise AssertionError(f"{path}: fewer than {count} record(s) after {timeout} s")


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_slow_suite.py").write_text(SUITE)
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", "run",
           "--suites", str(suites), "--models", "bert-tiny", "--precisions", "fp32", "--providers", "torch_cpu",
           "--out", str(out)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True), out


def test_killed_run_keeps_finished_records(tmp_path):
    proc, out = _start(tmp_path)
    try:
        (line,) = _wait_for_lines(out / "results.jsonl", 1, timeout=120)
        os.killpg(proc.pid, signal.SIGKILL)  # no cleanup at all
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    record = json.loads(line)
    assert record["id"] == "test_a_quick[bert-tiny-fp32-torch_cpu]"
    assert record["verdict"] == "pass" and record["metrics"] == {"done": 1.0}


def test_interrupted_run_exits_nonzero_and_keeps_records(tmp_path):
    proc, out = _start(tmp_path)
    try:
        _wait_for_lines(out / "results.jsonl", 1, timeout=120)
        time.sleep(0.5)  # inside test_b's sleep
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
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
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True)
    return proc, out, log


def _interrupt(proc: subprocess.Popen, out: Path, sig: int, records: int) -> int:
    try:
        _wait_for_lines(out / "results.jsonl", records, timeout=180)
        time.sleep(1.0)  # the quick cases are done; the workers sit in test_b's sleep
        os.killpg(proc.pid, sig)
        return proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


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
    # re-rendered later from the directory, the run still reads as interrupted, never PASSED
    from harness.cli import main

    assert main(["report", str(out), "--markdown", str(tmp_path / "again.md"), "--html", str(tmp_path / "again.html")]) == 0
    again = (tmp_path / "again.md").read_text()
    assert "PASSED" not in again and f"**INTERRUPTED by {sig.name}** — {not_run} case(s) not run" in again
    assert f"INTERRUPTED by {sig.name}" in (tmp_path / "again.html").read_text()


def test_rerun_into_the_same_directory_supersedes(tmp_path):
    """Documented rule: a rerun runs every selected case again and appends; each case's newest
    record supersedes (what report, baseline and history read); summary.md is the rerun's."""
    from harness.results.rundir import read_results

    proc, out, _ = _start_run(tmp_path, "harness", 0)
    assert _interrupt(proc, out, signal.SIGINT, QUICK) == 130
    assert (out / "interrupted.json").is_file()
    first = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    finishing = SUITE_3.replace("time.sleep(120)", "harness.metrics[\"done\"] = 2.0")
    proc, _, log = _start_run(tmp_path, "harness", 0, out=out, suite=finishing)
    assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
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
                time.sleep(5)  # the handler raises at the next bytecode
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
    slow_import = f"import pathlib, time\npathlib.Path({str(marker)!r}).write_text('x')\ntime.sleep(120)\n" + SUITE
    proc, out, log = _start_run(tmp_path, "harness", 0, suite=slow_import)
    try:
        deadline = time.monotonic() + 180
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert marker.exists(), log.read_text()[-3000:]
        os.killpg(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert code == 143, log.read_text()[-3000:]
    summary = (out / "summary.md").read_text()
    assert "**INTERRUPTED by SIGTERM** — stopped before the cases were collected" in summary
    assert "INTERRUPTED by SIGTERM" in log.read_text()
