"""The metric registry against everything that names a metric: the code that computes it, the
gates that judge it, the config validator, the CLI parsers and the docs.

Each metric is declared once in ``harness/metrics/registry.py``; these tests fail when any other
place knows a name, a direction or a threshold the registry does not (the drift that once made a
documented budget error every perf case).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import tomllib

from harness.core import Check, Precision, Tolerance, UsageError, Variant
from harness.metrics.registry import (
    METRICS,
    Direction,
    MetricRegistry,
    MetricSpec,
    Outputs,
    PerfReading,
    Scope,
    Thresholds,
    budget_names,
    metric,
    tensor_metric_names,
    tolerance_names,
)
from harness.runners import PROVIDERS
from harness.settings.doc_tables import BLOCKS, blocks_in, doc_files, render_text, stale

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ the values before the registry existed
# Copied from the tree before this change (harness/judge/tolerances.py, harness/core/types.py, generation_parity.py,
# debug/bisect.py, zoo/minilm.py, metrics/numeric.py and text.py): the registry must reproduce them exactly.
OLD_DEFAULT_TOLERANCES = {
    Precision.FP32: {"norm_max_abs": 1e-4, "cosine": 0.99999, "top1_agreement": 1.0, "kl": 1e-6},
    Precision.FP16: {"norm_max_abs": 1e-2, "cosine": 0.9999, "top1_agreement": 0.98, "kl": 1e-3},
    Precision.INT8: {"norm_max_abs": 0.15, "cosine": 0.99, "top1_agreement": 0.90, "kl": 0.02},
}
#: added later, measured on the trained numbers-llama (harness/metrics/registry.py): INT4's own numeric gates;
#: everything else INT4 gates with is INT8's
INT4_DEFAULT_TOLERANCES = {"norm_max_abs": 0.35, "cosine": 0.98, "top1_agreement": 0.75, "kl": 0.15}
OLD_LOGITS_ONLY = {"top1_agreement", "topk_agreement", "kl", "kl_max"}
OLD_HIGHER_IS_BETTER = {"cosine", "top1_agreement", "topk_agreement"}
OLD_GEN_TOLERANCES = {
    Precision.FP32: {"gen_token_exact_match": 1.0},
    Precision.FP16: {"gen_bleu_vs_torch": 85.0, "gen_bleu_ref_drop": 1.0, "gen_repetition_increase": 0.02},
    Precision.INT8: {"gen_bleu_vs_torch": 30.0, "gen_bleu_ref_drop": 2.0, "gen_repetition_increase": 0.05},
}
OLD_GEN_HIGHER_IS_BETTER = {
    "gen_token_exact_match", "gen_position_match", "gen_mean_first_divergence", "gen_bleu_vs_torch",
    "gen_chrf_vs_torch", "gen_exact_match_vs_torch", "gen_bleu_vs_ref", "gen_chrf_vs_ref", "gen_exact_match_vs_ref",
    "gen_torch_bleu_vs_ref", "gen_torch_exact_match_vs_ref", "gen_token_exact_match_long", "gen_bleu_vs_torch_long",
}
OLD_REFERENCE_METRICS = {"gen_bleu_vs_ref", "gen_chrf_vs_ref", "gen_exact_match_vs_ref", "gen_norm_edit_vs_ref",
                         "gen_length_ratio_vs_ref", "gen_torch_bleu_vs_ref", "gen_torch_exact_match_vs_ref",
                         "gen_bleu_ref_drop",
                         "gen_ter_vs_ref"}  # added later, on purpose: TER against the references (ungated)
OLD_TEXT_HIGHER = {"bleu", "chrf", "exact_match", "exact_sequence_match", "mean_first_divergence", "position_match"}
OLD_EMBEDDING_DEFAULTS = {
    "fp32": {"embedding_cosine": 0.99999, "embedding_cosine_min": 0.9999},
    "fp16": {"embedding_cosine": 0.9999, "embedding_cosine_min": 0.999},
    "int8": {"embedding_cosine": 0.93, "embedding_cosine_min": 0.90},
}
OLD_TENSOR_METRICS = ("max_abs", "mean_abs", "p99_abs", "max_rel", "norm_max_abs", "rel_l2", "cosine")
#: every name the config validator accepted as a budget or that perf/budgets.py measured
OLD_BUDGETS = {"p50_ms", "p90_ms", "p95_ms", "p99_ms", "mean_ms", "cold_start_ms", "first_inference_ms",
               "peak_rss_mb", "artifact_mb", "load_ms", "ttft_ms", "tpot_ms"}


# ------------------------------------------------------------------ the registry itself
def test_a_metric_is_declared_once_and_lookups_suggest_the_closest_name():
    spec = METRICS["cosine"]
    with pytest.raises(ValueError, match="declared twice"):
        MetricRegistry([spec, spec])
    with pytest.raises(UsageError, match=r"unknown metric 'cosin' \(did you mean 'cosine'\?\)"):
        metric("cosin")
    with pytest.raises(UsageError, match=r"unknown budget 'p50' \(did you mean 'p50_ms'\?\)"):
        METRICS.lookup("p50", Scope.PERF_BUDGET, what="budget")
    with pytest.raises(UsageError, match="unknown budget 'cosine'"):  # a metric of another scope is not a budget
        METRICS.lookup("cosine", Scope.PERF_BUDGET, what="budget")
    assert len(METRICS) == len(set(METRICS.names())) > 50


_BASE = {"name": "x", "direction": Direction.LOWER, "scope": Scope.EMBEDDING, "description": "d"}


@pytest.mark.parametrize("changes, message", [
    ({"scope": Scope.NUMERIC}, "'outputs'"),
    ({"scope": Scope.PERF_BUDGET}, "'reading'"),
    ({"scope": Scope.PERF_BUDGET, "direction": Direction.HIGHER, "reading": PerfReading((("a",),))}, "upper limit"),
    ({"thresholds": Thresholds(fp32=-1.0)}, "not a valid bound"),
    ({"name": "X y"}, "lower-case"),
    ({"description": " "}, "description"),
    ({"scope": Scope.TEXT, "needs_references": True}, "references"),
    ({"context": True, "thresholds": Thresholds(fp32=1.0)}, "context"),
])
def test_inconsistent_declarations_are_refused(changes, message):
    MetricSpec(**_BASE)  # the base is valid: each case breaks one rule
    with pytest.raises(ValueError, match=message):
        MetricSpec(**{**_BASE, **changes})


def test_checks_take_their_direction_from_the_declaration():
    assert metric("cosine").check(0.9) == Check("cosine", 0.9, True)
    assert metric("kl").check(0.1) == Check("kl", 0.1, False)
    assert metric("gen_bleu_vs_torch").default_check(Precision.INT8) == Check("gen_bleu_vs_torch", 30.0, True)
    assert metric("gen_bleu_vs_torch").default_check(Precision.FP32) is None
    assert {s.role for s in METRICS} == {"gate", "advisory", "context"}
    assert metric("max_abs").role == "advisory" and metric("gen_sentences").role == "context"
    assert all(s.role == "gate" for s in METRICS.of(Scope.PERF_BUDGET))


# ------------------------------------------------------------------ behaviour unchanged
@pytest.mark.parametrize("precision", list(Precision))
@pytest.mark.parametrize("is_logits", [True, False])
def test_default_numeric_tolerances_are_the_ones_before_the_registry(precision, is_logits):
    from harness.judge.tolerances import DEFAULT_TOLERANCES, LOGITS_ONLY, tolerance_for

    # int8-static starts from int8's; int4 has its own
    old = INT4_DEFAULT_TOLERANCES if precision is Precision.INT4 else OLD_DEFAULT_TOLERANCES[Precision(precision.tolerance_key)]
    expected = Tolerance(tuple(Check(m, t, m in OLD_HIGHER_IS_BETTER) for m, t in old.items()
                               if is_logits or m not in OLD_LOGITS_ONLY))
    assert tolerance_for(precision, is_logits=is_logits) == expected  # values, directions and order
    assert DEFAULT_TOLERANCES[precision] == old and LOGITS_ONLY == OLD_LOGITS_ONLY
    overrides = {precision.value: {"cosine": 0.5, "max_abs": 3.0, "kl_max": 1.0, "gen_bleu_vs_torch": 1.0}}
    got = {c.metric: c for c in tolerance_for(precision, is_logits=is_logits, overrides=overrides).checks}
    assert got["cosine"] == Check("cosine", 0.5, True) and got["max_abs"] == Check("max_abs", 3.0, False)
    assert ("kl_max" in got) == is_logits and "gen_bleu_vs_torch" not in got  # another gate's metric


def test_every_direction_and_default_gate_is_the_one_before_the_registry():
    from harness.debug.bisect import DEFAULT_BISECT_TOLERANCES, TENSOR_METRICS
    from harness.judge.generation import GEN_TOLERANCES, REFERENCE_METRICS, gen_checks
    from harness.zoo.minilm import EMBEDDING_DEFAULTS, embedding_tolerance

    for spec in METRICS.of(Scope.NUMERIC):
        assert spec.higher_is_better == (spec.name in OLD_HIGHER_IS_BETTER), spec.name
    for spec in METRICS.of(Scope.TEXT):
        assert spec.higher_is_better == (spec.name in OLD_TEXT_HIGHER), spec.name
    for spec in METRICS.of(Scope.GENERATION):
        assert spec.higher_is_better == (spec.name in OLD_GEN_HIGHER_IS_BETTER), spec.name
    # added later: int8-static starts from int8's thresholds everywhere, int4 where it declares none of its own
    later = (Precision.INT8_STATIC, Precision.INT4)
    assert {p: v for p, v in GEN_TOLERANCES.items() if p not in later} == OLD_GEN_TOLERANCES
    assert REFERENCE_METRICS == OLD_REFERENCE_METRICS
    for precision in Precision:
        old = precision.default_source or Precision(precision.tolerance_key)
        assert gen_checks(precision) == tuple(Check(m, t, m in OLD_GEN_HIGHER_IS_BETTER)
                                              for m, t in OLD_GEN_TOLERANCES[old].items())
        numeric = INT4_DEFAULT_TOLERANCES if precision is Precision.INT4 else OLD_DEFAULT_TOLERANCES[old]
        assert DEFAULT_BISECT_TOLERANCES[precision] == {m: numeric[m] for m in ("norm_max_abs", "cosine")}
        assert embedding_tolerance(precision.value) == Tolerance(
            tuple(Check(m, t, True) for m, t in OLD_EMBEDDING_DEFAULTS[old.value].items()))
    assert {p: v for p, v in EMBEDDING_DEFAULTS.items() if p not in {q.value for q in later}} == OLD_EMBEDDING_DEFAULTS
    assert TENSOR_METRICS == OLD_TENSOR_METRICS
    assert metric("training_mode_ops").thresholds == Thresholds.uniform(0.0)


def test_the_core_types_declare_no_metric_direction():
    """Which way a metric is good is the registry's (``MetricSpec.direction``); ``harness.core``, below
    the registry, has no set of its own (0.1's ``harness.config.HIGHER_IS_BETTER`` is gone)."""
    import harness.core

    with pytest.raises(AttributeError):
        harness.core.HIGHER_IS_BETTER  # noqa: B018
    assert not (Path(harness.core.__file__).parents[1] / "config.py").exists()


# ------------------------------------------------------------------ the code produces exactly what is declared
def test_compare_arrays_produces_exactly_the_declared_numeric_metrics():
    from harness.metrics.numeric import compare_arrays

    rng = np.random.default_rng(0)
    ref = rng.normal(size=(2, 3, 7))
    produced = {
        (False, False): compare_arrays(ref, ref + 1e-3).metrics,
        (False, True): compare_arrays(ref, ref + 1e-3, is_logits=True).metrics,
        (True, False): compare_arrays(np.arange(6), np.arange(6) + (np.arange(6) == 2)).metrics,
    }
    nan = compare_arrays(ref, np.where(ref > 1, np.nan, ref), is_logits=True).metrics  # the non-finite path
    assert set(nan) == set(produced[(False, True)])
    for (exact, logits), metrics in produced.items():
        declared = {s.name for s in METRICS.of(Scope.NUMERIC) if s.outputs and s.outputs.applies(exact=exact,
                                                                                                 logits=logits)}
        assert set(metrics) == declared, (exact, logits)
    assert set().union(*map(set, produced.values())) == set(METRICS.names(Scope.NUMERIC))


def test_text_scorers_produce_exactly_the_declared_text_metrics():
    from harness.metrics.text import corpus_scores, token_agreement

    produced = set(corpus_scores(["a b c d e"], ["a b c d f"]).metrics) | set(token_agreement([[1, 2]], [[1, 3]]))
    assert produced | {"repetition_rate"} == set(METRICS.names(Scope.TEXT))


def _rows(with_refs: bool) -> list[dict]:
    long = " ".join(f"w{i}" for i in range(35))
    rows = [{"source": long, "reference": long if with_refs else None, "pytorch": long, "variant": long + " x",
             "pytorch_tokens": [1, 2, 3], "variant_tokens": [1, 2, 4]},
            {"source": "short one", "reference": "short one" if with_refs else None, "pytorch": "short one",
             "variant": "short one", "pytorch_tokens": [5], "variant_tokens": [5]}]
    return rows


def test_score_rows_produces_exactly_the_declared_generation_metrics():
    from harness.judge.generation import score_rows

    declared = set(METRICS.names(Scope.GENERATION))
    with_refs, _ = score_rows(_rows(True), "en")
    assert set(with_refs) == declared
    without, _ = score_rows(_rows(False), "en")
    assert set(without) == {s.name for s in METRICS.of(Scope.GENERATION) if not s.needs_references}


def test_embedding_and_lint_produce_exactly_the_declared_metrics(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    from harness.judge.numeric import lint_result
    from harness.zoo.minilm import embedding_metrics

    assert set(embedding_metrics(np.ones((2, 4)), np.ones((2, 4)))) == set(METRICS.names(Scope.EMBEDDING))
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), path)
    from harness.families.base import GraphSpec

    result = lint_result("model", str(path), GraphSpec("model", ("x",), ("y",), {"x": {0: "batch"}}))
    # shape_failures is the lint of a run (judge.numeric.run_graph_parity's shape probes), not of the file;
    # sentences_cut counts the corpus a file with a baked length cannot take (harness check's shape coverage)
    assert set(result.metrics) | {"shape_failures", "sentences_cut"} == set(METRICS.names(Scope.ARTIFACT_LINT))
    for precision in Precision:  # the lint's gate is the declared default at every precision
        assert result.tolerance.checks == (metric("training_mode_ops").default_check(precision),
                                           metric("tied_axes").default_check(precision))


