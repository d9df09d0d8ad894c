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
