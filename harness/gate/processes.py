"""Between-process spread: how far one model's steady latency moves from one fresh process to the next.

Two recorded runs are two processes. A model's per-call latency depends on the process it runs in
(where the allocator put the weights, which core the thread landed on, the cache sets its buffers
map to), by an amount the canary does not see: the canary is another workload in the same process,
and it stayed put while the model moved. Measured here (2026-12-02, quiet 2-core box, ONNX Runtime
CPU, one thread, the p50 of 400 calls per fresh process):

* bert-tiny (0.3 ms per call), 16 processes: 0.173 to 0.362 ms, SD of log p50 **0.198**;
* MiniLM-L6 (12 ms per call), 10 processes: 11.3 to 13.2 ms, SD of log p50 **0.047**.

Within-run statistics cannot see this: the docs' A/A gate (`pytest --harness-perf
--harness-baseline-save`, then `--harness-baseline-compare` six times, bert-tiny) read p50
+28 % to +51 % with p = 2e-04 as REGRESSION in three of six compares. So the two-runs rule adds the
spread of the *difference* of two process levels (sigma x sqrt 2) to every latency ratio, with
sigma measured from the runs themselves where they hold more than one process of the variant: the
perf suite's cold-start children (``--perf-repeats``, default 3) each time steady calls after
their first (``cold_start_runs[].steady_ms`` and ``level_ms``, ``harness.perf.child``), and the
pooled spread of their log medians over both runs is sigma. With fewer than two degrees of freedom
(one process per side) nothing was measured and :data:`DEFAULT_PROCESS_SD` (the larger of the
measurements above) is assumed: a comparison of two single processes cannot tell a 1.5x change
from the process it landed in, and says so (INCONCLUSIVE), instead of failing a correct release.

The fresh processes are evidence of the change too, not only of the spread (pyperf's way: a run's
level is the mean of its processes). Each child times the harness's canary between segments of its
steady calls (``harness.perf.child``), so its level is read against what the machine did in its moment,
as the main process's segments are; when every process of both runs did, the change in level is
the main process's change and the children's mean change combined by inverse variance
(:meth:`ProcessSpread.combine`): the main process's part carries its own error and sigma x 1.41,
the children's sigma x 0.82 with three a side, so the combined spread is at most sigma x 0.71
(measured: ``scripts/bench_gate_power.py``, docs/perf-gate.md). When the children's change and
the main process's disagree beyond what sigma allows (a change only a long-running process shows,
say), nothing is combined and the main process's rule stands; nor with fewer than
:data:`MIN_COMBINE_DEGREES` pooled degrees of freedom (two children a side), whose sigma is too
unsure to weigh their mean by.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.perf.canary import WORKLOAD

#: sigma (log scale) of one process's level assumed when the runs measured none (docstring)
DEFAULT_PROCESS_SD = 0.20
#: steady calls a cold-start child needs for its median to count as that process's level
MIN_STEADY_CALLS = 3
#: degrees of freedom (processes beyond one per side, pooled) before sigma is read from the runs
MIN_DEGREES = 2
#: pooled degrees of freedom before the children's change is *combined* with the main process's:
#: sigma read from two (two children a side) is too unsure to weigh their mean by: a 90 % interval
#: for the true sigma spans 0.58x to 4.4x the estimate (0.65x to 2.4x from four: three children a
#: side, the default ``--perf-repeats``). The docs' gate (``--perf-repeats 1``: a cold-start and an
#: artifact child a side, compared in the same process) read, A/A, spread 7.2 %, children +21.6 %,
#: main process -3.0 %, combined +18.2 % [+3.5 %, +34.9 %] (only the machine's drift kept it
#: INCONCLUSIVE), and REGRESSION once in CI beside a loaded neighbour.
MIN_COMBINE_DEGREES = 4
#: canary calls a child needs for its median to adjust the child's level
MIN_CANARY_CALLS = 5
#: how far (in standard errors) the children's change may sit from the main process's and still be combined
AGREEMENT_Z = 2.576
#: the least sigma a combination assumes: a level is the median of a few calls, never exact (identical
#: children would otherwise make any difference from the main process a disagreement)
MIN_COMBINED_SD = 0.01


@dataclass(frozen=True)
class ProcessLevel:
    """One fresh process of a run: its median steady call and, where it timed the harness's canary
    after them (the same workload), the canary's median call."""

    level_ms: float
    canary_ms: float | None = None

    @property
    def adjusted(self) -> float | None:
        """The level against the machine's moment (level / canary), or None without a canary."""
        return self.level_ms / self.canary_ms if self.canary_ms else None


@dataclass(frozen=True)
class Combined:
    """The change in level (log) from the main process and the fresh processes, and its spread."""

    change: float
    sd: float
    reason: str


