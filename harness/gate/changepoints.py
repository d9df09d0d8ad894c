"""Change points in a nightly series: the run where a metric moved to a new level and stayed there.

A band (median ± 3 MADs of earlier runs) says whether *tonight* is unusual; it cannot say that
the p50 has been 30 % slower since the 3rd of the month, nor name that night. A change point
can: the series is split into segments of constant level (``ruptures``' PELT search over the
L2 cost, a BIC-style penalty ``2 σ² log n`` per change), and each boundary names the first run
of its new segment.

Why these choices:

- **ruptures, not E-Divisive**: MongoDB's ``signal-processing-algorithms`` pins numpy 1.26 (it
  would downgrade the harness's numpy 2); ruptures installs beside it and its PELT with an L2
  cost finds the same mean shifts on the short series a nightly store holds (4–60 runs).
- **σ from successive differences** (1.4826 · median |Δ| / √2): a shift inflates the plain
  standard deviation of the whole series and would hide itself; the median of the differences
  sees one jump as one outlier. A boundary must also clear 3 × the spread around the segments'
  own medians, which the differences under-read by chance in short series.
- **a level holds for ``min_size`` runs (2)**: one slow night is what the band shows; a change
  point is a level that stayed -- ``min_size`` runs of each segment on its side of the midway
  level, not only a segment that long. A boundary is kept only when the two segments' medians differ
  by at least ``min_relative`` (5 %) and by 3 σ: smaller moves are noise on this kind of machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from harness.core.direction import Direction

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd

MAD_SCALE = 1.4826
MIN_SIZE = 2
MIN_RELATIVE = 0.05


@dataclass(frozen=True)
class ChangePoint:
    """One level shift of one series: ``index`` is the position (in the series' own runs) of the
    first run at the new level, ``run_id``/``finished`` name it."""

    variant: str
    metric: str
    index: int
    run_id: str
    finished: str
    before: float  # median of the segment before
    after: float  # median of the segment from this run on
    #: True: the move is in the bad direction (slower, less accurate); None: direction unknown
    worse: bool | None = None

    @property
    def relative(self) -> float:
        return self.after / self.before - 1.0 if self.before else math.inf

    def describe(self) -> str:
        """``+36.4% from run night3 (2026-01-03 02:00), worse``: one line for a table or a log."""
        change = f"{self.relative:+.1%}" if math.isfinite(self.relative) else f"{self.before:g} -> {self.after:g}"
        verdict = {True: ", worse", False: ", better", None: ""}[self.worse]
        return f"{change} from run {self.run_id} ({self.finished}){verdict}"


def band(values: Sequence[float] | np.ndarray) -> tuple[float, float] | None:
    """Median ± 3 scaled MADs of ``values`` (the runs before the newest): where a run of the same
    level lands; None under 3 finite runs. The trend plots shade it, and the perf judge reads a
    newest run outside it, not yet a level, as INCONCLUSIVE (``harness.gate.judge``)."""
    finite = sorted(float(v) for v in values if math.isfinite(float(v)))
    if len(finite) < 3:
        return None
    import numpy as np

    median = float(np.median(finite))
    mad = float(np.median([abs(v - median) for v in finite])) * MAD_SCALE
    spread = max(3 * mad, abs(median) * 1e-9)
    return median - spread, median + spread


def noise(values: Sequence[float] | np.ndarray) -> float:
    """Robust σ of a series that may contain level shifts (from its successive differences)."""
    import numpy as np

    diffs = np.abs(np.diff(np.asarray(values, dtype=float)))
    return float(np.median(diffs)) * MAD_SCALE / math.sqrt(2) if diffs.size else 0.0


def detect(values: Sequence[float] | np.ndarray, *, min_size: int = MIN_SIZE, min_relative: float = MIN_RELATIVE) -> list[int]:
    """Indices where a new level starts (each segment at least ``min_size`` long); [] when the
    series is too short to hold two segments. Non-finite values must be removed by the caller."""
    import numpy as np

    signal = np.asarray(values, dtype=float)
    n = signal.size
    if n < 2 * min_size or not np.all(np.isfinite(signal)):
        return []
    centre = float(np.median(signal))
    # a perfectly flat stretch gives σ = 0: floor it at 0.5 % of the level so the penalty stays finite
    sigma = max(noise(signal), abs(centre) * 0.005, 1e-12)
    import ruptures

    ends = ruptures.Pelt(model="l2", min_size=min_size, jump=1).fit(signal.reshape(-1, 1)).predict(
        pen=2.0 * sigma ** 2 * math.log(n))
    starts = [0] + [int(e) for e in ends[:-1]]
    bounds = list(zip(starts, [int(e) for e in ends]))
    # the spread around the segments' own levels: successive differences under-read it by chance
    # (3 % noise read as 1.9 % in one of 40 series of 20 runs, and a +7 % wobble passed 3 sigma)
    residuals = np.concatenate([signal[a:b] - np.median(signal[a:b]) for a, b in bounds])
    sigma = max(sigma, MAD_SCALE * float(np.median(np.abs(residuals))))
    kept: list[int] = []
    for (a0, a1), (b0, b1) in zip(bounds, bounds[1:]):
        before, after = float(np.median(signal[a0:a1])), float(np.median(signal[b0:b1]))
        step = abs(after - before)
        if step >= 3 * sigma and step >= min_relative * max(abs(before), 1e-12) and \
                _held(signal[a0:a1], signal[b0:b1], before, after, min_size):
            kept.append(b0)
    return kept


def _held(first: np.ndarray, second: np.ndarray, before: float, after: float, min_size: int) -> bool:
    """Both levels held: at least ``min_size`` runs of each segment on its own side of the midway
    level. Why: PELT may end a series with ``[old, spike]`` as a two-run segment whose median is
    half the spike -- one slow night is what the band shows, not a level."""
    mid = (before + after) / 2
    moved = Direction.of(after > before)  # the way the level moved: "worse" here is "before it"
    return (sum(moved.worse(float(v), mid) for v in first) >= min_size
            and sum(moved.worse(mid, float(v)) for v in second) >= min_size)


def series_changes(series: pd.Series, variant: str, metric: str, *, higher_is_better: bool | None = None,
                   min_size: int = MIN_SIZE, min_relative: float = MIN_RELATIVE) -> list[ChangePoint]:
    """Change points of one history series (index ``(finished, run_id)``, as ``history.trend``
    gives its columns); runs without a value are left out, not read as zero."""
    import numpy as np

    values = series.astype(float)
    values = values[np.isfinite(values.to_numpy())]
    points = [(str(finished), str(run)) for finished, run in values.index]
    signal = values.to_numpy()
    found = []
    starts = detect(signal, min_size=min_size, min_relative=min_relative)
    for k, start in enumerate(starts):
        prev = ([0] + starts)[k]
        end = (starts + [len(signal)])[k + 1]
        before = float(np.median(signal[prev:start]))
        after = float(np.median(signal[start:end]))
        worse = None if higher_is_better is None else Direction.of(higher_is_better).worse(after, before)
        finished, run_id = points[start]
        found.append(ChangePoint(variant, metric, start, run_id, finished, before, after, worse))
    return found


def wide_changes(wide: pd.DataFrame, *, directions: dict[str, bool | None] | None = None) -> list[ChangePoint]:
    """Every change point of every ``(variant, metric)`` column of ``history.trend``'s table;
    ``directions`` maps a metric to higher-is-better (None or absent: unknown)."""
    out: list[ChangePoint] = []
    for variant, metric in wide.columns:
        better = (directions or {}).get(str(metric))
        out += series_changes(wide[(variant, metric)], str(variant), str(metric), higher_is_better=better)
    return out
