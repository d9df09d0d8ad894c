"""``harness compare RUN_A RUN_B``: verdict changes first, accuracy deltas with the registry's
direction, perf through the statistical gate, in all three renderings, text escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_fixture import HOSTILE, logits, record, write_run

from harness.cli import main
from harness.compare.diff import accuracy_deltas, compare
from harness.gate.accuracy import margin_table
from harness.results.rundir import read_results
from tests.perf_records import measured_processes


def _latency(variant: str, base: float, run_id: str) -> dict:
    samples = [base + 0.002 * (i % 11) for i in range(400)]
    return record("test_latency", variant, run_id=run_id, perf={
        "latency_ms": {"samples": samples, "summary": {"p50": base, "n": 400}},
        "cold_start_runs": measured_processes()})  # three fresh processes, as a real --perf run records


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    a = write_run(tmp_path / "ort-1.19", [
        logits("bert-fp32-ort_cpu", 2e-7, run_id="a"), logits("bert-int8-ort_cpu", 0.05, run_id="a"),
        record("test_logits_parity", "gone-fp32-ort_cpu", run_id="a"),
        _latency("bert-fp32-ort_cpu", 1.0, "a"), _latency("bert-int8-ort_cpu", 1.0, "a")])
    b_rows = [logits("bert-fp32-ort_cpu", 2e-7, run_id="b"),
              logits("bert-int8-ort_cpu", 0.31, "fail", run_id="b", reason=f"norm_max_abs 0.31 {HOSTILE}"),
              record("test_logits_parity", "new-fp32-ort_cpu", run_id="b"),
              _latency("bert-fp32-ort_cpu", 1.5, "b"), _latency("bert-int8-ort_cpu", 1.0, "b")]
    for row in b_rows:
        row["env"] = {**row["env"], "versions": {"onnxruntime": "1.21.0"}, "fingerprint": "beef"}
    return a, write_run(tmp_path / "ort-1.20", b_rows)


def test_verdict_changes_first_then_deltas_then_perf(runs: tuple[Path, Path]) -> None:
    cmp = compare(read_results(runs[0]), read_results(runs[1]))
    assert [(v.case, v.before, v.after, v.worse) for v in cmp.verdicts] == [
        ("test_logits_parity[bert-int8-ort_cpu]", "pass", "fail", True),
        ("test_logits_parity[gone-fp32-ort_cpu]", "pass", None, False),
        ("test_logits_parity[new-fp32-ort_cpu]", None, "pass", False)]
    moved = {(d.case, d.key): d for d in cmp.accuracy}
    norm = moved[("test_logits_parity[bert-int8-ort_cpu]", "model.logits.norm_max_abs")]
    assert (norm.before, norm.after, norm.change) == (0.05, 0.31, "worse")  # lower is better, by the registry
    assert ("test_logits_parity[bert-fp32-ort_cpu]", "model.logits.norm_max_abs") not in moved  # unchanged
    assert cmp.perf is not None
    p50 = {(r.variant, r.metric): r for r in cmp.perf.rows}
    assert p50[("bert-fp32-ort_cpu", "latency_ms.p50")].verdict.value == "REGRESSION"
    assert p50[("bert-int8-ort_cpu", "latency_ms.p50")].verdict.value != "REGRESSION"
    assert cmp.regressed and any("onnxruntime" in d for d in cmp.env)


def test_accuracy_seam_takes_two_metric_dicts() -> None:
    rows = accuracy_deltas("c", {"m.o.cosine": 0.999, "m.o.max_abs": 0.1, "only_a": 1.0},
                           {"m.o.cosine": 0.9999, "m.o.max_abs": 0.1, "only_b": 1.0})
    assert [(r.key, r.change) for r in rows] == [("m.o.cosine", "better")]
    assert rows[0].relative == pytest.approx(0.0009 / 0.999)


def test_cli_writes_markdown_and_html_escaped(runs: tuple[Path, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    md, page = tmp_path / "c.md", tmp_path / "c.html"
    # a failure's reason is its failing check (from the numbers); an error's is its own text, escaped
    crashed = record("test_logits_parity", "crash-fp32-ort_cpu", "error", run_id="b", reason=f"crashed {HOSTILE}")
    with (runs[1] / "results.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(crashed) + "\n")
    assert main(["compare", str(runs[0]), str(runs[1]), "--markdown", str(md), "--html", str(page), "--allow-missing"]) == 0
    out = capsys.readouterr().out
    assert out.index("verdict changes") < out.index("accuracy metrics that moved") < out.index("performance")
    text = md.read_text()
    assert text.index("## Verdict changes") < text.index("## Accuracy") < text.index("## Performance")
    assert "**fail**" in text and HOSTILE not in text
    html = page.read_text()
    assert HOSTILE not in html and "&lt;script&gt;" in html and 'class="bad"' in html
    assert main(["compare", str(runs[0]), str(runs[1]), "--strict"]) == 1
    assert main(["compare", str(runs[0]), str(tmp_path / "absent")]) == 2


def test_accuracy_moves_are_judged_by_the_baseline_gate(runs: tuple[Path, Path], tmp_path: Path) -> None:
    """B's INT8 error grew 6x: past its margin, the accuracy gate names it a REGRESSION in the
    comparison (and in --strict's exit code); a wide enough --accuracy-margin lets it pass."""
    cmp = compare(read_results(runs[0]), read_results(runs[1]))
    assert cmp.accuracy_gate is not None
    judged = {(r.case, r.key): r for r in cmp.accuracy_gate.rows}
    norm = judged[("test_logits_parity[bert-int8-ort_cpu]", "model.logits.norm_max_abs")]
    assert norm.verdict.value == "REGRESSION" and norm.gating_regression
    assert judged[("test_logits_parity[bert-fp32-ort_cpu]", "model.logits.norm_max_abs")].verdict.value == "PASS"
    assert "past their margin" in cmp.headline()
    md = tmp_path / "cmp.md"
    html = tmp_path / "cmp.html"
    assert main(["compare", str(runs[0]), str(runs[1]), "--markdown", str(md), "--html", str(html), "--allow-missing"]) == 0
    assert "## Accuracy gate" in md.read_text() and 'id="accuracy-gate"' in html.read_text()
    loose = margin_table(None, ["norm_max_abs=1000%,1"], rootdir=tmp_path)
    only_accuracy = compare(read_results(runs[0]), read_results(runs[1]), margins=loose)
    assert only_accuracy.accuracy_gate is not None
    assert not any(r.gating_regression and r.metric == "norm_max_abs" for r in only_accuracy.accuracy_gate.rows)
