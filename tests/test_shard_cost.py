"""Shards without durations are balanced by estimated cost (harness.shard.cost), not by count:
``--shard 1/2`` of a default-like matrix used to get every ort_cpu case and 2/2 every torch_cpu one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.core import Precision, Variant
from harness.runners import PROVIDERS
from harness.shard.cost import case_cost
from harness.shard.plan import assign, digest


def _matrix() -> tuple[list[str], dict[str, Variant], dict[str, str]]:
    ids, variants, tests = [], {}, {}
    for test in ("test_logits_parity", "test_latency", "test_cold_start_memory"):
        for model in ("bert-tiny", "marian-tiny"):
            for precision in ("fp32", "fp16", "int8"):
                for provider in ("ort_cpu", "torch_cpu"):
                    v = Variant(model, Precision(precision), PROVIDERS[provider])
                    case = f"{test}[{v.id}]"
                    ids.append(case)
                    variants[case], tests[case] = v, test
    return ids, variants, tests


def test_cost_factors_order_cases_as_their_work_does() -> None:
    ids, variants, tests = _matrix()
    cost = {c: case_cost(tests[c], variants[c]) for c in ids}
    parity = cost["test_logits_parity[bert-tiny-fp32-ort_cpu]"]
    assert cost["test_cold_start_memory[bert-tiny-fp32-ort_cpu]"].weight > parity.weight * 4
    assert cost["test_logits_parity[bert-tiny-fp16-ort_cpu]"].weight > parity.weight
    assert cost["test_logits_parity[bert-tiny-fp32-torch_cpu]"].weight < parity.weight
    assert cost["test_logits_parity[marian-tiny-fp32-ort_cpu]"].graphs == 3 and parity.graphs == 1


def test_pytorch_fp16_on_a_cpu_counts_its_size_three_times() -> None:
    """No half-precision matrix units on a CPU: minilm-l6's logits parity took 1.81-1.89 s at FP16
    on torch_cpu against 0.52-0.68 s at FP32. ONNX Runtime's FP16 and a GPU's are not slowed so."""
    from harness.shard.cost import SIZE_UNIT, TORCH_CPU_FP16_SIZE

    sizes = {"minilm-l6": 90 * 1024 * 1024}

    def size(precision: str, provider: str) -> float:
        variant = Variant("minilm-l6", Precision(precision), PROVIDERS[provider])
        return case_cost("test_logits_parity", variant, sizes=dict(sizes), exports={"minilm-l6": 0.0}).size

    assert size("fp16", "torch_cpu") == pytest.approx(1 + TORCH_CPU_FP16_SIZE * 90 / 64, abs=1e-3)
    assert size("fp32", "torch_cpu") == size("fp16", "ort_cpu") == size("fp16", "torch_cuda") \
        == pytest.approx(1 + sizes["minilm-l6"] / SIZE_UNIT, abs=1e-3)


def test_split_without_durations_mixes_backends_and_balances_cost() -> None:
    ids, variants, tests = _matrix()
    estimates = {c: case_cost(tests[c], variants[c]).weight for c in ids}
    by_count, _ = assign(ids, 2)  # the old split: alternate ids, one backend per shard
    assert all(len({variants[c].provider.short for c in shard}) == 1 for shard in by_count)
    shards, load = assign(ids, 2, None, estimates)
    assert sorted(c for s in shards for c in s) == sorted(ids)
    assert all(len({variants[c].provider.short for c in shard}) == 2 for shard in shards)
    assert max(load) - min(load) <= max(estimates.values())  # LPT: within one case
    count_load = [sum(estimates[c] for c in s) for s in by_count]
    assert max(load) - min(load) < max(count_load) - min(count_load)
    assert digest(ids, 2, None, estimates) != digest(ids, 2, None)
    # durations, where given, still decide
    durations = {c: 1.0 for c in ids}
    assert assign(ids, 2, durations, estimates) == assign(ids, 2, durations)


def test_shard_run_records_it_balanced_by_estimated_cost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "s1"
    code = main(["run", "--models", "bert-tiny", "--precisions", "fp32", "int8", "--providers", "ort_cpu", "torch_cpu",
                 "--shard", "1/2", "--out", str(out), "--pytest-args", "--collect-only", "-q"])
    assert code == 0
    plan = json.loads((out / "shard.json").read_text())
    assert plan["balanced_by"] == "estimated cost" and plan["expected_cost"] > 0 and plan["expected_s"] is None
    assert {c.rsplit("-", 1)[-1].rstrip("]") for c in plan["cases"]} == {"ort_cpu", "torch_cpu"}


def test_suite_factors_follow_the_kind_of_variant_and_a_slow_exporter_costs_until_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PyTorch variant's cold start imports torch and builds its module in every fresh process
    (25-31 s against 1-2 s for ONNX Runtime here); a dynamo export costs its own time whatever the
    model's size, once: not when the model's FP32 graph is already in the artifact cache."""
    from harness.shard.cost import EXPORTER_COST

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))

    def cost(test: str, model: str, provider: str) -> float:
        return case_cost(test, Variant(model, Precision.FP32, PROVIDERS[provider])).weight

    cold_torch, cold_ort = cost("test_cold_start_memory", "bert-tiny", "torch_cpu"), cost(
        "test_cold_start_memory", "bert-tiny", "ort_cpu")
    assert cold_torch > 5 * cold_ort
    parity_torch, parity_ort = cost("test_logits_parity", "bert-tiny", "torch_cpu"), cost(
        "test_logits_parity", "bert-tiny", "ort_cpu")
    assert parity_torch < parity_ort  # the control: in a parity case PyTorch exports nothing and is cheaper
    exported = case_cost("test_logits_parity", Variant("encoder-custom", Precision.FP32, PROVIDERS["ort_cpu"]))
    assert exported.export == EXPORTER_COST["dynamo"] > 0
    assert case_cost("test_logits_parity", Variant("encoder-custom", Precision.FP32, PROVIDERS["torch_cpu"])).export == 0
    assert case_cost("test_logits_parity", Variant("bert-tiny", Precision.FP32, PROVIDERS["ort_cpu"])).export == 0
    (tmp_path / "artifacts" / "encoder-custom-model-fp32-0123456789abcdef").mkdir(parents=True)
    cached = case_cost("test_logits_parity", Variant("encoder-custom", Precision.FP32, PROVIDERS["ort_cpu"]))
    assert cached.export == 0 and cached.weight < exported.weight


