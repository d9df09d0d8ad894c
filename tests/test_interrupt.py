"""An interrupted run keeps every record that finished (append + fsync per case)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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
