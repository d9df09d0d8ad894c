"""Coverage accounting (harness.judge.coverage): a case that gated none of its head's outputs is
not a pass, whatever its other outputs say."""

from __future__ import annotations

import pytest

from harness.core import Check, Precision, Tolerance
from harness.families import GraphSpec, family_for
from harness.judge.coverage import GENERATION, Coverage, generation_coverage, head_outputs, numeric_coverage
from harness.judge.numeric import OutputResult, ParityResult
from harness.judge.tolerances import tolerance_for
from harness.results.checks import GateFailure

_AXES = {"input_ids": {0: "batch"}}


def _lm_graph(gated: frozenset[str] | None) -> GraphSpec:
    return GraphSpec("model", ("input_ids",), ("logits", "present.0.key"), _AXES,
                     logits_outputs=frozenset({"logits"}), gated_outputs=gated)


def _output(name: str, gated: bool, n: int = 10, logits: bool = False) -> OutputResult:
    tol = tolerance_for(Precision.FP32, is_logits=logits) if gated else None
    return OutputResult("model", name, {"cosine": 1.0, "norm_max_abs": 0.0, "top1_agreement": 1.0, "kl": 0.0},
                        None, ("batch",), tol, n)


def test_head_outputs_are_the_logits_never_the_cache() -> None:
    assert head_outputs(_lm_graph(frozenset({"logits"}))) == ("logits",)
    base = GraphSpec("model", ("input_ids",), ("last_hidden_state",), _AXES)
    assert head_outputs(base) == ("last_hidden_state",)


def test_an_lm_case_that_gated_only_its_cache_is_not_a_pass() -> None:
    """The GPT-2-as-encoder failure in miniature: every number passes, the head was never gated."""
    family = family_for("causal_lm")
    graph = _lm_graph(frozenset({"present.0.key"}))
    outputs = [_output("logits", gated=False, logits=True), _output("present.0.key", gated=True)]
    result = ParityResult("gpt2-fp32-ort_cpu", outputs=outputs)
    assert not result.failures  # nothing failed a threshold ...
    result.coverage = numeric_coverage(family, [graph], outputs, "causal_lm")
    assert result.coverage.missing == ("model/logits",)
    assert result.coverage.gated == ("model/present.0.key",)
    assert "reported only" in result.coverage.measured["model/logits"]
    assert not result.passed  # ... and still no pass
    with pytest.raises(GateFailure, match="coverage: the causal_lm head's outputs were not gated"):
        result.assert_ok()


def test_the_same_case_gating_its_logits_passes_and_records_what_it_left_out() -> None:
    family = family_for("causal_lm")
    graph = _lm_graph(frozenset({"logits"}))
    outputs = [_output("logits", gated=True, logits=True), _output("present.0.key", gated=False)]
    result = ParityResult("v", outputs=outputs, coverage=numeric_coverage(family, [graph], outputs, "causal_lm"))
    assert result.passed
    record = result.coverage.as_dict()
    assert record["gated"] == ["model/logits"] and record["missing"] == [] and record["passes"] is True
    assert "model/present.0.key" in record["measured"]
    assert Coverage.from_dict(record) == result.coverage
    data: dict[str, object] = {}
    result.coverage.write(data)
    assert data["coverage"] == record
    assert result.coverage.summary() == "gated 1/1"


@pytest.mark.parametrize(("n", "metrics", "why"), [
    (0, {"cosine": 1.0}, "nothing compared"),
    (5, {"mismatch_rate": 0.0}, "no threshold applies"),
    (5, {"cosine": float("nan")}, "NaN"),
])
def test_a_gated_output_that_compared_nothing_does_not_count(n: int, metrics: dict[str, float], why: str) -> None:
    family = family_for("encoder")
    graph = GraphSpec("model", ("input_ids",), ("last_hidden_state",), _AXES)
    tol = Tolerance((Check("cosine", 0.99, higher_is_better=True),))
    out = OutputResult("model", "last_hidden_state", metrics, None, (), tol, n)
    cov = numeric_coverage(family, [graph], [out])
    assert cov.missing == ("model/last_hidden_state",) and why in cov.measured["model/last_hidden_state"]
    assert not cov.passes and cov.problem() is not None


def test_generation_coverage() -> None:
    checks = (Check("gen_token_exact_match", 0.9, higher_is_better=True),)
    assert generation_coverage("causal_lm", {"gen_sentences": 8.0, "gen_token_exact_match": 1.0}, checks).passes
    none = generation_coverage("causal_lm", {"gen_sentences": 0.0}, checks)
    assert not none.passes and none.missing == (GENERATION,) and "no sentence" in none.measured[GENERATION]
    assert not generation_coverage("causal_lm", {"gen_sentences": 8.0}, ()).passes


def test_summary_and_html_show_coverage() -> None:
    from harness.report.coverage import html
    from harness.report.summary import render_summary
    from harness.results.record import Record

    gated = Coverage("causal_lm", ("model/logits",), ("model/logits",), {"model/present.0.key": "reported only"})
    missing = Coverage("causal_lm", ("model/logits",), (), {"model/logits": "reported only"})
    records = []
    for name, cov, verdict in (("ok", gated, "pass"), ("bad", missing, "fail")):
        data: dict[str, object] = {}
        cov.write(data)
        records.append(Record.from_dict({"id": f"test_logits_parity[{name}]", "verdict": verdict, "reason": "",
                                         "suite": "test_logits_parity", "data": data}))
    text = render_summary(records)
    assert "## Coverage" in text
    assert "| `test_logits_parity[ok]` | causal_lm | gated 1/1: model/logits | model/present.0.key: reported only |" in text
    assert "gated 0/1, missing model/logits: nothing" in text
    page = html(records)
    assert 'id="coverage"' in page and "missing model/logits" in page and 'class="v-fail"' in page
