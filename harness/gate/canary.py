"""Machine drift between two runs, read from their canaries, and what it does to a verdict.

Every latency metric is timed beside a fixed workload (``harness.perf.canary``). For an unpaired
comparison (baseline from another run), the canaries of the baseline's and the candidate's
record of one variant are compared like any latency metric (p50 ratio, block-bootstrap
interval). Two rules follow:

* **Drift**: when the canaries differ beyond their noise -- the interval excludes 1 and the
  change is at least ``DRIFT_TOLERANCE`` -- the machine ran at another speed for the candidate
  than for the baseline, and every latency verdict of that variant is INCONCLUSIVE ("machine
  drift"), whatever its own numbers say. Not normalised: the canary is not the model, and a
  neighbour that steals memory bandwidth slows a memory-bound graph more than the canary (or
  less), so dividing by the canary's ratio would trade one bias for another.
* **Between-run spread**: without drift, the canaries still measure how far two runs on this
  machine may differ for no reason of the model's. That spread (the canary's log-ratio and its
  standard error, at least ``MIN_BETWEEN_SD``; ``DEFAULT_BETWEEN_SD`` when either side has no
  canary, e.g. a baseline saved before canaries existed) is added to the within-run standard
  error of every latency ratio: the interval widens and the p-value grows to what the two
  together allow. A single-run baseline can then no longer claim p = 7e-08 for a 10 % change on
  a machine that moves 10 % between runs.

Paired comparisons (``harness.gate.paired``) time both sides in the same session and need none of
this: drift hits both sides of every pair alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from harness.perf.canary import WORKLOAD
from harness.perf.stats import bootstrap_ratio_ci

#: a canary change at least this large (and beyond the canary's own noise) is machine drift
DRIFT_TOLERANCE = 0.03
#: the least between-run standard deviation (log ratio) assumed even when the canaries agree:
#: the SD of the A/A p50 ratios of 110 identical-run pairs on the shared box (docs/perf-gate.md)
MIN_BETWEEN_SD = 0.015
#: between-run standard deviation (log ratio) assumed when a side has no canary (a baseline saved
#: before canaries existed): the measured floor, since nothing else was measured for that pair
DEFAULT_BETWEEN_SD = MIN_BETWEEN_SD
_Z = 1.959963984540054  # two-sided 95 %


@dataclass(frozen=True)
class Drift:
    """What the canaries of one variant say about the machine between two runs."""

    ratio: float | None  # candidate / baseline canary p50; None when a side has none
    lo: float | None
    hi: float | None
    between_sd: float  # log-scale standard deviation added to every latency ratio
    drifted: bool
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "ci": [self.lo, self.hi] if self.lo is not None else None,
                "between_sd": round(self.between_sd, 5), "drifted": self.drifted, "reason": self.reason}


def canary_samples(perf: Mapping[str, Any] | None) -> np.ndarray | None:
    """A record's canary samples, or None (no canary, or another workload)."""
    entry = (perf or {}).get("canary_ms")
    if not isinstance(entry, Mapping) or entry.get("workload") != WORKLOAD:
        return None
    samples = entry.get("samples")
    if not isinstance(samples, list):
        return None
    arr = np.asarray([s for s in samples if isinstance(s, (int, float))], dtype=float)
    arr = arr[np.isfinite(arr) & (arr > 0)]
    return arr if arr.size >= 20 else None


def judge_drift(base: np.ndarray | None, cand: np.ndarray | None, *, seed: int = 0) -> Drift:
    """Drift and between-run spread from two runs' canary samples (either may be None)."""
    if base is None or cand is None:
        side = "baseline" if base is None else "candidate"
        return Drift(None, None, None, DEFAULT_BETWEEN_SD, False,
                     f"no canary in the {side}: between-run spread assumed {DEFAULT_BETWEEN_SD:.1%}")

    ratio, lo, hi = bootstrap_ratio_ci(base, cand, np.median, seed=seed)
    se = (math.log(hi) - math.log(lo)) / (2 * _Z) if lo > 0 and hi > 0 else DEFAULT_BETWEEN_SD
    between = max(MIN_BETWEEN_SD, math.hypot(math.log(ratio), se))
    change = f"{(ratio - 1) * 100:+.1f}%"
    interval = f"[{(lo - 1) * 100:+.1f}%, {(hi - 1) * 100:+.1f}%]"
    drifted = (lo > 1.0 or hi < 1.0) and abs(ratio - 1.0) >= DRIFT_TOLERANCE
    if drifted:
        return Drift(ratio, lo, hi, between, True, f"machine drift: canary {change} {interval} between the runs")
    return Drift(ratio, lo, hi, between, False, f"canary {change} {interval}: between-run spread {between:.1%}")


def widen(ratio: float, lo: float, hi: float, p_value: float, between_sd: float) -> tuple[float, float, float]:
    """The interval and p-value of a latency ratio with the between-run spread added.

    The within-run standard error comes from the block-bootstrap interval; the two add in
    quadrature on the log scale. The p-value is the larger of the rank test's and a normal
    test's on the combined error, so it can only grow.
    """
    if not (ratio > 0 and lo > 0 and hi > 0):
        return lo, hi, p_value
    within = (math.log(hi) - math.log(lo)) / (2 * _Z)
    total = math.hypot(within, between_sd)
    centre = math.log(ratio)
    new_lo, new_hi = math.exp(centre - _Z * total), math.exp(centre + _Z * total)
    p_normal = math.erfc(abs(centre) / (total * math.sqrt(2))) if total > 0 else p_value
    return min(lo, new_lo), max(hi, new_hi), max(p_value, p_normal)
