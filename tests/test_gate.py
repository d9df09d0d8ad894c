"""harness.gate.compare: the verdict rules on synthetic runs with known truth.

The samples are generated (lognormal call noise, a little drift, rare outliers) with
fixed seeds, so each test knows the true change and checks the gate's answer to it.
scripts/bench_gate_power.py asks the same questions of a real ONNX Runtime workload.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from harness.core import UsageError
from harness.gate.compare import (
    DEFAULT_POLICIES,
    EnvironmentMismatch,
    MetricPolicy,
    Verdict,
    compare_runs,
    decide,
    parse_threshold,
)
from tests.perf_records import measured_processes

MiB = 1024 * 1024
GiB = 1024 * MiB
ENV = {"fingerprint": "abc123", "cpu": "Test CPU", "cores": 2, "versions": {"onnxruntime": "1.20.0", "torch": "2.5.0"}}
VARIANT = "encoder-custom-fp32-ort_cpu"


def calls(seed: int, n: int = 1000, scale: float = 1.0, sigma: float = 0.08, block_noise: float = 0.0) -> list[float]:
    """Per-call latencies (ms) like a quiet CPU: lognormal jitter, slow drift, 1% outliers.

    ``block_noise`` multiplies each run of 50 calls by its own random factor, the
    signature of a machine whose speed keeps changing under the benchmark.
    """
    rng = np.random.default_rng(seed)
    x = 2.0 * scale * rng.lognormal(0.0, sigma, n) * np.linspace(1.0, 1.01, n)
    x[rng.random(n) < 0.01] *= 3.0
    if block_noise:
        x *= np.repeat(rng.lognormal(0.0, block_noise, -(-n // 50)), 50)[:n]
    return x.tolist()


def rec(samples: list[float] | None = None, *, variant: str = VARIANT, env: dict[str, Any] | None = None,
        test: str = "test_latency", **perf: Any) -> dict[str, Any]:
    body: dict[str, Any] = dict(perf)
    if samples is not None:
        body["latency_ms"] = {"samples": samples, "warmup": 10, "summary": {}}
        body.setdefault("cold_start_runs", measured_processes())  # as a real --perf run records them
    return {"schema": "harness.result/1", "id": f"{test}[{variant}]", "variant": variant, "suite": "perf",
            "verdict": "pass", "metrics": {}, "env": env or ENV, "perf": body, "future_field": [1, 2]}


def row(comparison, metric: str, variant: str = VARIANT):
    matches = [r for r in comparison.rows if r.metric == metric and r.variant == variant]
    assert len(matches) == 1, [(r.variant, r.metric) for r in comparison.rows]
    return matches[0]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_a_never_regresses(seed: int) -> None:
    result = compare_runs([rec(calls(seed))], [rec(calls(seed + 100))])
    assert all(r.verdict is not Verdict.REGRESSION for r in result.rows)
    assert row(result, "latency_ms.p50").verdict is Verdict.PASS
    assert result.exit_code == 0


def _with_contention(record: dict[str, Any], preemptions: int, steal: float) -> dict[str, Any]:
    record["perf"]["latency_ms"]["contention"] = {"preemptions": preemptions, "steal_pct": steal,
                                                  "load_avg": 1.0, "seconds": 2.0}
    return record


def test_a_regression_timed_on_a_busier_machine_says_so_and_still_fails() -> None:
    """The recorded contention (harness.perf.contention) is named in the reason of a regression
    whose candidate loop was preempted far more often, or lost more CPU to the host; it informs
    the reader, the verdict stays the statistics' (the canary is what discounts drift)."""
    busy = compare_runs([_with_contention(rec(calls(1)), 4, 0.5)],
                        [_with_contention(rec(calls(2, scale=1.25)), 90, 3.0)])
    p50 = row(busy, "latency_ms.p50")
    assert p50.verdict is Verdict.REGRESSION and busy.exit_code == 1
    assert "the candidate's machine was busier while timing: preempted 45.0/s (baseline 2.0/s), " \
           "host steal 3.0 % (baseline 0.5 %)" in p50.reason
    calm = compare_runs([_with_contention(rec(calls(1)), 4, 0.5)], [_with_contention(rec(calls(2, scale=1.25)), 6, 0.7)])
    assert "busier" not in row(calm, "latency_ms.p50").reason  # the same machine: nothing to say
    unrecorded = compare_runs([rec(calls(1))], [_with_contention(rec(calls(2, scale=1.25)), 90, 3.0)])
    assert "busier" not in row(unrecorded, "latency_ms.p50").reason  # an older baseline without counters


