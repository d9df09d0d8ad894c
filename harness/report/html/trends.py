"""Trend plots from the history store: one plot per headline metric, a line per variant of this
report, and each variant's baseline band (median ± 3 scaled MADs of its earlier runs)."""

from __future__ import annotations

import fnmatch
import math
from html import escape
from pathlib import Path
from typing import Sequence

from harness.report.html import plots

#: plots at most this many metrics (the headline metrics of the cases, most common first)
MAX_PLOTS = 8
MAD_SCALE = 1.4826  # MAD -> standard deviation for normal data


def band(values: Sequence[float]) -> tuple[float, float] | None:
    """Median ± 3 scaled MADs of ``values`` (the runs before the newest); None under 3 runs."""
    finite = sorted(v for v in values if math.isfinite(v))
    if len(finite) < 3:
        return None
    import numpy as np

    median = float(np.median(finite))
    mad = float(np.median([abs(v - median) for v in finite])) * MAD_SCALE
    spread = max(3 * mad, abs(median) * 1e-9)
    return median - spread, median + spread


def render_trends(db: str | Path, wanted: Sequence[tuple[str, str]], *, last: int = 30,
                  max_plots: int = MAX_PLOTS) -> str:
    """``wanted``: (variant, history metric) pairs to plot."""
    from harness.results import history

    metrics: dict[str, list[str]] = {}
    for variant, metric in wanted:
        if variant not in metrics.setdefault(metric, []):
            metrics[metric].append(variant)
    figures = []
    try:
        wide = history.trend(db, last=last)
    except history.HistoryError as exc:  # a store with no numbers yet (the first night): say so in the page
        return f'<section id="trends"><h2>Trends</h2><p class="muted">{escape(str(exc))}</p></section>'
    stored = set(wide.columns)
    for metric, variants in sorted(metrics.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:max_plots]:
        series = {}
        bands = {}
        for variant in variants:
            column = (variant, metric) if (variant, metric) in stored else next(
                (c for c in stored if c[0] == variant and fnmatch.fnmatchcase(c[1], metric)), None)
            if column is None:
                continue
            values = wide[column].dropna()
            if len(values) < 2:
                continue
            series[variant] = [(str(run), float(v)) for (_, run), v in values.items()]
            found = band([float(v) for v in values.iloc[:-1]])
            if found is not None:
                bands[variant] = found
        if series:
            figures.append(plots.trend(series, f"trend: {metric}", bands))
    body = "".join(figures) or '<p class="muted">no stored series with two or more runs for these cases</p>'
    return f'<section id="trends"><h2>Trends ({escape(history.describe(db))})</h2>{body}</section>'
