"""harness.perf.stats: hand-checked values and properties that must hold for any samples."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.perf.stats import (
    block_cv,
    block_medians,
    bootstrap_ratio_ci,
    bootstrap_ratio_cis,
    mann_whitney,
    min_samples_for,
    paired_rounds_ratio_cis,
    summarize,
)

latencies = st.lists(st.floats(min_value=0.01, max_value=1e4, allow_nan=False), min_size=2, max_size=300)


def _ar_series(seed: int, n: int = 2000, phi: float = 0.97) -> tuple[np.ndarray, np.ndarray]:
    """Two halves of an AR(1) log-latency series: each call resembles the one before."""
    noise = np.random.default_rng(seed).normal(0, 0.05, n)
    log = np.zeros(n)
    for i in range(1, n):
        log[i] = phi * log[i - 1] + noise[i]
    series = np.exp(log)
    return series[: n // 2], series[n // 2 :]


def test_summarize_hand_checked() -> None:
    s = summarize(list(range(1, 11)))  # 1..10
    assert s.n == 10
    assert s.mean == pytest.approx(5.5)
    assert s.std == pytest.approx(math.sqrt(sum((x - 5.5) ** 2 for x in range(1, 11)) / 9))
    assert s.cv == pytest.approx(s.std / 5.5)
    # Linear interpolation between order statistics: index p * (n - 1).
    assert (s.p50, s.p90, s.p95, s.p99) == pytest.approx((5.5, 9.1, 9.55, 9.91))
    assert (s.min, s.max) == (1.0, 10.0)
    assert s.throughput_per_s == pytest.approx(1000 / 5.5)
    assert s.as_dict()["p90"] == pytest.approx(9.1)


@pytest.mark.parametrize(("p", "need"), [(0.5, 20), (0.9, 100), (0.95, 200), (0.99, 1000)])
def test_min_samples_for_percentile(p: float, need: int) -> None:
    assert min_samples_for(p) == need


def test_low_confidence_flags_follow_sample_count() -> None:
    assert summarize(np.ones(19)).low_confidence["p50"] is True
    flags = summarize(np.ones(150)).low_confidence
    assert flags == {"p50": False, "p90": False, "p95": True, "p99": True}
    assert not any(summarize(np.ones(1000)).low_confidence.values())


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [1.0, float("inf")]])
def test_summarize_rejects_empty_and_non_finite(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        summarize(bad)


def test_single_sample_has_zero_spread() -> None:
    s = summarize([2.0])
    assert (s.std, s.min, s.p99, s.max) == (0.0, 2.0, 2.0, 2.0)


def test_block_medians_by_size_and_count() -> None:
    assert block_medians([1, 2, 3, 4, 5, 6], 2).tolist() == [1.5, 3.5, 5.5]
    # 7 calls in blocks of 3 -> two blocks of 4 and 3: the last call is not dropped.
    assert block_medians([1, 2, 3, 4, 5, 6, 7], 3).tolist() == [2.5, 6.0]
    assert block_medians(list(range(100)), n_blocks=4).tolist() == [12.0, 37.0, 62.0, 87.0]
    with pytest.raises(ValueError):
        block_medians([1, 2, 3], 1, n_blocks=1)


def test_block_cv_sees_drift_that_per_call_cv_hides() -> None:
    rng = np.random.default_rng(0)
    steady = rng.lognormal(0, 0.3, 1000)
    drifting = steady * np.linspace(1.0, 1.5, 1000)
    assert block_cv(np.full(100, 3.0)) == 0.0
    assert block_cv(drifting) > 2 * block_cv(steady)
    assert summarize(drifting).cv < 1.25 * summarize(steady).cv


def test_mann_whitney_on_block_medians() -> None:
    rng = np.random.default_rng(1)
    a = rng.lognormal(0, 0.1, 1000)
    assert mann_whitney(a, a) == 1.0
    assert mann_whitney(a, a * 1.2) < 1e-6
    assert 0.0 <= mann_whitney(a, rng.lognormal(0, 0.1, 1000)) <= 1.0


def test_mann_whitney_is_not_fooled_by_correlated_calls() -> None:
    # Two halves of one slowly wandering series: ranking single calls claims p ~ 1e-41,
    # ranking block medians admits the evidence is weak.
    a, b = _ar_series(seed=1)
    raw = scipy.stats.mannwhitneyu(a, b).pvalue
    assert raw < 1e-20
    assert mann_whitney(a, b) > 1e15 * raw


def test_bootstrap_identical_scaled_and_deterministic() -> None:
    rng = np.random.default_rng(2)
    a = rng.lognormal(0, 0.2, 800)
    ratio, lo, hi = bootstrap_ratio_ci(a, a)
    assert ratio == 1.0 and lo <= 1.0 <= hi
    ratio, lo, hi = bootstrap_ratio_ci(a, 2 * a, 90)
    assert ratio == pytest.approx(2.0) and lo <= 2.0 <= hi
    assert bootstrap_ratio_ci(a, 1.1 * a, seed=5) == bootstrap_ratio_ci(a, 1.1 * a, seed=5)
    # A percentile number and the equivalent reduction give the same point estimate.
    b = rng.lognormal(0.1, 0.2, 800)
    assert bootstrap_ratio_ci(a, b, 50)[0] == pytest.approx(bootstrap_ratio_ci(a, b, np.median)[0])


def test_bootstrap_detects_a_shift_and_brackets_it() -> None:
    rng = np.random.default_rng(3)
    a = rng.lognormal(0, 0.1, 1000)
    b = rng.lognormal(0, 0.1, 1000) * 1.25
    out = bootstrap_ratio_cis(a, b, {"p50": 50, "p90": 90, "mean": np.mean})
    for ratio, lo, hi in out.values():
        assert 1.15 < lo <= ratio <= hi < 1.35


def test_block_bootstrap_widens_interval_for_correlated_calls() -> None:
    # AR(1) latencies: neighbours in time are alike, so there are far fewer independent
    # observations than calls; resampling single calls would be over-confident.
    a, b = _ar_series(seed=4)
    _, lo_iid, hi_iid = bootstrap_ratio_ci(a, b, block_size=1, n_boot=500)
    _, lo_blk, hi_blk = bootstrap_ratio_ci(a, b, block_size=50, n_boot=500)
    assert hi_blk - lo_blk > 2 * (hi_iid - lo_iid)


def test_bootstrap_argument_checks() -> None:
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([1.0, 2.0], [1.0, 2.0], alpha=0.0)
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([1.0, 2.0], [1.0, 2.0], 120)
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([0.0, 0.0], [1.0, 2.0])


@settings(max_examples=60, deadline=None)
@given(latencies)
def test_percentiles_are_monotone(samples: list[float]) -> None:
    s = summarize(samples)
    assert s.min <= s.p50 <= s.p90 <= s.p95 <= s.p99 <= s.max
    assert s.min <= s.mean <= s.max or math.isclose(s.mean, s.min) or math.isclose(s.mean, s.max)


@settings(max_examples=60, deadline=None)
@given(latencies, st.floats(min_value=0.01, max_value=100.0))
def test_scaling_samples_scales_statistics(samples: list[float], c: float) -> None:
    s, t = summarize(samples), summarize([c * x for x in samples])
    # float rounding of a std that should be 0 grows with the magnitude of the samples
    tiny = 1e-12 * max(1.0, c * max(samples))
    for name in ("mean", "min", "p50", "p90", "p95", "p99", "max", "std"):
        assert getattr(t, name) == pytest.approx(c * getattr(s, name), rel=1e-9, abs=tiny)
    assert t.cv == pytest.approx(s.cv, rel=1e-6, abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(latencies, st.integers(min_value=0, max_value=2**31))
def test_ratio_of_identical_samples_is_one(samples: list[float], seed: int) -> None:
    ratio, lo, hi = bootstrap_ratio_ci(samples, samples, 90, n_boot=100, seed=seed)
    assert ratio == 1.0
    assert lo <= 1.0 <= hi


@settings(max_examples=25, deadline=None)
@given(latencies, latencies, st.sampled_from([50.0, 90.0, 99.0]))
def test_interval_contains_point_estimate(a: list[float], b: list[float], q: float) -> None:
    ratio, lo, hi = bootstrap_ratio_ci(a, b, q, n_boot=100)
    assert lo <= ratio <= hi


# --------------------------------------------------------------------------- paired rounds


def _drifting_rounds(rounds: int, calls: int, slowdown: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two engines interleaved round by round on a machine whose speed moves +-30 % between
    rounds (the same factor for both sides of a round), with a heavy right tail."""
    rng = np.random.default_rng(seed)
    machine = rng.uniform(0.7, 1.3, size=(rounds, 1))
    base = machine * (1.0 + rng.exponential(0.05, size=(rounds, calls)))
    cand = slowdown * machine * (1.0 + rng.exponential(0.05, size=(rounds, calls)))
    return base, cand