def _timed_by_loop(record: dict[str, Any], version: int) -> dict[str, Any]:
    record["perf"]["latency_ms"]["loop"] = {"version": version}
    return record


def test_a_change_between_timing_loop_versions_names_both_loops() -> None:
    """A baseline timed by an older timing loop (harness.perf.measure.LOOP: version 2 collected the
    heap first) is named in the reason of a regression or improvement, so a p99 that moved with the
    harness is not read as the model's; the verdict stays the statistics'."""
    slower = compare_runs([_timed_by_loop(rec(calls(1)), 2)], [_timed_by_loop(rec(calls(2, scale=1.25)), 3)])
    p50 = row(slower, "latency_ms.p50")
    assert p50.verdict is Verdict.REGRESSION and slower.exit_code == 1
    assert "timed by different timing loops (baseline: version 2, candidate: version 3" in p50.reason
    faster = compare_runs([rec(calls(1))], [_timed_by_loop(rec(calls(2, scale=0.75)), 3)])
    assert row(faster, "latency_ms.p50").verdict is Verdict.IMPROVEMENT
    assert "baseline: a loop older than version 2, candidate: version 3" in row(faster, "latency_ms.p50").reason
    same = compare_runs([_timed_by_loop(rec(calls(1)), 3)], [_timed_by_loop(rec(calls(2, scale=1.25)), 3)])
    assert "timing loops" not in row(same, "latency_ms.p50").reason


def test_25_percent_slowdown_is_a_regression() -> None:
    result = compare_runs([rec(calls(1))], [rec(calls(2, scale=1.25))])
    p50 = row(result, "latency_ms.p50")
    assert p50.verdict is Verdict.REGRESSION
    assert 1.2 < p50.ci_lo <= p50.ratio <= p50.ci_hi < 1.3
    assert p50.p_value < 1e-3
    assert row(result, "latency_ms.p90").verdict is Verdict.REGRESSION
    assert result.exit_code == 1
    assert "FAIL" in result.headline()


def test_2_percent_slowdown_is_below_the_effect_threshold() -> None:
    # two runs differ by >= 1.5% (SD) for no reason of the model's (harness.gate.canary): a +2%
    # change cannot rule out +5% across runs, but it rules out +8%
    result = compare_runs([rec(calls(1))], [rec(calls(2, scale=1.02))])
    assert row(result, "latency_ms.p50").verdict is Verdict.INCONCLUSIVE
    assert result.exit_code == 0
    looser = compare_runs([rec(calls(1))], [rec(calls(2, scale=1.02))], policies=[parse_threshold("p50=8%")])
    assert row(looser, "latency_ms.p50").verdict is Verdict.PASS


def test_25_percent_faster_is_an_improvement() -> None:
    result = compare_runs([rec(calls(1))], [rec(calls(2, scale=0.75))])
    assert row(result, "latency_ms.p50").verdict is Verdict.IMPROVEMENT
    assert result.exit_code == 0


def test_noise_widens_the_interval_but_vetoes_no_slowdown_far_beyond_it() -> None:
    """Block noise of 30 % (every 50 calls at their own speed): a +25 % slowdown that measured
    +38 % keeps a lower bound of +13 % with the noise added, more than twice the threshold, and is
    a REGRESSION that says it was widened; the same noise around no change (negative control, and
    8 seeds) or around +8 % is INCONCLUSIVE "too noisy", as the noise rule always said."""
    base = rec(calls(1, block_noise=0.3))
    result = compare_runs([base], [rec(calls(2, scale=1.25, block_noise=0.3))])
    p50 = row(result, "latency_ms.p50")
    assert p50.verdict is Verdict.REGRESSION and p50.ci_lo is not None and p50.ci_lo >= 1.10, p50
    assert "; noisy: block-median CV 26.8% > 10%: interval widened to [+13.0%" in p50.reason
    assert result.exit_code == 1
    for scale in (1.0, 1.08):
        for seed in range(8 if scale == 1.0 else 3):
            same = compare_runs([rec(calls(100 + seed, block_noise=0.3))],
                                [rec(calls(200 + seed, scale=scale, block_noise=0.3))])
            judged = row(same, "latency_ms.p50")
            assert judged.verdict is Verdict.INCONCLUSIVE and "too noisy" in judged.reason, (scale, seed, judged)
            assert same.exit_code == 0


