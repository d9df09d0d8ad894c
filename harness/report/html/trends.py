"""Trend plots from the history store: per metric, small multiples (one panel per model, a line per
precision/provider), every point at its run's real time, the y axis in the metric's unit, each
variant's baseline band shaded and its change points marked; a table of the same numbers under
each plot, and a line naming the first bad run of each regression.

Why this shape: a series drawn over ``range(len(points))`` put a variant stored in 2 of
4 runs over runs 0-1; a run index says nothing about *when*; and 14 lines in one axis with one
legend could not be told apart. The data are aligned here once (:class:`TrendData`) and both the
plot and the table are drawn from the same object.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from harness.gate.changepoints import ChangePoint, band, series_changes
from harness.report.html import plots
from harness.report.html.templating import markup, render
from harness.report.units import Quantity, fmt, quantity
from harness.report.variants import VariantParts, split_variant
from harness.results import history

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: plots at most this many metrics (the headline metrics of the cases, most common first)
MAX_PLOTS = 8
@dataclass(frozen=True)
class Run:
    """One stored run on the time axis."""

    run_id: str
    finished: str  # as stored (ISO 8601)

    @property
    def label(self) -> str:
        return f"{self.run_id} · {self.finished[:16].replace('T', ' ')}"


@dataclass
class Series:
    """One variant's values of one metric: ``values[i]`` belongs to ``runs[i]`` of the trend (None: not stored)."""

    variant: str
    values: list[float | None]
    band: tuple[float, float] | None = None
    changes: list[ChangePoint] = field(default_factory=list)
    #: the newest value lies outside the band of the runs before it
    out_of_band: bool = False

    @property
    def parts(self) -> VariantParts:
        return split_variant(self.variant)

    @property
    def model(self) -> str:
        return self.parts.model

    @property
    def setting(self) -> str:
        """The part of the variant id after the model: ``int8-ort_cpu`` (the legend of its panel)."""
        return self.variant[len(self.model) + 1:] if self.model != self.variant else self.variant


@dataclass
class TrendData:
    """Everything one metric's plot and table show, aligned by run."""

    quantity: Quantity
    runs: list[Run]
    series: list[Series]

    def first_bad(self) -> list[tuple[Series, ChangePoint]]:
        """Each series' newest change point that went the bad way: the run a regression started."""
        out = []
        for s in self.series:
            worse = [c for c in s.changes if c.worse]
            if worse:
                out.append((s, worse[-1]))
        return out


def trend_data(wide: pd.DataFrame, metric_name: str, variants: Sequence[str]) -> TrendData | None:
    """The aligned data of ``metric_name`` (a stored name or glob) for ``variants``: every run of the
    window is a position on the axis, and each series has a value only at the runs it was stored in."""
    stored = set(wide.columns)
    runs = [Run(str(run_id), str(finished)) for finished, run_id in wide.index]
    series = []
    name = metric_name
    for variant in variants:
        column = (variant, metric_name) if (variant, metric_name) in stored else next(
            (c for c in sorted(stored) if c[0] == variant and fnmatch.fnmatchcase(c[1], metric_name)), None)
        if column is None:
            continue
        name = str(column[1])
        column_values = wide[column]
        values = [None if not math.isfinite(float(v)) else float(v) for v in column_values.astype(float)]
        present = [v for v in values if v is not None]
        if len(present) < 2:
            continue
        s = Series(variant, values)
        s.band = band(present[:-1])
        s.out_of_band = s.band is not None and not (s.band[0] <= present[-1] <= s.band[1])
        s.changes = series_changes(column_values.dropna(), variant, name,
                                   higher_is_better=quantity(name).higher_is_better)
        series.append(s)
    if not series:
        return None
    series.sort(key=lambda s: s.parts.sort_key)
    return TrendData(quantity(name), runs, series)


def render_trend(data: TrendData, title: str) -> str:
    """The plot (small multiples) and, folded under it, the table of the same numbers."""
    figure = plots.trend_panels(data, title)
    marks = {(c.variant, c.run_id): "worse" if c.worse else "better" if c.worse is False else "change"
             for s in data.series for c in s.changes}
    rows = [(run, [(fmt(s.values[i], data.quantity.unit), marks.get((s.variant, run.run_id), ""))
                   for s in data.series]) for i, run in enumerate(data.runs)]
    return render("trend.html.j2", figure=markup(figure), data=data, rows=rows, unit=data.quantity.unit, fmt=fmt)


def render_trends(db: str | Path, wanted: Sequence[tuple[str, str]], *, last: int = 30,
                  max_plots: int = MAX_PLOTS) -> str:
    """``wanted``: (variant, history metric) pairs to plot."""
    metrics: dict[str, list[str]] = {}
    for variant, metric in wanted:
        if variant not in metrics.setdefault(metric, []):
            metrics[metric].append(variant)
    try:
        wide = history.trend(db, last=last)
    except history.HistoryError as exc:  # a store with no numbers yet (the first night): say so in the page
        return render("trends.html.j2", where=history.describe(db), error=str(exc), figures=[], more=0)
    ordered = sorted(metrics.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    figures = []
    for metric, variants in ordered[:max_plots]:
        data = trend_data(wide, metric, variants)
        if data is not None:
            figures.append(markup(render_trend(data, f"trend: {metric}")))
    return render("trends.html.j2", where=history.describe(db), error=None, figures=figures,
                  more=max(len(ordered) - max_plots, 0))
