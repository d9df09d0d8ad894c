"""What the perf gate judges: one typed record for every way of deciding "slower".

Four kinds of evidence reach the gate, and one judge (``harness.gate.judge``) decides all of
them by the rule its kind's row of the policy table (``harness.gate.policy``) names:

* ``TWO_RUNS``: per-call samples of a baseline run and a candidate run, recorded apart
  (``baseline compare``, a multi-run baseline, the recorded rows beside a paired re-timing), with
  what the canaries say about the machine between them: the record-level drift, and -- where both
  runs timed a canary block before each segment of their calls -- the per-segment canary medians
  the samples are divided by (:class:`CanaryBlocks`);
* ``PAIRED``: blocks of both sides timed alternately in one session or by pairs of processes
  (``perf-compare``, ``--perf``, ``--env-a/--env-b``), shape (pairs, calls per block);
* ``SINGLE``: one number per side (peak memory, artifact size, cold start; a budget is a single
  number against its limit);
* ``SERIES``: one number per stored nightly run of one variant's metric, oldest first
  (``harness history changes``): its newest level against the series' own past -- a change point
  that held, or a newest run outside its band (``harness.gate.changepoints``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from harness.core.direction import Direction
from harness.perf.canary import WORKLOAD

if TYPE_CHECKING:  # pragma: no cover
    from harness.gate.canary import Drift
    from harness.gate.processes import ProcessSpread


class EvidenceKind(enum.StrEnum):
    TWO_RUNS = "two-runs"
    PAIRED = "paired"
    SINGLE = "single"
    SERIES = "series"


@dataclass(frozen=True)
class CanaryBlocks:
    """One run's canary, interleaved with one metric's calls: ``medians[i]`` is the median of the
    canary block timed right before segment ``i`` of the samples, which ends at ``ends[i]``
    (segment ``i`` is ``samples[ends[i - 1]:ends[i]]``). Recorded as a latency entry's
    ``canary`` (``harness.perf.canary.Interleaved``)."""

    medians: tuple[float, ...]
    ends: tuple[int, ...]

    @classmethod
    def read(cls, entry: Any, samples: int) -> "CanaryBlocks | None":
        """From a latency entry's ``canary`` mapping, or None when absent, of another workload, or
        not aligned with ``samples`` calls."""
        if not isinstance(entry, Mapping) or entry.get("workload") != WORKLOAD:
            return None
        medians, ends = entry.get("block_medians"), entry.get("segment_ends")
        if not (isinstance(medians, list) and isinstance(ends, list) and len(medians) == len(ends) and ends):
            return None
        try:
            m = tuple(float(v) for v in medians)
            e = tuple(int(v) for v in ends)
        except (TypeError, ValueError):
            return None
        if any(not v > 0 for v in m) or list(e) != sorted(set(e)) or e[0] <= 0 or e[-1] > samples:
            return None
        return cls(m, e)

    def segments(self, samples: np.ndarray) -> list[np.ndarray]:
        starts = (0, *self.ends[:-1])
        return [samples[a:b] for a, b in zip(starts, self.ends)]


@dataclass(frozen=True)
class Evidence:
    """Both sides of one compared number, typed by kind (module docstring).

    ``base``/``cand``: per-call samples (``TWO_RUNS``), (pairs, block) arrays (``PAIRED``), one
    number each (``SINGLE``), or a series' earlier runs and its newest one (``SERIES``), in
    ``unit``; every perf number is lower-is-better unless ``direction`` says otherwise. ``stats``:
    the policies (by name) judged on it -- latency statistics for samples, the number's own name
    for a single one or a series.
    """

    kind: EvidenceKind
    variant: str
    metric: str
    stats: tuple[str, ...]
    base: np.ndarray
    cand: np.ndarray
    unit: str = "ms"
    #: None: not known (a SERIES of a number the registry does not declare): never REGRESSION
    direction: Direction | None = Direction.LOWER
    #: PAIRED: which process pair timed each pair (judged per group); empty: per block pair
    groups: tuple[int, ...] = ()
    #: TWO_RUNS: the record-level canaries between the runs (``harness.gate.canary.judge_drift``)
    drift: "Drift | None" = None
    #: TWO_RUNS: the spread of the two runs' processes (``harness.gate.processes``), added to every ratio
    processes: "ProcessSpread | None" = None
    #: TWO_RUNS: each side's canary interleaved with these samples; both given: canary-adjusted
    canary: tuple[CanaryBlocks, CanaryBlocks] | None = None
    #: the two sides' environment fingerprints, where known (baseline, candidate)
    fingerprints: tuple[str, str] = ("", "")
    #: SERIES: each run's label (``run_id (finished)``), the earlier runs' then the newest's
    runs: tuple[str, ...] = ()
    seed: int = 0
    #: bootstrap resamples (PAIRED)
    resamples: int = 4000

    @property
    def counts(self) -> tuple[int, int]:
        """Calls per side (two runs), pairs and judged units (paired), 1, 1 (single), or earlier
        runs and 1 (series)."""
        if self.kind is EvidenceKind.PAIRED:
            units = len(set(self.groups)) if self.groups else int(self.base.shape[0])
            return int(self.base.shape[0]), units
        return int(np.asarray(self.base).size), int(np.asarray(self.cand).size)

    @property
    def canary_adjusted(self) -> bool:
        return self.canary is not None