def test_too_few_samples_are_inconclusive() -> None:
    result = compare_runs([rec(calls(1, n=30))], [rec(calls(2, n=30, scale=1.5))])
    assert row(result, "latency_ms.p50").verdict is Verdict.INCONCLUSIVE
    assert "too few samples" in row(result, "latency_ms.p50").reason
    # p95 needs 200 calls even when the median would be trusted.
    result = compare_runs([rec(calls(1, n=150))], [rec(calls(2, n=150, scale=1.5))])
    assert row(result, "latency_ms.p50").verdict is Verdict.REGRESSION
    assert row(result, "latency_ms.p95").verdict is Verdict.INCONCLUSIVE


def test_zero_baseline_latency_is_inconclusive_not_a_crash() -> None:
    # A coarse clock can record 0 ms for every call; there is no ratio to judge.
    result = compare_runs([rec([0.0] * 200)], [rec(calls(2, n=200))])
    p50 = row(result, "latency_ms.p50")
    assert p50.verdict is Verdict.INCONCLUSIVE and "no ratio" in p50.reason
    assert result.exit_code == 0


def test_tail_percentile_among_outliers_is_inconclusive() -> None:
    # 8% of candidate calls preempted: p95 is then set by the preemptions, not the model.
    cand = np.array(calls(2))
    cand[np.random.default_rng(7).random(cand.size) < 0.08] *= 4.0
    result = compare_runs([rec(calls(1))], [rec(cand.tolist())])
    p95 = row(result, "latency_ms.p95")
    assert p95.verdict is Verdict.INCONCLUSIVE and "outliers" in p95.reason
    assert p95.ratio > 1.5  # the naive comparison would have screamed
    assert row(result, "latency_ms.p50").verdict is Verdict.PASS


def test_advisory_regressions_do_not_fail_the_gate() -> None:
    result = compare_runs([rec(calls(1), cold_start_ms={"load": 100.0, "first_inference": 20.0})],
                          [rec(calls(2), cold_start_ms={"load": 300.0, "first_inference": 20.0})])
    load = row(result, "cold_start_ms.load")
    assert load.verdict is Verdict.REGRESSION and load.advisory
    assert row(result, "cold_start_ms.first_inference").verdict is Verdict.PASS
    assert result.exit_code == 0


@pytest.mark.parametrize(
    ("base", "cand", "verdict"),
    [
        (1 * GiB, 1 * GiB + 10 * MiB, Verdict.PASS),  # +1%: below both thresholds
        (1 * GiB, 1 * GiB + 100 * MiB, Verdict.REGRESSION),  # +9.8% and +100 MiB
        (100 * MiB, 120 * MiB, Verdict.PASS),  # +20% but only 20 MiB: under the 32 MiB floor
        (1 * GiB, 800 * MiB, Verdict.IMPROVEMENT),
    ],
)
def test_peak_rss_needs_relative_and_absolute_growth(base: int, cand: int, verdict: Verdict) -> None:
    result = compare_runs([rec(peak_rss_bytes=base)], [rec(peak_rss_bytes=cand)])
    assert row(result, "peak_rss_bytes").verdict is verdict
    assert result.exit_code == (1 if verdict is Verdict.REGRESSION else 0)


def test_artifact_size_is_judged_by_one_percent() -> None:
    grown = compare_runs([rec(artifact_bytes=10_000_000)], [rec(artifact_bytes=10_200_000)])
    same = compare_runs([rec(artifact_bytes=10_000_000)], [rec(artifact_bytes=10_050_000)])
    assert row(grown, "artifact_bytes").verdict is Verdict.REGRESSION
    assert row(same, "artifact_bytes").verdict is Verdict.PASS


def test_environment_mismatch_is_refused_unless_forced() -> None:
    other = {**ENV, "fingerprint": "def456", "versions": {"onnxruntime": "1.21.0", "torch": "2.5.0"}}
    with pytest.raises(EnvironmentMismatch) as info:
        compare_runs([rec(calls(1))], [rec(calls(2), env=other)])
    assert isinstance(info.value, UsageError)
    assert "versions.onnxruntime: 1.20.0 -> 1.21.0" in str(info.value)
    assert "torch" not in str(info.value) and "\n" not in str(info.value)
    forced = compare_runs([rec(calls(1))], [rec(calls(2), env=other)], force_env=True)
    assert forced.forced_env and forced.env_differences
    assert "environment forced" in forced.to_markdown()


