"""harness.perf.tail: the p99 interval, sampling until it is sharp, and the gate gating p99
only where both runs bound it (synthetic samples with known truth, scripted clocks)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from harness.gate.compare import DEFAULT_POLICIES, Verdict, compare_runs
from harness.perf import latency
from harness.perf.measure import PerfSettings
from harness.perf.tail import (
    DEFAULT_TAIL_TARGET,
    estimate,
    min_calls,
    precise_enough,
    quantile_interval,
    sample_for_tail,
)
from harness.runners.base import GraphRef
from tests.perf_records import measured_processes

ENV = {"fingerprint": "abc123", "cpu": "Test CPU", "cores": 2, "versions": {"onnxruntime": "1.20.0"}}
VARIANT = "encoder-custom-fp32-ort_cpu"


def lognormal(seed: int, n: int, scale: float = 1.0, sigma: float = 0.1) -> list[float]:
    return (2.0 * scale * np.random.default_rng(seed).lognormal(0.0, sigma, n)).tolist()


def rec(samples: list[float]) -> dict[str, Any]:
    return {"schema": "harness.result/1", "id": f"test_latency[{VARIANT}]", "variant": VARIANT, "suite": "perf",
            "verdict": "pass", "metrics": {}, "env": ENV,
            "perf": {"latency_ms": {"samples": samples, "warmup": 10, "summary": {}},
                     "cold_start_runs": measured_processes()}}


def p99_row(comparison):
    (row,) = [r for r in comparison.rows if r.metric == "latency_ms.p99"]
    return row


def test_p99_needs_368_calls_before_it_has_an_interval():
    assert min_calls(0.99) == 368 and min_calls(0.5) == 6
    assert quantile_interval(lognormal(1, 367)) is None
    lo, hi = quantile_interval(lognormal(1, 368))  # type: ignore[misc]
    assert lo < hi


def test_the_interval_covers_the_true_p99_about_95_percent_of_the_time():
    true_p99 = 2.0 * float(np.exp(0.1 * 2.3263478740408408))  # lognormal(0, 0.1) quantile, scaled by 2
    hits = 0
    for seed in range(300):
        lo, hi = quantile_interval(lognormal(seed, 2000))  # type: ignore[misc]
        hits += lo <= true_p99 <= hi
    assert 0.90 <= hits / 300 <= 0.99


def test_sampling_stops_when_the_interval_is_sharp_and_says_so():
    source = iter(lognormal(7, 50_000, sigma=0.02))
    more = lambda n: list(itertools.islice(source, n))  # noqa: E731
    samples, tail = sample_for_tail(more(300), more, target=0.05, budget_s=1e9)
    assert tail.met and tail.stopped_by == "interval" and tail.calls == len(samples) >= min_calls()
    assert tail.relative_width <= 0.05


def test_sampling_stops_at_the_budget_and_never_claims_a_sharp_tail():
    ticks = itertools.count(0.0, 10.0)  # each clock read is 10 s later: a chunk "takes" 10 s, two spend the budget
    heavy = iter(np.random.default_rng(3).pareto(1.0, 100_000).tolist())
    more = lambda n: list(itertools.islice(heavy, n))  # noqa: E731
    samples, tail = sample_for_tail(more(300), more, target=0.01, budget_s=15.0, clock=lambda: next(ticks))
    assert tail.stopped_by == "budget" and not tail.met and len(samples) > 300


def test_no_budget_takes_the_samples_as_they_are():
    first = lognormal(2, 300)
    samples, tail = sample_for_tail(first, lambda n: pytest.fail("no extra calls"), target=0.2, budget_s=0)
    assert samples == first and tail.stopped_by == "off" and tail.interval is None and not tail.met
    assert tail.as_dict()["relative_width"] is None  # strict JSON: no inf in records


def test_max_calls_bounds_the_sampling():
    more = lambda n: np.random.default_rng(n).pareto(1.0, n).tolist()  # noqa: E731
    samples, tail = sample_for_tail(more(100), more, target=0.0001, budget_s=1e9, max_calls=2000)
    assert len(samples) == 2000 and tail.stopped_by == "max_calls"


def test_the_sampling_target_is_the_gates_p99_threshold():
    assert DEFAULT_TAIL_TARGET == DEFAULT_POLICIES["p99"].min_effect


def test_the_gate_gates_p99_where_both_runs_bound_it():
    base, slow = lognormal(1, 6000), lognormal(2, 6000, scale=1.4)
    assert precise_enough(base, 0.20)[0] and precise_enough(slow, 0.20)[0]
    row = p99_row(compare_runs([rec(base)], [rec(slow)]))
    assert row.verdict is Verdict.REGRESSION and not row.advisory and row.gating_regression
    assert "gated (p99 interval" in row.reason


def test_the_gate_keeps_p99_advisory_where_a_run_could_not_bound_it():
    base, slow = lognormal(1, 6000), lognormal(2, 300, scale=1.4)
    row = p99_row(compare_runs([rec(base)], [rec(slow)]))
    assert row.advisory and not row.gating_regression
    assert "candidate: 300 calls cannot bound p99 (needs >= 368)" in row.reason


def test_measure_keeps_timing_until_the_tail_is_sharp_and_records_it(workspace):
    from harness.core import Precision, Variant
    from harness.runners import PROVIDERS

    model = workspace.model("encoder-custom")
    family = workspace.family(model)
    graph = family.graphs(model)[0]
    variant = Variant("encoder-custom", Precision.FP32, PROVIDERS["ort_cpu"])
    runner = workspace.backend(variant, model).load(GraphRef(model, family, graph, variant))
    points, _ = latency.plan(model, family, workspace.texts(model), PerfSettings(seq_lens=(8,)))
    off = latency.measure({graph.name: runner}, points, PerfSettings(samples=20, warmup=1, tail_seconds=0))
    assert len(off["latency_ms"]["samples"]) == 20 and off["latency_ms"]["tail"]["stopped_by"] == "off"
    # a loose target on a real session: met, or the 30 s budget said so -- either way recorded honestly
    on = latency.measure({graph.name: runner}, points, PerfSettings(samples=20, warmup=1, tail_seconds=30),
                         tail_target=1.0)
    entry = on["latency_ms"]
    assert len(entry["samples"]) >= min_calls() and entry["tail"]["calls"] == len(entry["samples"])
    assert entry["tail"]["met"] == (entry["tail"]["stopped_by"] == "interval")
    assert entry["tail"]["met"] == estimate(entry["samples"], 1.0, "x").met
    runner.close()