# ------------------------------------------------------------------ config, CLI and gates accept what is declared
def test_config_validator_accepts_every_declared_tolerance_and_budget(tmp_path):
    from harness.settings.config_file import load_config

    tolerances = "\n".join(f"{name} = 0.5" for name in tolerance_names())
    budgets = "\n".join(f"{name} = 10" for name in budget_names())
    text = "".join(f"[tolerances.{p.value}]\n{tolerances}\n" for p in Precision) + f"[budgets]\n{budgets}\n"
    (tmp_path / "harness.toml").write_text(text)
    cfg = load_config(tmp_path / "harness.toml")
    assert all(list(cfg.tolerances[p.value]) == list(tolerance_names()) for p in Precision)
    assert list(cfg.budgets) == list(budget_names())
    assert set(budget_names()) >= OLD_BUDGETS  # every name any part of the harness accepted before
    (tmp_path / "harness.toml").write_text("[budgets]\nmean_msec = 3\n")
    with pytest.raises(UsageError, match=r"budgets.mean_msec: unknown budget \(did you mean 'mean_ms'\?\)"):
        load_config(tmp_path / "harness.toml")
    (tmp_path / "harness.toml").write_text("[tolerances.fp32]\ngen_bleu_vs_torh = 3\n")
    with pytest.raises(UsageError, match=r"unknown metric \(did you mean 'gen_bleu_vs_torch'\?\)"):
        load_config(tmp_path / "harness.toml")


