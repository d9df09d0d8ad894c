"""A runtime that dies natively (segfault, abort) mid-case: under pytest-xdist the crashed case
gets an ``error`` record saying so and the run goes on to write every other record, summary.md
and junit.xml. Found on a tiny LED at FP16, where ONNX Runtime's session creation segfaults: the
serial run died with nothing written beyond the cases before it, and an `-n 1` run wrote
*nothing* (the worker's case never reported a teardown, so no record and no summary)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CRASHING_SUITE = '''
import ctypes


def test_1_before(variant, harness):
    harness.metrics["done"] = 1.0


def test_2_segfaults(variant, harness):
    """What a runtime's native fault does to the process: SIGSEGV, no Python exception."""
    ctypes.string_at(0)


def test_3_after(variant, harness):
    harness.metrics["done"] = 1.0
'''


def test_a_segfaulting_case_is_an_error_record_and_the_run_goes_on(tmp_path):
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_crash.py").write_text(CRASHING_SUITE)
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; entrypoint()", "run",
                           "--suites", str(suites), "--models", "bert-tiny", "--precisions", "fp32",
                           "--providers", "torch_cpu", "--out", str(out), "--pytest-args", "-n", "1",
                           "-p", "no:randomly"],
                          capture_output=True, text=True, cwd=tmp_path, env=env)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text[-4000:]
    records = {r["id"].split("[")[0]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert set(records) == {"test_1_before", "test_2_segfaults", "test_3_after"}, text[-4000:]
    crashed = records["test_2_segfaults"]
    assert crashed["verdict"] == "error" and crashed["reason"].startswith("crashed: the test process died"), crashed
    assert "test_2_segfaults" in crashed["rerun"]
    assert records["test_1_before"]["verdict"] == records["test_3_after"]["verdict"] == "pass"
    summary = (out / "summary.md").read_text()
    assert "crashed" in summary and "PASSED" not in summary
    assert 'type="' in (out / "junit.xml").read_text() and "crashed" in (out / "junit.xml").read_text()