@dataclass(frozen=True)
class ProcessSpread:
    """The spread added to a latency ratio for the processes the two runs ran in; ``adjusted``: each
    side's canary-adjusted log levels when every process of both runs timed the canary (then the
    children's change can be combined with the main process's, :meth:`combine`)."""

    sd: float  # log-scale SD of the difference of two process levels (sigma x sqrt 2)
    measured: bool
    reason: str
    adjusted: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    degrees: int = 0  # pooled degrees of freedom sigma was read with

    def combine(self, main_change: float, main_sd: float) -> Combined | None:
        """The main process's log change in level and the children's mean change, weighted by their
        inverse variances: the main process's own error (``main_sd``: its calls, its level's
        wander, the machine's drift) plus 2 sigma^2 for the two processes it compares, and sigma^2
        (1/k_a + 1/k_b) for the children's means. None when there is nothing to combine or the two
        disagree beyond ``AGREEMENT_Z`` standard errors of their difference, or when sigma was read
        with fewer than :data:`MIN_COMBINE_DEGREES` degrees of freedom (then the spread only widens
        the main process's interval)."""
        if self.adjusted is None or not self.measured or self.degrees < MIN_COMBINE_DEGREES \
                or not (math.isfinite(main_change) and math.isfinite(main_sd)):
            return None
        base, cand = (np.asarray(side, dtype=float) for side in self.adjusted)
        sigma = max(self.sd / math.sqrt(2), MIN_COMBINED_SD)
        children = float(cand.mean() - base.mean())
        var_main = main_sd ** 2 + 2.0 * sigma ** 2
        var_children = sigma ** 2 * (1.0 / base.size + 1.0 / cand.size)
        if abs(main_change - children) > AGREEMENT_Z * math.sqrt(var_main + var_children):
            return None
        w_main, w_children = 1.0 / var_main, 1.0 / var_children
        change = (w_main * main_change + w_children * children) / (w_main + w_children)
        return Combined(change, 1.0 / math.sqrt(w_main + w_children),
                        f"level from 1+{base.size} and 1+{cand.size} processes, each against its canary (spread "
                        f"{sigma:.1%}): fresh processes {math.exp(children) - 1:+.1%}, main process "
                        f"{math.exp(main_change) - 1:+.1%}")


def process_levels(perf: Mapping[str, Any] | None) -> list[ProcessLevel]:
    """Each fresh process a record's cold-start measurement ran (``perf.cold_start_runs[]``): the
    median of its steady calls (``steady_ms``, and ``level_ms``: those it timed between canary
    blocks, ``harness.perf.child``) and of its canary calls; [] when it has none."""
    runs = (perf or {}).get("cold_start_runs")
    if not isinstance(runs, list):
        return []
    levels = []
    for run in runs:
        if not isinstance(run, Mapping):
            continue
        calls = _positive(run.get("steady_ms")) + _positive(run.get("level_ms"))
        if len(calls) >= MIN_STEADY_CALLS:
            levels.append(ProcessLevel(float(np.median(calls)), _canary_median(run.get("canary"))))
    return levels


def _positive(values: Any) -> list[float]:
    if not isinstance(values, list):
        return []
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v) and v > 0]


def _canary_median(entry: Any) -> float | None:
    """The median of a child's canary calls, or None when absent, of another workload or too few."""
    if not isinstance(entry, Mapping) or entry.get("workload") != WORKLOAD:
        return None
    calls = _positive(entry.get("samples"))
    return float(np.median(calls)) if len(calls) >= MIN_CANARY_CALLS else None


def process_spread(base: Sequence[ProcessLevel], cand: Sequence[ProcessLevel]) -> ProcessSpread:
    """Sigma pooled over both runs' process levels (each side about its own mean, so a real change
    between the runs is not counted as spread), as the SD of a difference of two levels; the levels
    read against their canaries when every process of both runs timed one."""
    adjusted = _adjusted(base, cand)
    values = adjusted if adjusted is not None else tuple(tuple(math.log(p.level_ms) for p in side)
                                                         for side in (base, cand))
    sides = [np.asarray(side, dtype=float) for side in values if len(side) >= 2]
    degrees = sum(side.size - 1 for side in sides)
    if degrees < MIN_DEGREES:
        sd = DEFAULT_PROCESS_SD * math.sqrt(2)
        return ProcessSpread(sd, False, f"{len(base)}+{len(cand)} fresh process(es) timed: between-process spread "
                                        f"assumed {DEFAULT_PROCESS_SD:.0%} (--perf-repeats 2 or more measures it)")
    squares = sum(float(np.sum((side - side.mean()) ** 2)) for side in sides)
    sigma = math.sqrt(squares / degrees)
    against = ", each against its canary" if adjusted is not None else ""
    return ProcessSpread(sigma * math.sqrt(2), True,
                         f"between-process spread {sigma:.1%} over {len(base)}+{len(cand)} fresh processes{against}",
                         adjusted if adjusted is not None and min(len(base), len(cand)) >= 2 else None, degrees)


def _adjusted(base: Sequence[ProcessLevel],
              cand: Sequence[ProcessLevel]) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """Both sides' log canary-adjusted levels, or None unless every process of both timed the canary."""
    b, c = ([p.adjusted for p in side] for side in (base, cand))
    if not b or not c or any(a is None for a in (*b, *c)):
        return None
    return tuple(math.log(a) for a in b if a), tuple(math.log(a) for a in c if a)