def test_every_budget_passes_the_gates_validation():
    from harness.perf import budgets

    assert budgets.validate({name: 1.0 for name in budget_names()}, "m") == {name: 1.0 for name in budget_names()}


def test_cli_tolerance_parsers_accept_the_declared_metrics_of_their_scope():
    from harness.cli import build_parser
    from harness.cli.bisect import _validate
    from harness.cli.check import parse_tolerances

    parser = build_parser()
    flags = [a for name in tolerance_names() for a in ("--tolerance", f"{name}=0.5")]
    args = parser.parse_args(["check", "--reference", "bert-tiny", "--onnx", "x.onnx", *flags])
    assert list(parse_tolerances(args.tolerance)) == list(tolerance_names())
    flags = [a for name in tensor_metric_names() for a in ("--tolerance", f"{name}=0.5")]
    args = parser.parse_args(["bisect", "--models", "bert-tiny", "--precisions", "int8", *flags])
    assert list(_validate(args)[1]) == list(tensor_metric_names())
    for refused in ("kl", "top1_agreement", "mismatch_rate", "p50_ms"):  # logits-only, integer-only, a budget
        args = parser.parse_args(["bisect", "--models", "bert-tiny", "--precisions", "int8", "--tolerance",
                                  f"{refused}=0.5"])
        with pytest.raises(UsageError, match=f"unknown metric '{refused}'"):
            _validate(args)
    with pytest.raises(UsageError, match=r"did you mean 'cosine'"):
        parse_tolerances(["cosin=0.9"])