def test_flat_suites_cost_the_same_whatever_the_graphs_and_the_precision(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold start (fresh processes that import and load the model) and a generation benchmark
    (a fixed count of timed generations) took about the same on a one-graph and a three-graph
    model, at every precision (harness.shard.cost.SuiteFactor.flat): graphs x precision priced
    marian-tiny's FP16 cold start 4.5x llama-tiny's FP32 one, against 28 s and 24 s measured. A
    parity case still scales with both."""
    from harness.shard.cost import SUITE_FACTOR, TORCH_FACTOR

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))  # no model on disk: every size is 1

    def weight(test: str, model: str, precision: str, provider: str) -> float:
        return case_cost(test, Variant(model, Precision(precision), PROVIDERS[provider])).weight

    for test in ("test_cold_start_memory", "test_generation_perf"):
        assert SUITE_FACTOR[test].flat
        factor = SUITE_FACTOR[test]
        for provider, expected in (("ort_cpu", factor.files), ("torch_cpu", factor.pytorch * TORCH_FACTOR)):
            weights = {weight(test, m, p, provider) for m in ("marian-tiny", "llama-tiny") for p in ("fp32", "fp16", "int8")}
            assert weights == {round(expected, 4)}, (test, provider, weights)
    parity = weight("test_logits_parity", "llama-tiny", "fp32", "ort_cpu")
    assert weight("test_logits_parity", "marian-tiny", "fp32", "ort_cpu") == 3 * parity  # encoder, decoder, with past
    assert weight("test_logits_parity", "llama-tiny", "fp16", "ort_cpu") == 1.5 * parity
