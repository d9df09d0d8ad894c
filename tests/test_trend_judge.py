"""A stored series judged by the perf gate's one judge (``EvidenceKind.SERIES``): a level that held
fails, one slow night is INCONCLUSIVE, noise passes, an old accepted level stops failing, and the
threshold is the gate's own policy for the same number."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.gate.changepoints import detect
from harness.gate.evidence import EvidenceKind
from harness.gate.policy import POLICY, RECENT_RUNS
from harness.gate.row import Verdict
from harness.gate.trend import judge_trends, series_policy

P50 = "perf:latency_ms.p50"


def _judge(values: list[float], metric: str = P50, higher_is_better: bool | None = False) -> tuple[Verdict, str]:
    index = pd.MultiIndex.from_tuples([(f"2026-03-{i + 1:02d}T02:00:00", f"night{i + 1}") for i in range(len(values))],
                                      names=["finished", "run_id"])
    wide = pd.DataFrame({("v", metric): values}, index=index)
    wide.columns = pd.MultiIndex.from_tuples(wide.columns)
    (row,) = judge_trends(wide, {metric: higher_is_better}).rows
    assert row.evidence == "series" and row.metric == metric
    return row.verdict, row.reason


FLAT = [2.00, 2.02, 1.99, 2.01, 2.00, 2.01, 1.98, 2.02]


def test_a_level_that_held_is_a_regression_named_by_its_first_run() -> None:
    verdict, reason = _judge(FLAT[:6] + [3.00, 3.02])
    assert verdict is Verdict.REGRESSION
    assert "since run night7 (2026-03-07 02:00)" in reason and "2 runs at the new level" in reason


def test_one_slow_night_is_inconclusive_not_a_level() -> None:
    assert detect(FLAT[:7] + [3.0]) == []  # PELT's [old, spike] tail is no level
    verdict, reason = _judge(FLAT[:7] + [3.0])
    assert verdict is Verdict.INCONCLUSIVE and "outside its band" in reason and "night8" in reason


def test_noise_passes() -> None:
    """3 % Gaussian noise over 20 nights, 200 series: measured 3 false REGRESSIONs in 1000."""
    rng = np.random.default_rng(1)
    verdicts = [_judge(list(2.0 * (1 + 0.03 * rng.standard_normal(20))))[0] for _ in range(200)]
    assert verdicts.count(Verdict.REGRESSION) <= 2
    assert verdicts.count(Verdict.PASS) >= 180


def test_a_slowdown_is_found_within_two_nights() -> None:
    """+25 % on the last two of 20 noisy nights: a REGRESSION in every one of 50 series."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        values = 2.0 * (1 + 0.03 * rng.standard_normal(20))
        values[-2:] *= 1.25
        assert _judge(list(values))[0] is Verdict.REGRESSION


def test_better_is_an_improvement_whichever_way_better_points() -> None:
    assert _judge(FLAT[:6] + [1.5, 1.51])[0] is Verdict.IMPROVEMENT
    assert _judge([100, 101, 99, 100, 100, 101, 80, 81], "perf:latency_ms.throughput", True)[0] is Verdict.REGRESSION
    assert _judge([0.90, 0.90, 0.90, 0.90, 0.99, 0.99], "metric:model.logits.cosine", True)[0] is Verdict.IMPROVEMENT


def test_an_old_level_stops_failing_and_later_nights_are_judged_against_it() -> None:
    old = FLAT[:4] + [3.0, 3.01, 2.99, 3.02, 3.0, 3.01, 2.99, 3.01]  # 8 runs at the new level
    assert 8 > RECENT_RUNS
    verdict, reason = _judge(old)
    assert verdict is Verdict.PASS and f"older than {RECENT_RUNS} runs" in reason
    verdict, reason = _judge(old[:-1] + [4.5])  # tonight is slow against the new level
    assert verdict is Verdict.INCONCLUSIVE and "outside its band" in reason


def test_the_threshold_is_the_gates_policy_for_the_same_number() -> None:
    assert series_policy(P50).name == "p50" and series_policy("perf:latency_ms_with_past.p90").name == "p90"
    assert series_policy("perf:peak_rss_bytes").kind == "memory"
    assert series_policy("metric:model.logits.cosine").kind == "trend"
    # a 7 % level shift: beyond p50's 5 %, within p90's 10 %
    moved = FLAT[:6] + [2.14, 2.15, 2.14]
    assert _judge(moved)[0] is Verdict.REGRESSION
    verdict, reason = _judge(moved, "perf:latency_ms.p90")
    assert verdict is Verdict.PASS and "within 10%" in reason


def test_the_absolute_floor_applies_as_it_does_to_a_single_number() -> None:
    """Peak memory's policy is 5 % *and* 32 MiB: +10 % of 100 MB held three nights is within it,
    +10 % of 1 GB is not."""
    mib = 1024 * 1024
    small = [100 * mib] * 6 + [110 * mib] * 3
    verdict, reason = _judge(small, "perf:peak_rss_bytes")
    assert verdict is Verdict.PASS and "floor" in reason
    assert _judge([v * 10 for v in small], "perf:peak_rss_bytes")[0] is Verdict.REGRESSION


def test_unknown_direction_and_short_series_are_inconclusive() -> None:
    verdict, reason = _judge(FLAT[:5] + [4.0, 4.0, 4.0], "metric:custom_score", None)
    assert verdict is Verdict.INCONCLUSIVE and "which way is better is not known" in reason
    verdict, reason = _judge([2.0, 3.0, 3.0])
    assert verdict is Verdict.INCONCLUSIVE and f"< {POLICY[EvidenceKind.SERIES].min_units}" in reason


@pytest.mark.parametrize("gap", [1, 2])
def test_runs_without_a_value_are_left_out(gap: int) -> None:
    values = FLAT[:6] + [float("nan")] * gap + [3.0, 3.01]
    verdict, reason = _judge(values)
    assert verdict is Verdict.REGRESSION and f"night{7 + gap}" in reason


@pytest.mark.parametrize(("metric", "unit"), [("perf:latency_ms.n", "calls"), ("perf:latency_ms.cv", ""),
                                              ("perf:latency_ms[gen=tpot,kv=on].n", "calls")])
def test_a_latency_summarys_count_and_spread_are_shown_not_judged(metric: str, unit: str) -> None:
    """``history changes`` read a latency summary's call count as milliseconds, lower better: 550 calls
    -> 2130 calls in a longer run was "REGRESSION +287.7 %" (exit 1). Its unit and direction now come
    from the summary's declaration (``harness.metrics.registry.NOT_IN_SAMPLE_UNIT``)."""
    from harness.report.units import quantity

    found = quantity(metric)
    assert (found.unit, found.higher_is_better) == (unit, None)
    verdict, reason = _judge(FLAT[:5] + [8.0, 8.0, 8.0], metric, found.higher_is_better)
    assert verdict is Verdict.INCONCLUSIVE and "which way is better is not known" in reason
    p50 = quantity("perf:latency_ms[gen=tpot,kv=on].p50")  # the control: a latency stays one
    assert (p50.unit, p50.higher_is_better) == ("ms", False)
