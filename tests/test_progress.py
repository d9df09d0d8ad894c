"""Progress a CI log shows (issue 26 item 2, issue 28 item 4): one line per finished case with a
counter and its time under pytest-xdist, a heartbeat for a long case naming its phase, an end-of-run
list whose case ids are never broken whatever the width, and failure text without object reprs."""

from __future__ import annotations

import re

import onnxruntime  # noqa: F401
import pytest

import harness.judge.workspace  # noqa: F401  (imported up front: see docs/pitfalls.md #6)

SUITE = '''
import time

from harness.core import phases
from harness.judge.numeric import GateFailure


def test_gate(variant, harness):
    raise GateFailure("model/logits: 1 check(s) failed\\n  model/logits: norm_max_abs = 0.31 (must be <= 0.15)")


def test_crash(variant, harness):
    raise ValueError("runner crashed")


def test_ok(variant, harness):
    harness.metrics["answer"] = 42.0


def test_slow(variant, harness):
    with phases.phase("perf"):
        time.sleep(3)
'''

ARGS = ["--harness-models=bert-tiny", "--harness-precisions=fp32,int8", "--harness-providers=ort_cpu",
        "-p", "no:cacheprovider"]


def test_piped_run_under_xdist(pytester: pytest.Pytester, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One subprocess run (-n 2, stdout a pipe), three things read from its output."""
    monkeypatch.setenv("HARNESS_PROGRESS_HEARTBEAT_S", "1")
    monkeypatch.setenv("COLUMNS", "40")  # a narrow CI log: ids must still come out whole
    monkeypatch.setenv("HARNESS_PROGRESS_ETA_LOG", str(tmp_path / "eta.jsonl"))
    pytester.makepyfile(test_progress_suite=SUITE)
    piped = pytester.runpytest_subprocess(*ARGS, f"--harness-out={tmp_path / 'run'}", "-n", "2")
    per_case_lines(piped)
    end_table_keeps_case_ids_whole(piped)
    failure_text_has_no_object_reprs(piped)
    journal_has_no_estimate_once_every_case_finished(tmp_path / "eta.jsonl")


def journal_has_no_estimate_once_every_case_finished(path) -> None:
    """The display shows no ETA once every case finished, so the ETA journal records none there:
    a 0 s journalled was judged a -100 % miss against the reports' last tenth of a second."""
    import json

    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    estimates = [e for e in entries if "done" in e]
    assert [e["done"] for e in estimates] == list(range(1, 9)) and all(e["total"] == 8 for e in estimates)
    assert estimates[-1]["eta"] is None and any(e["eta"] is not None for e in estimates[:-1])
    assert "ended" in entries[-1]


def per_case_lines(piped: pytest.RunResult) -> None:
    out = piped.stdout.str()
    lines = re.findall(r"^\[ ?(\d)/8\] (PASS|FAIL|ERROR|SKIP)\s+(\S+) (\w+) ([\d.]+) s", out, flags=re.M)
    assert sorted(int(n) for n, *_ in lines) == list(range(1, 9)), out
    got = {(variant, suite): verdict for _, verdict, variant, suite, _ in lines}
    assert got[("bert-tiny-int8-ort_cpu", "gate")] == "FAIL"
    assert got[("bert-tiny-fp32-ort_cpu", "crash")] == "ERROR"  # the harness's verdict, not pytest's
    assert got[("bert-tiny-fp32-ort_cpu", "ok")] == "PASS"
    slow = [float(s) for _, _, v, suite, s in lines if suite == "slow"]
    assert len(slow) == 2 and min(slow) >= 3.0
    assert re.search(r"still running: [\d.]+ s, in perf for [\d.]+ s", out), out


def end_table_keeps_case_ids_whole(piped: pytest.RunResult) -> None:
    out = piped.stdout.str()
    tail = out.split("harness summary", 1)[1]
    for variant in ("bert-tiny-fp32-ort_cpu", "bert-tiny-int8-ort_cpu"):
        for case in ("test_gate", "test_crash", "test_ok", "test_slow"):
            assert f"{case}[{variant}]" in tail
    first = next(line for line in tail.splitlines() if line.startswith(("FAIL", "ERROR", "PASS")))
    assert first.startswith("FAIL   test_gate[bert-tiny-fp32-ort_cpu]  model/logits: norm_max_abs = 0.31 (must be <= 0.15)")


def failure_text_has_no_object_reprs(piped: pytest.RunResult) -> None:
    failures = piped.stdout.str().split("= FAILURES =", 1)[1].split("harness summary", 1)[0]
    assert "norm_max_abs = 0.31 (must be <= 0.15)" in failures and "runner crashed" in failures
    assert "Variant(" not in failures and "Case(" not in failures and "harness = <" not in failures


def test_phase_announcements_are_coalesced_and_the_newest_is_written(tmp_path) -> None:
    """A case announces ~40 phases and a file write costs ~1.5 ms here: the file is written at
    most once per interval, and the newest phase reaches it within that interval."""
    import json
    import time as clock

    from harness.core import phases
    from harness.plugins.progress import PhaseFile

    announced = PhaseFile(tmp_path)
    try:
        announced.nodeid = "s.py::test_x[m-fp32-ort_cpu]"
        began = clock.monotonic()
        for i in range(2000):
            announced.phase(("reference", "variant", "metrics")[i % 3])
        announced.phase("perf")
        elapsed = clock.monotonic() - began
        assert announced.writes <= 2 + elapsed / PhaseFile.MIN_INTERVAL_S  # not one per announcement

        def newest() -> str:
            try:
                return str(json.loads(announced.path.read_text(encoding="utf-8"))["phase"])
            except (OSError, ValueError):
                return ""

        deadline = clock.monotonic() + 60  # the flusher's next turn; generous on a loaded machine
        while newest() != "perf" and clock.monotonic() < deadline:
            clock.sleep(0.05)
        assert newest() == "perf"
    finally:
        announced.pytest_unconfigure(None)  # type: ignore[arg-type]
    assert announced.phase not in phases.LISTENERS