def test_thread_settings_must_match_per_variant() -> None:
    one = {**ENV, "threads": {"ort_intra_op_threads": 1}}
    four = {**ENV, "threads": {"ort_intra_op_threads": 4}}
    # Same fingerprint, but the candidate ran with 4 threads where the baseline used 1.
    with pytest.raises(EnvironmentMismatch, match="threads.ort_intra_op_threads: 1 -> 4"):
        compare_runs([rec(calls(1), env=one)], [rec(calls(2), env=four)])
    # Each variant is checked against its own twin, so variants with different (but
    # unchanged) settings, listed in a different order, are fine.
    base = [rec(calls(1), env=one), rec(calls(3), variant="b-fp32-ort_cpu", env=four)]
    cand = [rec(calls(4), variant="b-fp32-ort_cpu", env=four), rec(calls(2), env=one)]
    assert compare_runs(base, cand).env_differences == []


def test_records_are_matched_by_variant_and_latency_key() -> None:
    other = "encoder-custom-int8-ort_cpu"
    base = [
        rec(calls(1), **{"latency_ms[bs=8,seq=64]": {"samples": calls(3)}}),
        rec(calls(4), variant=other),
        rec(calls(5), variant="gone-fp32-ort_cpu"),
        {"id": "test_accuracy[x]", "variant": VARIANT, "verdict": "pass", "metrics": {"cosine": 1.0}},  # no perf
    ]
    cand = [
        rec(calls(6), **{"latency_ms[bs=8,seq=64]": {"samples": calls(7, scale=1.3)}}),
        rec(calls(8, scale=1.3), variant=other),
        rec(calls(9), variant="added-fp16-ort_cpu"),
    ]
    result = compare_runs(base, cand)
    assert row(result, "latency_ms.p50").verdict is Verdict.PASS
    assert row(result, "latency_ms[bs=8,seq=64].p50").verdict is Verdict.REGRESSION
    console = Console(record=True, width=250)
    result.render_table(console)
    assert "latency_ms[bs=8,seq=64].p50" in console.export_text()  # not eaten as rich markup
    assert row(result, "latency_ms.p50", variant=other).verdict is Verdict.REGRESSION
    assert result.missing == ["gone-fp32-ort_cpu"]
    assert result.new == ["added-fp16-ort_cpu"]


def test_same_key_from_two_tests_is_kept_apart() -> None:
    base = [rec(calls(1), test="test_latency"), rec(calls(2), test="test_batch_latency")]
    cand = [rec(calls(3), test="test_latency"), rec(calls(4, scale=1.3), test="test_batch_latency")]
    result = compare_runs(base, cand)
    assert row(result, "test_latency:latency_ms.p50").verdict is Verdict.PASS
    assert row(result, "test_batch_latency:latency_ms.p50").verdict is Verdict.REGRESSION


def test_custom_policy_overrides_default() -> None:
    loose = MetricPolicy("p50", "latency", min_effect=0.40)
    result = compare_runs([rec(calls(1))], [rec(calls(2, scale=1.25))], policies=[loose])
    assert row(result, "latency_ms.p50").verdict is not Verdict.REGRESSION
    assert DEFAULT_POLICIES["p50"].min_effect == 0.05  # defaults untouched


@pytest.mark.parametrize(("text", "effect"), [("p50=8%", 0.08), ("p90=0.2", 0.2), (" peak_rss_bytes = 10% ", 0.10)])
def test_parse_threshold(text: str, effect: float) -> None:
    policy = parse_threshold(text)
    assert policy.min_effect == pytest.approx(effect)
    assert policy.kind == DEFAULT_POLICIES[policy.name].kind


@pytest.mark.parametrize(("text", "message"), [("p500=5%", "did you mean 'p50'"), ("p50", "NAME=FRACTION"),
                                                ("p50=fast", "not a number"), ("p50=50", "fraction in [0, 1]")])
def test_parse_threshold_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_threshold(text)


def test_any_percentile_can_get_a_policy() -> None:
    p75 = MetricPolicy("p75", "latency", min_effect=0.05)
    result = compare_runs([rec(calls(1))], [rec(calls(2, scale=1.25))], policies={"p75": p75})
    assert row(result, "latency_ms.p75").verdict is Verdict.REGRESSION


