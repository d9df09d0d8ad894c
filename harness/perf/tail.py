"""How precisely a run knows its tail: the p99 interval, and how many calls it takes.

A percentile estimated from n calls has a distribution-free confidence interval between two
order statistics: with ``k ~ Binomial(n, q)`` calls below the true q-quantile, the interval
runs from the ``binom.ppf(a/2)``-th to the ``binom.ppf(1 - a/2) + 1``-th smallest sample.
It needs no model of the latency distribution (latencies are skewed and multi-modal) and it
exists only once n is large enough that the upper rank stays inside the sample: for p99 at
95 % that is 368 calls (:func:`min_calls`), so the default 300 cannot bound p99 at all.

The perf gate's p99 threshold is 20 %: a p99 whose interval is wider than that cannot tell a
20 % regression from noise. :func:`sample_for_tail` keeps timing in chunks until the interval
is narrower than the threshold or the case's time budget is spent, and the entry says which
(``tail``); the gate gates p99 only where both runs' intervals are that narrow
(:func:`precise_enough`), and reports it as advisory elsewhere, with the widths.

Calls are treated as exchangeable here; consecutive calls are correlated, so the interval is
a lower bound on the real uncertainty. The gate's block bootstrap (harness.perf.stats) is
the test of a *change*; this is the cheaper question "is this one estimate sharp enough".
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

from harness.metrics.registry import perf_policies

#: the confidence of the tail interval (the gate's alpha is 0.05 too)
CONFIDENCE = 0.95
#: the percentile whose interval decides the number of calls (the SLA number)
TAIL_Q = 0.99
#: the relative p99 interval width sampling aims at: the perf gate's default p99 threshold, read
#: from its declaration (the ``p99_ms`` budget's ``perf_gate`` in the metric registry)
DEFAULT_TAIL_TARGET = perf_policies()["p99"].min_effect
#: never time more than this many calls for the tail, whatever the budget (memory of samples,
#: and a record that stays readable); at 0.5 ms a call it is 10 s
MAX_TAIL_CALLS = 20_000


def min_calls(q: float = TAIL_Q, confidence: float = CONFIDENCE) -> int:
    """Fewest calls for which the q-quantile has a two-sided order-statistic interval.

    The upper rank exists when P(all n calls below the quantile) = q**n <= (1 - confidence) / 2.
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    return math.ceil(math.log((1.0 - confidence) / 2.0) / math.log(q) - 1e-9)


def quantile_interval(samples: Sequence[float] | np.ndarray, q: float = TAIL_Q,
                      confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The distribution-free interval of the q-quantile, or None when n is too small to bound it."""
    from scipy.stats import binom

    arr = np.sort(np.asarray(samples, dtype=float).ravel())
    n = int(arr.size)
    if n < min_calls(q, confidence):
        return None
    alpha = 1.0 - confidence
    lo_rank = int(binom.ppf(alpha / 2.0, n, q))  # 1-based rank of the lower bound
    hi_rank = int(binom.ppf(1.0 - alpha / 2.0, n, q)) + 1
    if lo_rank < 1 or hi_rank > n:
        return None
    return float(arr[lo_rank - 1]), float(arr[hi_rank - 1])


@dataclass(frozen=True)
class TailEstimate:
    """How sharp one sample set's tail percentile is; stored as the entry's ``tail``.

    ``relative_width`` is (hi - lo) / estimate, inf when there is no interval; ``met`` is
    ``relative_width <= target``; ``stopped_by`` says why sampling ended: ``interval`` (met),
    ``budget`` (the case's tail seconds spent), ``max_calls``, or ``off`` (no tail sampling asked).
    """

    q: float
    calls: int
    estimate: float
    interval: tuple[float, float] | None
    relative_width: float
    target: float
    met: bool
    stopped_by: str

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["interval"] = list(self.interval) if self.interval is not None else None
        out["relative_width"] = self.relative_width if math.isfinite(self.relative_width) else None
        return out


def estimate(samples: Sequence[float] | np.ndarray, target: float, stopped_by: str,
             q: float = TAIL_Q) -> TailEstimate:
    arr = np.asarray(samples, dtype=float)
    value = float(np.percentile(arr, 100.0 * q))
    interval = quantile_interval(arr, q)
    width = (interval[1] - interval[0]) / value if interval is not None and value > 0 else math.inf
    return TailEstimate(q, int(arr.size), value, interval, width, target, width <= target, stopped_by)


def precise_enough(samples: Sequence[float] | np.ndarray, threshold: float, q: float = TAIL_Q) -> tuple[bool, str]:
    """Whether one run's q-quantile is sharp enough to gate a ``threshold`` change, and why not."""
    est = estimate(samples, threshold, "gate", q)
    if est.interval is None:
        return False, f"{est.calls} calls cannot bound p{round(100 * q)} (needs >= {min_calls(q)})"
    if not est.met:
        return False, f"p{round(100 * q)} interval {est.relative_width:.0%} wide > the {threshold:.0%} threshold"
    return True, f"p{round(100 * q)} interval {est.relative_width:.0%} wide"


def sample_for_tail(samples: list[float], more: Callable[[int], list[float]], *, target: float,
                    budget_s: float, clock: Callable[[], float] = time.monotonic,
                    max_calls: int = MAX_TAIL_CALLS) -> tuple[list[float], TailEstimate]:
    """Extend ``samples`` with chunks from ``more(n)`` until the tail interval is narrower
    than ``target`` (relative), ``budget_s`` seconds of extra timing are spent, or
    ``max_calls`` are reached. ``budget_s <= 0`` takes the samples as they are.

    Chunks double the sample count (at least up to :func:`min_calls`), so the number of
    interval checks grows with log(n) and the loop overshoots the needed count by < 2x.
    """
    out = list(samples)
    if budget_s <= 0:
        return out, estimate(out, target, "off")
    spent = 0.0  # seconds inside ``more``: the budget is timing time, not the interval checks'
    while True:
        est = estimate(out, target, "interval")
        if est.met:
            return out, est
        if len(out) >= max_calls:
            return out, estimate(out, target, "max_calls")
        if spent >= budget_s:
            return out, estimate(out, target, "budget")
        chunk = min(max(len(out), min_calls() - len(out), 50), max_calls - len(out))
        per_call_s = max(float(np.mean(out)) / 1000.0, 1e-6) if out else 1e-3
        chunk = min(chunk, max(50, int((budget_s - spent) / per_call_s)))  # stay near the budget
        start = clock()
        out.extend(more(chunk))
        spent += clock() - start
