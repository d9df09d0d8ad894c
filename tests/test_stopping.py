"""The perf stopping rule (harness.perf.stopping): cheap metrics take every configured sample,
expensive ones stop at the precision the gate needs or at the time budget (never below the
gate's 40-call floor), and the reason is recorded."""

from __future__ import annotations

import numpy as np

from harness.perf.stopping import StoppingRule, fixed_rounds, median_half_width, sample


class FakeTimer:
    """Calls of ``ms`` milliseconds (lognormal noise ``sigma``) on a fake clock: no sleeping."""

    def __init__(self, ms: float, sigma: float, seed: int = 0) -> None:
        self.ms, self.sigma, self.now = ms, sigma, 0.0
        self.rng = np.random.default_rng(seed)
        self.calls = 0

    def rounds(self, n: int, warmup: int) -> list[float]:
        self.now += (warmup + 5) * self.ms / 1000  # warmup and settle calls cost time too
        out = (self.ms * self.rng.lognormal(0.0, self.sigma, n)).tolist()
        self.now += sum(out) / 1000
        self.calls += n
        return out

    def clock(self) -> float:
        return self.now


def test_cheap_metric_takes_every_sample() -> None:
    t = FakeTimer(0.2, 0.3)
    got = sample(t.rounds, StoppingRule(300, 20, 30.0), t.clock)
    assert got.stopped == "samples" and len(got.samples) == 300


def test_expensive_precise_metric_stops_at_the_gates_minimum() -> None:
    t = FakeTimer(50.0, 0.01)
    got = sample(t.rounds, StoppingRule(300, 20, 100.0), t.clock)
    assert got.stopped == "precision" and len(got.samples) == 200
    assert median_half_width(got.samples) <= 0.0125


def test_expensive_noisy_metric_stops_at_the_budget_not_below_the_floor() -> None:
    t = FakeTimer(70.0, 0.5)
    got = sample(t.rounds, StoppingRule(300, 20, 8.0), t.clock)
    assert got.stopped == "budget" and 40 <= len(got.samples) < 300
    assert got.elapsed_s < 8.0 + 70 * 50 / 1000  # within the budget, plus one loop's settle calls
    tiny = FakeTimer(70.0, 0.5)
    starved = sample(tiny.rounds, StoppingRule(300, 20, 0.5), tiny.clock)
    assert starved.stopped == "budget" and len(starved.samples) == 40  # the floor: a p50 verdict stays possible


def test_no_budget_noisy_metric_takes_the_configured_count() -> None:
    t = FakeTimer(70.0, 0.5)
    got = sample(t.rounds, StoppingRule(300, 20, None), t.clock)
    assert got.stopped == "samples" and len(got.samples) == 300


def test_single_use_engine_gets_its_rounds_up_front() -> None:
    t = FakeTimer(100.0, 0.01)
    n, per_call = fixed_rounds(t.rounds, StoppingRule(300, 20, 10.0))
    assert 90 <= n <= 110 and 95 < per_call < 105
    assert fixed_rounds(t.rounds, StoppingRule(300, 20, None))[0] == 300
