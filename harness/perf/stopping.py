"""When a latency metric has enough samples: a count, a precision the gate can use, or a time budget.

A fixed sample count costs whatever the call costs: 300 calls of a 0.2 ms ORT graph take 60 ms,
300 calls of each graph of a Marian in PyTorch FP16 on the CPU took 67 s. The rule
below keeps the count for cheap metrics and bounds the expensive ones:

1. **Calibrate** (pytest-benchmark's anchor: it times the timer and a few rounds before choosing
   how many to run): ``CALIBRATION_CALLS`` untimed-for-the-record calls after the warmup give the
   per-call time.
2. **Cheap**: if the configured samples fit in ``QUICK_S`` seconds, take them all in one loop
   (stopped by ``samples``): nothing to save, and one loop keeps the timing code's warm-heap
   discipline intact.
3. **Expensive**: take the samples the gated statistics need (``min_samples``: p95 needs 200),
   within the budget; stop there when the p50's distribution-free 95 % interval is already
   narrower than ``TARGET_HALF_WIDTH`` of the median (``precision``: a quarter of the p50 gate's
   5 % threshold), else continue up to the configured count or until the budget is spent
   (``budget``). The budget never cuts below ``floor`` samples (the gate's 40 for any verdict):
   a metric whose calls are too slow for its budget says so instead of being unjudgeable.

The entry records which rule stopped it (``stopped``), the budget and the time spent, so a
reader can tell a precise number from a rationed one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from harness.perf.stats import MIN_BLOCK_SIZE, min_samples_for

#: calibration calls (discarded) after the warmup
CALIBRATION_CALLS = 3
#: a metric whose configured samples fit in this many seconds is sampled in one loop
QUICK_S = 2.0
#: stop early when the p50 95 % interval half-width is at most this fraction of the median
TARGET_HALF_WIDTH = 0.0125
_Z = 1.959963984540054

#: (rounds, warmup) -> per-call ms: one timed loop (``harness.perf.measure.time_calls``)
Rounds = Callable[[int, int], list[float]]


@dataclass(frozen=True)
class StoppingRule:
    """How many samples one latency metric takes (see the module docstring)."""

    samples: int  # the configured count: the most taken
    warmup: int
    budget_s: float | None  # None or 0: no time limit
    #: what the gated statistics need: the highest gated percentile is p95 (docs/perf-gate.md), 200 calls
    min_samples: int = min_samples_for(0.95)
    #: the least the budget may leave: the gate's minimum for any verdict (8 blocks of 5)
    floor: int = 8 * MIN_BLOCK_SIZE

    def as_dict(self) -> dict[str, object]:
        return {"budget_s": self.budget_s or None, "min_samples": self.min_samples, "floor": self.floor,
                "target_half_width": TARGET_HALF_WIDTH}


@dataclass(frozen=True)
class Sampled:
    samples: list[float]
    stopped: str  # "samples" | "precision" | "budget"
    elapsed_s: float
    per_call_ms: float


def median_half_width(samples: list[float] | np.ndarray) -> float:
    """Half-width of the distribution-free 95 % interval of the median, relative to the median."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = x.size
    if n < 10:
        return math.inf
    k = max(0, int(math.floor(n / 2 - _Z * math.sqrt(n) / 2)))
    lo, hi, med = x[k], x[min(n - 1, n - 1 - k)], float(np.median(x))
    return float((hi - lo) / (2 * med)) if med > 0 else math.inf


def sample(rounds: Rounds, rule: StoppingRule, clock: Callable[[], float] = time.perf_counter) -> Sampled:
    """Samples for one metric under ``rule``, and why sampling stopped."""
    start = clock()
    calibration = rounds(CALIBRATION_CALLS, rule.warmup)
    per_call_s = float(np.median(calibration)) / 1000.0
    budget = rule.budget_s if rule.budget_s and rule.budget_s > 0 else None
    if per_call_s * rule.samples <= QUICK_S or (budget is None and rule.samples <= rule.min_samples):
        taken = rounds(rule.samples, 0)
        return Sampled(taken, "samples", clock() - start, per_call_s * 1000)

    def affordable() -> int:
        if budget is None:
            return rule.samples
        return max(0, int((budget - (clock() - start)) / max(per_call_s, 1e-9)))

    first = min(rule.samples, rule.min_samples)
    first = max(min(first, affordable()), min(rule.floor, rule.samples))
    taken = rounds(first, 0)
    per_call_s = float(np.median(taken)) / 1000.0
    if len(taken) >= rule.samples:
        return Sampled(taken, "samples", clock() - start, per_call_s * 1000)
    if budget is not None and clock() - start >= budget:
        return Sampled(taken, "budget", clock() - start, per_call_s * 1000)
    if median_half_width(taken) <= TARGET_HALF_WIDTH:
        return Sampled(taken, "precision", clock() - start, per_call_s * 1000)
    more = rule.samples - len(taken)
    room = affordable()
    stopped = "samples" if room >= more else "budget"
    if min(more, room) > 0:
        taken = taken + rounds(min(more, room), 0)
    return Sampled(taken, stopped, clock() - start, float(np.median(taken)))



def fixed_rounds(calibrate: Rounds, rule: StoppingRule) -> tuple[int, float]:
    """For an engine that can run only once (pytest-benchmark's fixture): the rounds to ask for,
    chosen up front from a calibration, and the calibrated per-call ms. No precision stop."""
    per_call_ms = float(np.median(calibrate(CALIBRATION_CALLS, rule.warmup)))
    if not rule.budget_s or rule.budget_s <= 0:
        return rule.samples, per_call_ms
    affordable = int(rule.budget_s * 1000.0 / max(per_call_ms, 1e-6))
    return max(min(rule.samples, affordable), min(rule.floor, rule.samples)), per_call_ms