def test_bisect_tolerance_covers_every_tensor_metric_with_its_direction():
    from harness.debug.bisect import as_tolerance

    tol = as_tolerance({name: 0.5 for name in tensor_metric_names()})
    assert tol.checks == tuple(metric(n).check(0.5) for n in tensor_metric_names())
    assert all(METRICS[n].outputs in (Outputs.ALL, Outputs.FLOAT) for n in tensor_metric_names())


def test_every_tolerance_scope_has_a_gate_that_uses_its_overrides():
    """A tolerance the config accepts reaches the gate of its scope (numeric, generation, embedding)."""
    from harness.judge.generation import gen_checks
    from harness.judge.tolerances import scope_tolerance, tolerance_for
    from harness.zoo.minilm import embedding_tolerance

    for p in Precision:
        overrides = {p.value: {name: 0.5 for name in tolerance_names()}}
        numeric = {c.metric for c in tolerance_for(p, is_logits=True, overrides=overrides).checks}
        assert numeric == set(METRICS.names(Scope.NUMERIC))
        assert {c.metric for c in gen_checks(p, overrides)} == set(METRICS.names(Scope.GENERATION))
        assert {c.metric for c in embedding_tolerance(p.value, overrides).checks} == set(METRICS.names(Scope.EMBEDDING))
        assert {c.metric for c in scope_tolerance(Scope.SPAN, p, overrides).checks} == set(METRICS.names(Scope.SPAN))
    with pytest.raises(UsageError, match="did you mean 'gen_bleu_vs_torch'"):  # a typo in a ModelSpec is loud
        gen_checks(Precision.INT8, {"int8": {"gen_bleu_vs_torh": 1.0}})