def test_policy_validation_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="percentile like"):
        MetricPolicy("fast", "latency", min_effect=0.05)
    with pytest.raises(UsageError):
        MetricPolicy("x", "speed", min_effect=0.05)
    with pytest.raises(UsageError):
        MetricPolicy("x", "latency", min_effect=5)  # meant 5%, wrote +500%
    with pytest.raises(UsageError):
        MetricPolicy("x", "latency", min_effect=-0.1)


@pytest.mark.parametrize(
    ("ratio", "lo", "hi", "p", "verdict"),
    [
        (1.08, 1.06, 1.10, 1e-4, Verdict.REGRESSION),  # significant, whole CI over the +5% threshold
        (1.06, 1.03, 1.09, 1e-4, Verdict.INCONCLUSIVE),  # over threshold but CI reaches below it
        (1.06, 1.01, 1.15, 1e-4, Verdict.INCONCLUSIVE),  # wide CI straddling +5%
        (1.08, 0.98, 1.20, 0.20, Verdict.INCONCLUSIVE),  # big but unproven
        (1.02, 1.01, 1.03, 1e-4, Verdict.PASS),  # real but small
        (1.00, 0.97, 1.03, 0.60, Verdict.PASS),
        (0.80, 0.78, 0.82, 1e-4, Verdict.IMPROVEMENT),
        (1.20, 1.15, 1.25, 0.20, Verdict.INCONCLUSIVE),  # the rank test must agree
    ],
)
def test_decide_rule(ratio: float, lo: float, hi: float, p: float, verdict: Verdict) -> None:
    assert decide(ratio, lo, hi, p, DEFAULT_POLICIES["p50"])[0] is verdict


def test_reports_render_every_row() -> None:
    result = compare_runs([rec(calls(1), peak_rss_bytes=GiB)], [rec(calls(2, scale=1.25), peak_rss_bytes=GiB)])
    data = json.loads(result.to_json())
    assert data["exit_code"] == 1 and data["counts"]["REGRESSION"] >= 1
    assert {r["metric"] for r in data["rows"]} >= {"latency_ms.p50", "peak_rss_bytes"}
    md = result.to_markdown()
    assert md.startswith("**FAIL") and "| latency_ms.p50 |" in md and "1.00 GiB" in md
    # Gating regressions come first in the table.
    lines = md.splitlines()
    first = lines[lines.index("|---|---|---:|---:|---:|---|---:|---|---|") + 1]
    assert "REGRESSION" in first and "advisory" not in first
    console = Console(record=True, width=200)
    result.render_table(console)
    text = console.export_text()
    assert "latency_ms.p50" in text and "REGRESSION" in text and "FAIL" in text


def test_two_single_processes_cannot_claim_what_a_process_moves_by() -> None:
    """bert-tiny's p50 moved 0.17-0.36 ms between 16 fresh processes on a quiet machine: a recorded
    comparison of two single processes (``--perf-repeats 1``) read +30 % at p = 2e-04 as REGRESSION
    in half the docs' A/A compares. Without process evidence the assumed spread leaves it
    INCONCLUSIVE and says why; three tight processes per side measure the spread, and the same +30 %
    is a REGRESSION again; processes that wander as far as the change keep it INCONCLUSIVE."""
    from harness.gate.processes import DEFAULT_PROCESS_SD, ProcessLevel, process_levels, process_spread

    def judged(cold_start_runs: list[dict[str, Any]]) -> Any:
        base = rec(calls(1), cold_start_runs=cold_start_runs)
        cand = rec(calls(2, scale=1.3), cold_start_runs=cold_start_runs)
        return row(compare_runs([base], [cand]), "latency_ms.p50")

    single = judged([{"steady_ms": [1.0] * 5}])
    assert single.verdict is Verdict.INCONCLUSIVE and "between-process spread assumed 20%" in single.reason, single
    assert judged(measured_processes()).verdict is Verdict.REGRESSION
    wandering = judged([{"steady_ms": [level] * 5} for level in (0.75, 1.0, 1.35)])
    assert wandering.verdict is Verdict.INCONCLUSIVE and "assumed" not in wandering.reason, wandering
    # the reader: a process's level is its median steady call; too few calls or odd values are no level
    assert [p.level_ms for p in process_levels({"cold_start_runs": [
        {"steady_ms": [1.0, 9.0, 2.0]}, {"steady_ms": [1.0, 2.0]}, {"steady_ms": ["x", True, -1.0]}, "odd"]})] == [2.0]
    assert process_levels({"cold_start_runs": "odd"}) == [] and process_levels(None) == []
    unknown = process_spread([ProcessLevel(1.0)], [ProcessLevel(1.0), ProcessLevel(1.1)])
    assert not unknown.measured and abs(unknown.sd - DEFAULT_PROCESS_SD * 2 ** 0.5) < 1e-12
    # each side about its own mean: a real 30 % change between the runs is not counted as spread
    shifted = process_spread([ProcessLevel(1.0)] * 3, [ProcessLevel(1.3)] * 3)
    assert shifted.measured and shifted.sd == 0.0


