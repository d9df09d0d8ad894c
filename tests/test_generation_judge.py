"""Generation parity: scores, gates, records and re-scoring, down to the pytest plugin.

Scores are checked on hand-made decodes whose right answers are known; the end-to-end
test runs the real suite file through pytester and checks what lands in the records,
the per-case ``decoded.jsonl`` and ``summary.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.core import Precision
from harness.judge.generation import (
    GEN_TOLERANCES,
    GenerationRequest,
    GenerationResult,
    gen_checks,
    generation_parity,
    read_decoded,
    record,
    score_rows,
    select_indices,
)
from harness.judge.numeric import GateFailure
from tests.conftest import variant

SUITE = (Path(__file__).resolve().parent.parent / "harness" / "suites" / "test_generation_parity.py").read_text()
LONG = " ".join(["word"] * 31)


def row(index: int, source: str, pytorch: list[int], got: list[int], pt_text: str, var_text: str,
        reference: str | None = None) -> dict:
    first = next((i for i, (a, b) in enumerate(zip(pytorch, got)) if a != b),
                 None if len(pytorch) == len(got) else min(len(pytorch), len(got)))
    return {"index": index, "source": source, "reference": reference, "pytorch": pt_text, "variant": var_text,
            "pytorch_tokens": pytorch, "variant_tokens": got, "first_divergence": first}


SAME = "the release gate checks every exported model before it ships"
ROWS = [
    row(0, "one", [5, 6, 7, 1], [5, 6, 7, 1], SAME, SAME),
    row(1, LONG, [5, 6, 7, 1], [5, 6, 9, 1], SAME, "the release gate gate gate gate model before it ships"),
]


def test_scores_against_pytorch_and_long_sentences():
    metrics, signatures = score_rows(ROWS, "en")
    assert metrics["gen_sentences"] == 2
    assert metrics["gen_token_exact_match"] == 0.5
    assert metrics["gen_mean_first_divergence"] == (4 + 2) / 2
    assert metrics["gen_position_match"] == 7 / 8
    assert metrics["gen_exact_match_vs_torch"] == 0.5
    assert 0 < metrics["gen_bleu_vs_torch"] < 100
    assert metrics["gen_repetition_rate"] > metrics["gen_torch_repetition_rate"] == 0.0
    assert metrics["gen_repetition_increase"] == pytest.approx(metrics["gen_repetition_rate"])
    assert metrics["gen_long_sentences"] == 1 and metrics["gen_token_exact_match_long"] == 0.0
    assert "gen_bleu_vs_ref" not in metrics  # no references
    assert signatures["bleu_vs_torch"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def test_scores_against_references_use_zh_tokenization_and_report_the_drop():
    rows = [row(0, "one hundred and five", [1], [1], "一百零五", "一百零五", "一百零五"),
            row(1, "seventy-four", [1], [2], "七十四", "七十", "七十四"),
            row(2, "twelve thousand", [1], [1], "一万二千", "一万二千", "一万二千")]
    metrics, signatures = score_rows(rows, "zh")
    assert metrics["gen_torch_bleu_vs_ref"] == pytest.approx(100.0) and metrics["gen_torch_exact_match_vs_ref"] == 1.0
    assert metrics["gen_exact_match_vs_ref"] == pytest.approx(2 / 3)
    assert metrics["gen_bleu_ref_drop"] == pytest.approx(100.0 - metrics["gen_bleu_vs_ref"]) and \
        metrics["gen_bleu_ref_drop"] > 0
    assert "tok:zh" in signatures["bleu_vs_ref"] and "tok:zh" in signatures["bleu_vs_torch"]


def test_gates_per_precision_and_model_overrides():
    fp32 = {c.metric: c for c in gen_checks(Precision.FP32)}
    assert fp32["gen_token_exact_match"].threshold == 1.0 and fp32["gen_token_exact_match"].higher_is_better
    overrides = {"int8": {"gen_bleu_vs_torch": 90.0, "norm_max_abs": 0.5, "gen_bleu_ref_drop": 0.5}}
    int8 = {c.metric: c for c in gen_checks(Precision.INT8, overrides)}
    assert int8["gen_bleu_vs_torch"].threshold == 90.0 and int8["gen_bleu_vs_torch"].higher_is_better
    assert int8["gen_bleu_ref_drop"].threshold == 0.5 and not int8["gen_bleu_ref_drop"].higher_is_better
    assert "norm_max_abs" not in int8  # numeric overrides belong to logits parity
    no_refs = {c.metric for c in gen_checks(Precision.INT8, overrides, has_references=False)}
    assert "gen_bleu_ref_drop" not in no_refs and "gen_bleu_vs_torch" in no_refs
    assert set(GEN_TOLERANCES) == set(Precision)


def result(metrics: dict, precision: Precision = Precision.FP32) -> GenerationResult:
    return GenerationResult("llama-tiny-fp32-ort_cpu", metrics, gen_checks(precision), ROWS)


def test_gate_failure_names_metric_value_threshold_and_first_divergence():
    failing = result({"gen_token_exact_match": 0.5})
    with pytest.raises(GateFailure) as info:
        failing.assert_ok()
    message = str(info.value)
    assert "gen_token_exact_match = 0.5 (must be >= 1)" in message
    assert "first divergence: sentence 1 at token 2 (pytorch 7 vs variant 9)" in message
    assert "gate gate gate" in message
    result({"gen_token_exact_match": 1.0}).assert_ok()
    with pytest.raises(GateFailure, match="NaN"):
        result({}).assert_ok()  # a gated metric that is missing never passes


def test_select_indices_spreads_over_the_corpus():
    assert select_indices(100, 5) == [0, 25, 50, 74, 99]
    assert select_indices(10, None) == list(range(10)) == select_indices(10, 0) == select_indices(10, 50)
    assert select_indices(10, 1) == [0]


def test_request_layers_defaults_model_and_options(workspace):
    model = workspace.model("llama-tiny")
    assert GenerationRequest().resolved(model)["samples"] == 48
    assert GenerationRequest(samples=4, use_cache=False).resolved(model)["use_cache"] is False


class FakeCase:
    def __init__(self, tmp_path: Path) -> None:
        self.metrics, self.thresholds, self.artifacts, self.data = {}, {}, {}, {}
        self.tmp_path = tmp_path

    def side_file(self, name: str) -> Path:
        return self.tmp_path / name


def test_record_keeps_decoded_text_that_rescores_to_the_same_metrics(workspace, tmp_path):
    request = GenerationRequest(samples=8, max_new_tokens=8, batch_size=4)
    res = generation_parity(workspace, variant("llama-tiny", "int8", "ort_cpu"), request)
    case = FakeCase(tmp_path)
    record(case, res)
    assert case.metrics == res.metrics and set(case.thresholds) == {c.metric for c in res.checks}
    rows = read_decoded(tmp_path / "decoded.jsonl")
    assert len(rows) == 8 and rows[0]["source"] and rows[0]["pytorch_tokens"]
    rescored, _ = score_rows(rows, "en")
    text_metrics = {k: v for k, v in res.metrics.items() if not k.startswith("cached_decoding.")}
    assert rescored == pytest.approx(text_metrics)  # the closed loop's numbers come from logits, not text
    assert res.metrics["cached_decoding.logits.cosine"] > 0.99  # and it ran: a cached ORT variant
    gen = case.data["generation"]
    assert gen["settings"]["max_new_tokens"] == 8 and gen["settings"]["samples"] == 8
    assert gen["signatures"]["bleu_vs_torch"].startswith("nrefs:1")
    for pair in case.data["worst_pairs"]:
        assert set(pair) >= {"index", "source", "reference", "pytorch", "variant", "edit_distance",
                             "norm_edit_distance"}


def test_closed_loop_replays_for_a_deterministic_variant_and_skips_pytorch_variants(workspace):
    """A warm rerun replays the closed loop's measurement (the gates attached fresh) instead of
    stepping PyTorch and the variant again; a PyTorch variant decodes with transformers' own
    cache (the reference's code), so it has no closed loop at all."""
    request = GenerationRequest(samples=4, max_new_tokens=4, batch_size=4)
    first = generation_parity(workspace, variant("llama-tiny", "fp32", "ort_cpu"), request)
    again = generation_parity(workspace, variant("llama-tiny", "fp32", "ort_cpu"), request)
    assert again.settings["cached_decoding"]["replayed"] is True
    loop = {k: v for k, v in first.metrics.items() if k.startswith("cached_decoding.")}
    assert loop and loop == {k: v for k, v in again.metrics.items() if k.startswith("cached_decoding.")}
    assert {c.metric for c in first.checks} == {c.metric for c in again.checks} >= {"cached_decoding.logits.cosine"}
    torch_case = generation_parity(workspace, variant("llama-tiny", "fp16", "torch_cpu"), request)
    assert not any(k.startswith("cached_decoding.") for k in torch_case.metrics)
    assert "cached_decoding" not in torch_case.settings


def test_pytorch_reference_is_decoded_once_per_model(workspace):
    request = GenerationRequest(samples=4, max_new_tokens=4)
    model = workspace.model("llama-tiny")
    before = {k for k in model.cache if k[0] == "gen-reference"}
    generation_parity(workspace, variant("llama-tiny", "fp16", "ort_cpu"), request)
    first = {k for k in model.cache if k[0] == "gen-reference"} - before
    generation_parity(workspace, variant("llama-tiny", "int8", "torch_cpu"), request)
    assert {k for k in model.cache if k[0] == "gen-reference"} - before == first and len(first) == 1


def _records(out: Path) -> dict[str, dict]:
    lines = (out / "results.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, lines)}


def test_suite_end_to_end_records_metrics_worst_pairs_and_decoded_files(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_gen_suite=SUITE)
    out = tmp_path / "run"
    result_ = pytester.runpytest_inprocess(
        "--harness-models=llama-tiny,bert-tiny", "--harness-precisions=fp32,int8", "--harness-providers=ort_cpu",
        "--harness-gen-samples=8", "--harness-gen-max-new-tokens=8", f"--harness-out={out}", "-p", "no:cacheprovider")
    records = _records(out)
    assert set(records) == {f"test_generation_parity[llama-tiny-{p}-ort_cpu]" for p in ("fp32", "int8")}
    fp32 = records["test_generation_parity[llama-tiny-fp32-ort_cpu]"]
    assert fp32["verdict"] == "pass" and fp32["metrics"]["gen_token_exact_match"] == 1.0
    assert fp32["thresholds"]["gen_token_exact_match"] == {"threshold": 1.0, "op": ">="}
    int8 = records["test_generation_parity[llama-tiny-int8-ort_cpu]"]
    gated_ok = all((int8["metrics"][m] >= t["threshold"]) if t["op"] == ">=" else (int8["metrics"][m] <= t["threshold"])
                   for m, t in int8["thresholds"].items())
    assert int8["verdict"] == ("pass" if gated_ok else "fail")
    assert int8["data"]["worst_pairs"], "INT8 on a random-weight LM diverges somewhere in 8 sentences"
    for rec in records.values():
        decoded = Path(rec["data"]["generation"]["decoded"])
        assert decoded.is_file() and decoded.is_relative_to(out)
        assert len(read_decoded(decoded)) == rec["metrics"]["gen_sentences"] == 8
    summary = (out / "summary.md").read_text()
    assert "## Worst sentences per generation case" in summary and "llama-tiny-int8-ort_cpu" in summary
    assert result_.ret in (0, 1)


def test_negative_sample_count_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makepyfile(test_gen_suite=SUITE)
    result_ = pytester.runpytest_inprocess("--harness-gen-samples=-1")
    assert result_.ret == pytest.ExitCode.USAGE_ERROR
    result_.stderr.fnmatch_lines(["*--harness-gen-samples: must be >= 0, got -1*"])


class _GrowingCache:
    """A cached stepper with known answers: logits from the history, one cache position per step."""

    def __init__(self, rows: int) -> None:
        self.past: dict[str, np.ndarray] | None = None
        self.cross = np.ones((rows, 1, 2, 3), np.float32)  # fed back unchanged, as a cross-attention cache
        self.own = np.zeros((rows, 1, 0, 3), np.float32)
        self.calls = 0

    def step(self, history: np.ndarray) -> np.ndarray:
        self.calls += 1
        new = np.sin(history[:, None, -1:, None] * np.arange(1, 4)).astype(np.float32)  # [rows, 1, 1, 3]
        self.own = np.concatenate([self.own, new], axis=2)
        self.past = {"present.0.decoder.key": self.own, "present.0.encoder.key": self.cross}
        scores = np.cos(history.sum(axis=1, keepdims=True) * np.arange(1, 7)).astype(np.float32)
        scores[history.shape[1] > 3 + history[:, :1].ravel() % 3, 5] = 9.0  # rows end (EOS 5) at different steps
        return scores

    def reorder(self, rows: np.ndarray) -> None:
        raise AssertionError("greedy search does not reorder")


class _Toy:
    def start(self, input_ids: np.ndarray, attention_mask: np.ndarray, expand: int, use_cache: bool):
        from harness.families.steppers import Start

        return Start(input_ids.copy(), _GrowingCache(len(input_ids)))


def test_the_closed_loop_reference_is_the_reference_decode_recorded():
    """The reference's greedy decode, recorded step by step, is what stepping it again teacher-forced
    on its own tokens records (``record_side``): the closed loop takes it and does not step PyTorch
    twice. A recording that is not those steps (tokens it did not decode) is refused."""
    from harness.generation.search import search
    from harness.generation.settings import GenerationSettings
    from harness.judge.cached_decoding import ReferenceSteps, _forced, record_side

    settings = GenerationSettings(max_new_tokens=6, eos_token_ids=(5,), pad_token_id=0)
    prompts = [np.array([[1], [2], [3]]), np.array([[4], [6]])]
    steps, tokens = ReferenceSteps(), []
    for ids in prompts:
        tokens += search(steps(_Toy().start(ids, np.ones_like(ids), 1, True)), settings)
    assert len({len(t) for t in tokens}) > 1  # rows finished at different steps: filled rows were stepped too
    recorded = steps.sides(tokens, 3)
    assert recorded is not None and len(recorded) == 2
    for side, ids, lo in zip(recorded, prompts, (0, 3)):
        rows = tokens[lo: lo + 3]
        again = record_side(_Toy(), ids, np.ones_like(ids), _forced(rows, max(map(len, rows)), settings.fill_token_id))
        assert side.append_only and again.append_only
        for name, value in again.as_arrays().items():
            np.testing.assert_array_equal(side.as_arrays()[name], value, err_msg=name)
    assert steps.sides([[*t, 5] for t in tokens], 3) is None  # one step more than it took: not its record
    assert ReferenceSteps().sides(tokens, 3) is None  # decoded elsewhere (read from a cache): nothing recorded