# ------------------------------------------------------------------ perf budgets: each one fails a case
def _real_perf_payload(tmp_path: Path) -> dict:
    """A ``perf`` payload with every field the perf suite records, built with the suite's own functions."""
    from harness.perf import coldstart, memory
    from harness.perf.measure import latency_entry, latency_key

    perf: dict = {}
    perf[latency_key()] = latency_entry([2.0, 3.0, 4.0, 9.0], warmup=1, engine="harness", graph="model",
                                        batch_size=1, seq_len=8)  # test_latency
    for gen, samples in (("ttft", [5.0, 6.0, 7.0]), ("tpot", [1.0, 1.5, 2.0])):  # test_generation_perf
        for kv in ("on", "off"):
            perf[latency_key(gen=gen, kv=kv)] = latency_entry(samples, warmup=1, engine="harness", kv=kv)
    runs = [{"import_ms": 100.0, "load_ms": 40.0 + i, "first_inference_ms": 4.0 + i, "ready_ms": 150.0,
             "process_ms": 300.0, "peak_rss_bytes": (200 + i) * 2 ** 20, "peak_rss_after_load_bytes": 190 * 2 ** 20,
             "steady_ms": [1.0]} for i in range(3)]  # what harness.perf.child reports
    perf.update(coldstart.cold_start_fields(runs))  # test_cold_start_memory
    perf.update(memory.memory_fields(runs, {"baseline_rss_bytes": 10 * 2 ** 20, "imports_rss_bytes": 50 * 2 ** 20}))
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\0" * 3 * 2 ** 20)
    variant = Variant("m", Precision.FP32, PROVIDERS["torch_cpu"])
    from harness.runners.torch_runner import TorchBackend

    workspace = SimpleNamespace(backend=lambda variant, model: TorchBackend(None))  # the real backend counts bytes
    graphs = [SimpleNamespace(name="model")]  # the perf suite always passes the variant's graphs
    perf.update(memory.artifact_fields(workspace, variant, SimpleNamespace(path=tmp_path), None, graphs))
    from harness.serving.rate import RateLevel, RateSettings, rate_fields

    level = RateLevel(20.0, sent=40, samples_ms=[5.0] * 40, seconds=2.0, achieved=20.0)  # check_perf --request-rate
    perf["serving_rate"] = rate_fields([level], RateSettings(rates=(20.0,), p99_budget_ms=50.0), "grpc")["serving_rate"]
    return perf