def test_paired_rounds_cancel_drift_that_independent_blocks_count() -> None:
    base, cand = _drifting_rounds(40, 500, 1.0, seed=1)
    stats = {"p50": 50.0, "p99": 99.0}
    paired = paired_rounds_ratio_cis(base, cand, stats)
    independent = bootstrap_ratio_cis(base.ravel(), cand.ravel(), stats, block_size=500)
    for name in stats:
        ratio, lo, hi = paired[name]
        assert lo <= 1.0 <= hi, (name, paired[name])
        assert hi - lo < (independent[name][2] - independent[name][1]) / 2, (name, paired[name], independent[name])


def test_paired_rounds_bracket_a_real_slowdown() -> None:
    base, cand = _drifting_rounds(40, 500, 1.05, seed=2)
    ratio, lo, hi = paired_rounds_ratio_cis(base, cand, {"p99": 99.0})["p99"]
    assert 1.0 < lo <= 1.05 <= hi


def test_paired_rounds_identical_sides_give_exactly_one() -> None:
    base, _ = _drifting_rounds(10, 50, 1.0, seed=3)
    assert paired_rounds_ratio_cis(base, base.copy(), {"p90": 90.0, "mean": np.mean}) == {
        "p90": (1.0, 1.0, 1.0), "mean": (1.0, 1.0, 1.0)}


@pytest.mark.parametrize("base_shape, cand_shape", [((3,), (3,)), ((4, 5), (3, 5)), ((1, 5), (1, 5))])
def test_paired_rounds_need_matching_rounds(base_shape: tuple[int, ...], cand_shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="same number"):
        paired_rounds_ratio_cis(np.ones(base_shape), np.ones(cand_shape), {"p50": 50.0})