def _children(levels: tuple[float, ...], canaries: tuple[float, ...] = (0.08,) * 3,
              workload: str | None = None) -> list[dict[str, Any]]:
    """Fresh processes as ``harness.perf.child`` records them: steady calls at each level, and the
    canary each times after them (ms; the same in every child: a quiet machine)."""
    from harness.perf.canary import WORKLOAD

    return [{"steady_ms": [level] * 5, "canary": {"workload": workload or WORKLOAD, "samples": [c] * 30, "blocks": 2}}
            for level, c in zip(levels, canaries)]


#: three children a side, spread 8 % like a small model's processes here (bench_gate_power's MLP: 5-10 %)
SPREAD = (0.92, 1.0, 1.09)


def test_fresh_processes_that_timed_the_canary_add_their_change_not_only_their_spread() -> None:
    """A +25 % slowdown of a small model whose processes spread ~8 %: read from the main process
    alone, the spread of two single processes (sigma x 1.41) leaves the lower bound under the
    threshold (INCONCLUSIVE, as the bench's environment slowdown read 2 times in 10); with the
    children's canaries the children's change is combined with the main process's (sigma x 0.71)
    and the same runs read REGRESSION, saying from how many processes. An A/A with the same
    spread passes."""
    def judged(base_children: list[dict[str, Any]], cand_children: list[dict[str, Any]], scale: float) -> Any:
        base = rec(calls(1), cold_start_runs=base_children)
        cand = rec(calls(2, scale=scale), cold_start_runs=cand_children)
        return row(compare_runs([base], [cand]), "latency_ms.p50")

    slower = tuple(1.25 * v for v in SPREAD[::-1])
    no_canary = [{"steady_ms": c["steady_ms"]} for c in _children(SPREAD)]
    alone = judged(no_canary, [{"steady_ms": c["steady_ms"]} for c in _children(slower)], 1.25)
    assert alone.verdict is Verdict.INCONCLUSIVE and "level from" not in alone.reason, alone
    combined = judged(_children(SPREAD), _children(slower), 1.25)
    assert combined.verdict is Verdict.REGRESSION, combined
    assert "level from 1+3 and 1+3 processes, each against its canary" in combined.reason, combined.reason
    assert "fresh processes +25.0%" in combined.reason
    assert 1.2 < combined.ratio < 1.3 and combined.ci_lo > 1.05
    same = judged(_children(SPREAD), _children(SPREAD[::-1]), 1.0)
    assert same.verdict is not Verdict.REGRESSION and abs(same.ratio - 1) < 0.02 and "level from" in same.reason, same


def test_two_children_a_side_measure_the_spread_but_are_too_few_to_combine() -> None:
    """The docs' gate (``--perf-repeats 1``) compares two children a side: sigma read from two
    degrees of freedom may be a quarter of the true one, so their mean change (+20 % in this A/A,
    the children's moment, not the model) is not weighed against the main process's (-3 %): the
    spread widens the main process's interval, which passes or stays INCONCLUSIVE. Three a side
    (the default) are combined."""
    base = rec(calls(1), cold_start_runs=_children((1.0, 1.10)))
    cand = rec(calls(2), cold_start_runs=_children((1.28, 1.40)))
    judged = row(compare_runs([base], [cand]), "latency_ms.p50")
    assert judged.verdict is not Verdict.REGRESSION and "level from" not in judged.reason, judged
    assert judged.ratio < 1.05, judged  # the main process's change, not the children's +28 %
    from harness.gate.processes import MIN_COMBINE_DEGREES, ProcessLevel, process_spread

    two = process_spread([ProcessLevel(v, 0.08) for v in (1.0, 1.10)], [ProcessLevel(v, 0.08) for v in (1.28, 1.40)])
    assert two.measured and two.degrees == 2 < MIN_COMBINE_DEGREES and two.combine(0.0, 0.01) is None
    three = process_spread([ProcessLevel(v, 0.08) for v in SPREAD], [ProcessLevel(v, 0.08) for v in SPREAD])
    assert three.degrees == MIN_COMBINE_DEGREES and three.combine(0.0, 0.01) is not None