def _case(budgets: dict) -> SimpleNamespace:
    return SimpleNamespace(model=SimpleNamespace(name="m", spec=SimpleNamespace(budgets=budgets)),
                           variant=Variant("m", Precision.FP32, PROVIDERS["ort_cpu"]), metrics={}, thresholds={})


def test_every_budget_is_read_from_the_payload_the_perf_suite_records(tmp_path):
    from harness.perf import budgets

    perf = _real_perf_payload(tmp_path)
    measured = budgets.measured_values(perf)
    assert set(measured) == set(budget_names())
    assert measured["mean_ms"] == perf["latency_ms"]["summary"]["mean"] == 4.5
    assert measured["cold_start_ms"] == measured["load_ms"] + measured["first_inference_ms"] == 41.0 + 5.0
    assert measured["peak_rss_mb"] == 201 and measured["artifact_mb"] == 3
    assert measured["ttft_ms"] == 6.0 and measured["tpot_ms"] == 1.5 and measured["p99_ms"] > measured["p50_ms"]
    assert measured["served_ms_per_request"] == 50.0  # 20 requests/s sustained


@pytest.mark.parametrize("name", budget_names())
def test_each_budget_fails_the_case_when_exceeded_and_passes_below(name, tmp_path):
    from harness.judge.numeric import GateFailure
    from harness.perf import budgets

    perf = _real_perf_payload(tmp_path)
    value = METRICS[name].reading.read(perf)
    assert value is not None and value > 0
    over = _case({name: value * 0.5})
    with pytest.raises(GateFailure, match=rf"1 performance budget\(s\) exceeded\n  .* exceeds budget {name} <= "):
        budgets.enforce(over, perf)
    assert over.metrics == {f"perf.{name}": value}
    assert over.thresholds == {f"perf.{name}": {"threshold": value * 0.5, "op": "<="}}
    under = _case({name: value * 2})
    assert [c.passed for c in budgets.enforce(under, perf)] == [True]
    assert under.metrics == {f"perf.{name}": value}
    # a payload from another perf test (without this number) does not check it at all
    assert budgets.enforce(_case({name: value * 0.5}), {"settings": {}}) == []


# ------------------------------------------------------------------ the docs
_GEN_NAME = re.compile(r"`(gen_[a-z0-9_]*[a-z0-9])`")
_BUDGET_LIKE = re.compile(r"`([a-z][a-z0-9_]*_(?:ms|mb))`")
_CLI_TOLERANCE = re.compile(r"--tolerance[ =]([a-z][a-z0-9_]*)=")
_INLINE_ASSIGN = re.compile(r"`([a-z][a-z0-9_]*)=[-+0-9.e]+`")
_DICT_ENTRY = re.compile(r'"([a-z][a-z0-9_]*)"\s*:\s*[-+]?[0-9]')
_DICT_START = re.compile(r"(?:tolerances?|budgets|bisect_tolerance\(|bisect_graph\()[^{\n]*\{")
_TOML_BLOCK = re.compile(r"```toml\n(.*?)```", re.DOTALL)
_GENERATED = re.compile(r"<!-- metrics:([a-z0-9-]+) -->.*?<!-- /metrics:\1 -->", re.DOTALL)


def _braced(text: str, start: int) -> str:
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i + 1]
    return text[start:]


def _toml_names(data: dict) -> tuple[set[str], set[str]]:
    """(tolerance names, budget names) of a parsed harness.toml or pyproject [tool.harness]."""
    data = data.get("tool", {}).get("harness", data)
    tolerances: set[str] = set()
    budgets: set[str] = set(data.get("budgets", {}))
    for table in [data] + list(data.get("models", {}).values()):
        for per_precision in table.get("tolerances", {}).values():
            tolerances |= set(per_precision)
        if table is not data:
            budgets |= set(table.get("budgets", {}))
    return tolerances, budgets


