"""summary.md and the terminal table render records faithfully (and stay plain text)."""

from harness.report.checks import worst_checks
from harness.report.summary import render_summary


def _record(id_, verdict, **extra):
    base = {"id": id_, "suite": "test_logits_parity", "verdict": verdict, "reason": "", "metrics": {},
            "thresholds": {}, "env": {"cpu": "Test CPU", "cores": 2, "versions": {"onnxruntime": "1.32.0"},
                                      "fingerprint": "abc"}}
    base.update(extra)
    return base


def test_worst_check_per_metric_over_outputs():
    record = _record("x", "fail", metrics={"encoder.h.cosine": 0.9999, "decoder.logits.cosine": 0.95,
                                           "decoder.logits.norm_max_abs": 0.2},
                     thresholds={"encoder.h.cosine": {"threshold": 0.99, "op": ">="},
                                 "decoder.logits.cosine": {"threshold": 0.99, "op": ">="},
                                 "decoder.logits.norm_max_abs": {"threshold": 0.15, "op": "<="}})
    checks = {name: (value, ok) for name, value, _, _, ok in worst_checks(record)}
    assert checks == {"cosine": (0.95, False), "norm_max_abs": (0.2, False)}


def test_summary_counts_failures_and_escapes_control_characters():
    records = [
        _record("test_logits_parity[m-fp32-ort_cpu]", "pass"),
        _record("test_logits_parity[m-int8-ort_cpu]", "fail", reason="decoder/logits: cosine = 0.95 (must be >= 0.99)",
                data={"worst": {"decoder.logits": "batch=3, position=1, index=7"}}),
        _record("test_generation_parity[m-int8-ort_cpu]", "pass", data={"worst_pairs": [
            {"index": 4, "source": "a|b", "reference": None, "pytorch": "ok\x1b[31m", "variant": "x\ny",
             "edit_distance": 3, "norm_edit_distance": 0.5}]}),
    ]
    text = render_summary(records)
    assert text.startswith("# Model deployment gate")
    assert "**FAILED** — 3 cases: 2 pass, 1 fail, 0 error, 0 not-run, 0 skip" in text
    assert "### `test_logits_parity[m-int8-ort_cpu]` (fail)" in text
    assert "worst element of `decoder.logits`: batch=3, position=1, index=7" in text
    assert "| 4 | a\\|b |  | ok\\x1b[31m | x y | 3 (0.50) |" in text
    assert all(c.isprintable() or c in "\n" for c in text)


def _attention_records():
    gate = {"model.logits.norm_max_abs": {"threshold": 0.15, "op": "<="}, "model.logits.cosine": {"threshold": 0.99, "op": ">="}}
    return [
        _record("test_logits_parity[a-fp32-ort_cpu]", "pass", metrics={"model.logits.norm_max_abs": 1e-7}, thresholds=gate),
        _record("test_logits_parity[z-int8-ort_cpu]", "fail", reason="z-int8-ort_cpu: 1 check(s) failed\n"
                "  model/logits: norm_max_abs = 0.31 (must be <= 0.15); worst element at batch=3",
                metrics={"model.logits.norm_max_abs": 0.31, "model.logits.cosine": 0.999}, thresholds=gate),
        _record("test_latency[b-fp32-ort_cpu]", "fail", suite="test_perf", reason="b-fp32-ort_cpu: 1 performance "
                "budget(s) exceeded\n  p50_ms = 12.5 (must be <= 10)"),
        _record("test_logits_parity[c-fp16-ort_cuda]", "error", reason="RuntimeError: CUDA out of memory\nTraceback ..."),
        _record("test_logits_parity[d-fp16-ort_cuda]", "not-run", reason="CUDAExecutionProvider not available here"),
    ]


def test_summary_starts_with_every_case_needing_attention_on_one_line():
    text = render_summary(_attention_records())
    section = text.split("## Needs attention (4)\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line]
    assert lines == [
        "- **fail** `test_logits_parity[z-int8-ort_cpu]`: model/logits: norm_max_abs = 0.31 (must be <= 0.15)",
        "- **fail** `test_latency[b-fp32-ort_cpu]`: p50_ms = 12.5 (must be <= 10)",
        "- **error** `test_logits_parity[c-fp16-ort_cuda]`: RuntimeError: CUDA out of memory",
        "- **not-run** `test_logits_parity[d-fp16-ort_cuda]`: CUDAExecutionProvider not available here",
    ]
    # it comes before the full table, which carries the same reason, not the count header
    assert text.index("## Needs attention") < text.index("## All cases")
    assert "check(s) failed |" not in text and "norm_max_abs = 0.31 (must be <= 0.15) |" in text


def test_junit_message_names_the_failing_metric():
    import xml.etree.ElementTree as ET

    from harness.report.junit import render_junit

    root = ET.fromstring(render_junit(_attention_records()))
    messages = {case.get("name"): (case.find("failure") if case.find("failure") is not None else case.find("error"))
                for case in root.iter("testcase")}
    assert messages["test_logits_parity[z-int8-ort_cpu]"].get("message") == \
        "model/logits: norm_max_abs = 0.31 (must be <= 0.15)"
    assert messages["test_latency[b-fp32-ort_cpu]"].get("message") == "p50_ms = 12.5 (must be <= 10)"
    assert messages["test_logits_parity[c-fp16-ort_cuda]"].get("message") == "RuntimeError: CUDA out of memory"


def test_csv_floats_are_shortest_round_trip():
    import io

    import pandas as pd

    from harness.report.tables import records_frame, to_csv

    record = _record("test_latency[m-fp32-ort_cpu]", "pass", perf={"latency_ms": {"summary": {"p50": 62.0668, "p90": 0.1 + 0.2}}})
    text = to_csv(records_frame([record]))
    assert "62.0668," in text and "62.066800000000001" not in text
    back = pd.read_csv(io.StringIO(text))
    assert back["perf:latency_ms.p90"][0] == 0.1 + 0.2 and back["perf:latency_ms.p50"][0] == 62.0668


def test_markdown_table_writer_escapes_pipes_once():
    from harness.core.markdown import table

    assert table(["a", "b"], [("x|y", "already \\| escaped")], align="lr") == [
        "| a | b |", "|---|---:|", "| x\\|y | already \\| escaped |"]
