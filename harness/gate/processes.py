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
perf suite's cold-start children (``--perf-repeats``, default 3) each time a few steady calls after
their first (``cold_start_runs[].steady_ms``), and the pooled spread of their log medians over both
runs is sigma. With fewer than two degrees of freedom (one process per side) nothing was measured
and :data:`DEFAULT_PROCESS_SD` (the larger of the measurements above) is assumed: a comparison of two
single processes cannot tell a 1.5x change from the process it landed in, and says so
(INCONCLUSIVE), instead of failing a correct release.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: sigma (log scale) of one process's level assumed when the runs measured none (docstring)
DEFAULT_PROCESS_SD = 0.20
#: steady calls a cold-start child needs for its median to count as that process's level
MIN_STEADY_CALLS = 3
#: degrees of freedom (processes beyond one per side, pooled) before sigma is read from the runs
MIN_DEGREES = 2


@dataclass(frozen=True)
class ProcessSpread:
    """The spread added to a latency ratio for the processes the two runs ran in."""

    sd: float  # log-scale SD of the difference of two process levels (sigma x sqrt 2)
    measured: bool
    reason: str


def process_levels(perf: Mapping[str, Any] | None) -> list[float]:
    """The median steady call of each fresh process a record's cold-start measurement ran
    (``perf.cold_start_runs[].steady_ms``); [] when it has none."""
    runs = (perf or {}).get("cold_start_runs")
    if not isinstance(runs, list):
        return []
    levels = []
    for run in runs:
        steady = run.get("steady_ms") if isinstance(run, Mapping) else None
        if not isinstance(steady, list):
            continue
        calls = [float(v) for v in steady if isinstance(v, (int, float)) and not isinstance(v, bool)
                 and math.isfinite(v) and v > 0]
        if len(calls) >= MIN_STEADY_CALLS:
            levels.append(float(np.median(calls)))
    return levels


def process_spread(base: Sequence[float], cand: Sequence[float]) -> ProcessSpread:
    """Sigma pooled over both runs' process levels (each side about its own mean, so a real change
    between the runs is not counted as spread), as the SD of a difference of two levels."""
    sides = [np.log(np.asarray(side, dtype=float)) for side in (base, cand) if len(side) >= 2]
    degrees = sum(side.size - 1 for side in sides)
    if degrees < MIN_DEGREES:
        sd = DEFAULT_PROCESS_SD * math.sqrt(2)
        return ProcessSpread(sd, False, f"{len(base)}+{len(cand)} fresh process(es) timed: between-process spread "
                                        f"assumed {DEFAULT_PROCESS_SD:.0%} (--perf-repeats 2 or more measures it)")
    squares = sum(float(np.sum((side - side.mean()) ** 2)) for side in sides)
    sigma = math.sqrt(squares / degrees)
    return ProcessSpread(sigma * math.sqrt(2), True,
                         f"between-process spread {sigma:.1%} over {len(base)}+{len(cand)} fresh processes")