def mentioned_names(text: str) -> tuple[set[str], set[str]]:
    """(tolerance metric names, budget names) a page mentions outside its generated blocks."""
    tolerances: set[str] = set()
    budgets: set[str] = set()
    for block in _TOML_BLOCK.findall(text):
        try:
            found = _toml_names(tomllib.loads(block))
        except tomllib.TOMLDecodeError:
            continue
        tolerances |= found[0]
        budgets |= found[1]
    text = _GENERATED.sub("", text)
    tolerances |= set(_GEN_NAME.findall(text)) | set(_CLI_TOLERANCE.findall(text))
    for line in text.splitlines():
        if "tolerance" in line:
            tolerances |= set(_INLINE_ASSIGN.findall(line))
    for match in _DICT_START.finditer(text):
        names = set(_DICT_ENTRY.findall(_braced(text, match.end() - 1)))
        (budgets if match.group(0).startswith("budgets") else tolerances).update(names)
    for paragraph in text.split("\n\n"):
        if "budget" in paragraph.lower():
            budgets |= set(_BUDGET_LIKE.findall(paragraph)) - {"latency_ms"}  # the record field, not a budget
    for table in re.findall(r"^\| metric \|.*?(?=\n[^|]|\Z)", text, re.DOTALL | re.MULTILINE):
        tolerances |= {m for row in table.splitlines()[2:] for m in re.findall(r"`([a-z][a-z0-9_]*)`",
                                                                               row.split("|")[1])}
    return tolerances, budgets


def test_the_docs_scanner_finds_names_in_every_form_it_reads():
    page = '''
Use `gen_bleu_vs_tourch` and `--tolerance cosin=0.5`, e.g. `norm_max_ab=0.1` with --tolerance.
`ModelSpec(tolerances={"int8": {"top_agreement": 0.8}})` and `budgets={"p51_ms": 3}`.

A budget: `cold_ms` (MiB).

| metric | direction |
|---|---|
| `bogus_metric` | lower |

```toml
[models.x.tolerances.fp16]
kl_maxx = 1
[models.x.budgets]
ram_mb = 3
```
<!-- metrics:budgets -->`ignored_ms` in a budget<!-- /metrics:budgets -->
'''
    tolerances, budgets = mentioned_names(page)
    assert tolerances == {"gen_bleu_vs_tourch", "cosin", "norm_max_ab", "top_agreement", "bogus_metric", "kl_maxx"}
    assert budgets == {"p51_ms", "cold_ms", "ram_mb"}


@pytest.mark.parametrize("page", doc_files(ROOT) + [ROOT / "examples" / "harness.toml"], ids=lambda p: p.name)
def test_every_metric_and_budget_the_docs_name_is_declared(page):
    text = page.read_text(encoding="utf-8")
    if page.suffix == ".toml":
        tolerances, budgets = _toml_names(tomllib.loads(text))
    else:
        tolerances, budgets = mentioned_names(text)
    assert tolerances <= set(tolerance_names()), sorted(tolerances - set(tolerance_names()))
    assert budgets <= set(budget_names()), sorted(budgets - set(budget_names()))


def test_the_docs_name_the_metrics_in_generated_tables_that_are_up_to_date():
    found = {name for page in doc_files(ROOT) for name in blocks_in(page.read_text(encoding="utf-8"))}
    assert found == set(BLOCKS)  # every table the registry renders is on some page
    assert stale(ROOT) == [], "run: python scripts/render_metric_docs.py"
    for scope in Scope:  # every declared metric is in some generated table
        names = set(METRICS.names(scope))
        rendered = "".join(render_text(page.read_text(encoding="utf-8")) for page in doc_files(ROOT))
        assert all(f"`{n}`" in rendered for n in names), scope


def test_render_script_check_mode_fails_on_a_stale_page_and_rewrite_fixes_it(tmp_path):
    script = ROOT / "scripts" / "render_metric_docs.py"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=False)

    assert run("--check").returncode == 0
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "config.md"
    page.write_text("Budgets: <!-- metrics:budget-names -->`p50_ms`<!-- /metrics:budget-names -->.\n")
    result = run("--check", "--root", str(tmp_path))
    assert result.returncode == 1 and "docs/config.md: metric tables are stale" in result.stdout
    assert run("--root", str(tmp_path)).returncode == 0
    assert "`mean_ms`" in page.read_text() and "`cold_start_ms`" in page.read_text()
    assert run("--check", "--root", str(tmp_path)).returncode == 0