def test_a_child_that_ran_in_a_busier_moment_is_not_a_slower_process() -> None:
    """Beside a busy neighbour the children's steady calls wander (1.0, 1.3, 0.95) with the
    machine, and their canaries wander with them: against their canaries the processes sit
    together, so a +25 % change reads REGRESSION with the spread measured "each against its
    canary". The same children without canaries read the wander as process spread and the change
    stays INCONCLUSIVE. Children of another canary workload are not read against it."""
    moments = (1.0, 1.3, 0.95)
    canaries = tuple(0.08 * m for m in moments)
    base = rec(calls(1), cold_start_runs=_children(moments, canaries))
    cand = rec(calls(2, scale=1.25), cold_start_runs=_children(tuple(1.25 * m for m in moments), canaries))
    judged = row(compare_runs([base], [cand]), "latency_ms.p50")
    assert judged.verdict is Verdict.REGRESSION and "each against its canary" in judged.reason, judged
    blind = [rec(r["samples"], cold_start_runs=[{"steady_ms": c["steady_ms"]} for c in r["children"]])
             for r in ({"samples": calls(1), "children": _children(moments, canaries)},
                       {"samples": calls(2, scale=1.25), "children": _children(tuple(1.25 * m for m in moments))})]
    assert row(compare_runs([blind[0]], [blind[1]]), "latency_ms.p50").verdict is Verdict.INCONCLUSIVE
    other = rec(calls(2), cold_start_runs=_children(SPREAD, workload="another/1"))
    assert "level from" not in row(compare_runs([base], [other]), "latency_ms.p50").reason


def test_a_change_only_the_main_process_shows_is_not_diluted_by_children_that_disagree() -> None:
    """A slowdown only a long-running process shows (the children's five steady calls do not):
    main +30 %, children unchanged and tight. Averaging would read +7 %; the two disagree far
    beyond the spread, so nothing is combined and the main process's rule decides (REGRESSION)."""
    from harness.gate.processes import ProcessLevel, process_spread

    tight = (1.0, 1.002, 0.998)
    base = rec(calls(1), cold_start_runs=_children(tight))
    cand = rec(calls(2, scale=1.3), cold_start_runs=_children(tight[::-1]))
    judged = row(compare_runs([base], [cand]), "latency_ms.p50")
    assert judged.verdict is Verdict.REGRESSION and "level from" not in judged.reason and judged.ratio > 1.25, judged
    spread = process_spread([ProcessLevel(v, 0.08) for v in tight], [ProcessLevel(v, 0.08) for v in tight])
    assert spread.combine(0.0, 0.01) is not None and spread.combine(0.26, 0.01) is None


def test_a_recorded_regression_beside_a_paired_pass_needs_the_margin_only_when_its_processes_went_unseen() -> None:
    """Beside a paired twin that found nothing, a recorded REGRESSION at +7 % (lower bound +6 %) is
    what only the recorded runs can see -- a slower environment -- but from the main processes
    alone its interval cannot see what the two processes did apart, so it must clear twice the
    threshold (INCONCLUSIVE here). Read from every process of both runs (their measured spread in
    the interval) it gates at the threshold itself."""
    from dataclasses import replace

    from harness.gate.retime import beside_paired
    from harness.gate.row import Row

    recorded = Row(VARIANT, "latency_ms.p50", "latency", 1.0, 1.07, 1.07, 1.06, 1.08, 1e-4, Verdict.REGRESSION,
                   "+7.0% >= +5% threshold")
    paired = replace(recorded, ratio=1.0, ci_lo=0.99, ci_hi=1.01, verdict=Verdict.PASS, evidence="paired")
    alone, = beside_paired([recorded], [paired], DEFAULT_POLICIES, other_machine=False)
    assert alone.verdict is Verdict.INCONCLUSIVE and "within 2x the threshold" in alone.reason, alone
    every, = beside_paired([replace(recorded, process_levels=True)], [paired], DEFAULT_POLICIES, other_machine=False)
    assert every.verdict is Verdict.REGRESSION and "environment (or its machine" in every.reason, every
