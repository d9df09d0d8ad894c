"""Matplotlib figures as inline SVG: the report stays one offline file (no CDN, no script).

The Agg backend is forced (no display on CI machines); text stays text in the SVG
(``svg.fonttype = none``: smaller, searchable) and matplotlib escapes it, so a model name
cannot inject markup. Fixed ``svg.hashsalt`` and no date metadata: the same data gives the
same bytes, which keeps reports diffable.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from harness.report.html.templating import markup, render
from harness.report.units import fmt
from harness.report.variants import split_variant

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from harness.report.html.trends import Run, Series, TrendData

#: verdict colours shared with the grid (also colour-blind distinguishable by lightness)
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
MAX_SERIES = 10


def _figure(width: float, height: float) -> Figure:
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=96, layout="constrained")


def to_svg(fig: Figure, label: str) -> str:
    """The figure as an ``<svg>`` element (no XML prolog) with an accessible label
    (``templates/figure.html.j2``; matplotlib escapes the text inside the SVG itself)."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "harness", "font.size": 9}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = buffer.getvalue()
    start = svg.find("<svg")
    return render("figure.html.j2", label=label, svg=markup(svg[start:])).rstrip("\n")


def latency_cdf(series: Mapping[str, Sequence[float]], title: str) -> str:
    """Empirical CDF per variant with p50 and p99 marked: the shape (a tail, two modes) that a
    percentile table hides. Up to ``MAX_SERIES`` variants share one panel; more are drawn as
    small multiples, one panel per model (its precisions and providers), so every variant is
    shown -- a single panel used to stop at 10 and count the rest."""
    groups: dict[str, dict[str, Sequence[float]]] = {}
    if len(series) <= MAX_SERIES:
        groups[""] = dict(series)
    else:
        for name, samples in series.items():
            groups.setdefault(split_variant(name).model, {})[name] = samples
    columns = 1 if len(groups) == 1 else 2
    rows = math.ceil(len(groups) / columns)
    fig = _figure(7.0 if columns == 1 else 9.0, 3.2 if rows == 1 else 2.6 * rows)
    shared_log = _needs_log([s for samples in series.values() for s in samples])
    for index, (model, members) in enumerate(groups.items()):
        ax: Axes = fig.add_subplot(rows, columns, index + 1)
        _cdf_panel(ax, members, shared_log)
        ax.set_title(model or title, fontsize=9)
    if len(groups) > 1:
        fig.suptitle(f"{title} ({len(series)} variants, one panel per model)", fontsize=10)
        title = f"{title} ({len(series)} variants, one panel per model)"
    return to_svg(fig, title)


def _needs_log(values: Sequence[float]) -> bool:
    """A tail of preempted calls would squeeze the body of the distribution on a linear axis."""
    import numpy as np

    positive = [v for v in values if math.isfinite(v) and v > 0]
    return bool(positive) and max(positive) > 20 * float(np.median(positive))


def _cdf_panel(ax: Axes, series: Mapping[str, Sequence[float]], log: bool) -> None:
    import numpy as np

    for i, (name, samples) in enumerate(series.items()):
        values = np.sort(np.asarray([s for s in samples if math.isfinite(s)], dtype=float))
        if values.size == 0:
            continue
        colour = PALETTE[i % len(PALETTE)]
        ax.step(values, np.arange(1, values.size + 1) / values.size, where="post", color=colour, label=name)
        for q, marker in ((50, "o"), (99, "^")):
            x = float(np.percentile(values, q))
            ax.plot([x], [q / 100], marker=marker, color=colour, markersize=5)
    if log:
        ax.set_xscale("log")
    ax.axhline(0.5, color="#999", linewidth=0.6, linestyle=":")
    ax.axhline(0.99, color="#999", linewidth=0.6, linestyle=":")
    ax.set_xlabel("latency per call (ms)   ● p50   ▲ p99")
    ax.set_ylabel("fraction of calls")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


@dataclass(frozen=True)
class LoadPoint:
    """One level of a served model's load sweep: what was offered (``rate 40/s``,
    ``concurrency 4``), the answers per second measured, and the latency percentiles."""

    label: str
    throughput: float
    p50: float
    p99: float
    meets: bool | None = None  # against the p99 budget, where one was given


def load_curve(curves: Mapping[str, Sequence[LoadPoint]], budget_ms: float | None, title: str) -> str:
    """Latency against throughput per served model (p50 solid, p99 dashed, each level labelled
    with what was offered): where the curve turns up is the server's capacity; the p99 budget
    is a horizontal line, and the levels that met it are filled."""
    fig = _figure(7.0, 3.4)
    ax: Axes = fig.add_subplot()
    for i, (name, points) in enumerate(list(curves.items())[:MAX_SERIES]):
        colour = PALETTE[i % len(PALETTE)]
        xs = [pt.throughput for pt in points]
        ax.plot(xs, [pt.p50 for pt in points], color=colour, marker="o", markersize=4, label=f"{name} p50")
        ax.plot(xs, [pt.p99 for pt in points], color=colour, marker="^", markersize=5, linestyle="--",
                label=f"{name} p99", markerfacecolor="none")
        for pt in points:
            if pt.meets:
                ax.plot([pt.throughput], [pt.p99], marker="^", markersize=6, color=colour)
            ax.annotate(pt.label, (pt.throughput, pt.p99), textcoords="offset points", xytext=(3, 4), fontsize=6)
    if budget_ms is not None:
        ax.axhline(budget_ms, color="#d62728", linewidth=0.8, linestyle=":")
        ax.text(0.01, budget_ms, f" p99 budget {budget_ms:g} ms", transform=ax.get_yaxis_transform(), fontsize=7,
                va="bottom", color="#d62728")
    values = [pt.p99 for points in curves.values() for pt in points if pt.p99 > 0]
    if values and max(values) > 50 * min(values):
        ax.set_yscale("log")  # a saturated level's queue would flatten every other level
    ax.set_xlabel("answers per second (filled ▲: p99 within the budget)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return to_svg(fig, title)


@dataclass(frozen=True)
class VariantBar:
    """One variant in a model's chart: p50 with its p99 (and the p99's interval), and its cold start
    (load, first inference), each None where not measured."""

    name: str
    p50_ms: float | None = None
    p99_ms: float | None = None
    p99_interval: tuple[float, float] | None = None
    cold_ms: tuple[float, float] | None = None


def model_chart(bars: Sequence[VariantBar], title: str) -> str:
    """A model's small chart, each variant once, in the order given (the table's): latency (p50 bar,
    p99 ▲ with its 95 % interval as a whisker) and, where measured, cold start (load + first inference
    stacked). Each total is written in its unit beside its bar; an axis goes log when its values span
    two orders of magnitude. One chart per model: the small multiples of the perf section."""
    panels = [p for p in ("latency", "cold") if any((b.p50_ms if p == "latency" else b.cold_ms) is not None
                                                    for b in bars)]
    fig = _figure(4.2 * max(len(panels), 1), 0.8 + 0.26 * max(len(bars), 1))
    names = [b.name for b in bars]
    for index, panel in enumerate(panels):
        ax: Axes = fig.add_subplot(1, len(panels), index + 1)
        if panel == "latency":
            p50 = [b.p50_ms or 0.0 for b in bars]
            ax.barh(names, p50, color=PALETTE[0], label="p50")
            for y, b in enumerate(bars):
                if b.p99_ms is None:
                    continue
                if b.p99_interval is not None:
                    ax.plot(list(b.p99_interval), [y, y], color=PALETTE[3], linewidth=1.0)
                ax.plot([b.p99_ms], [y], marker="^", color=PALETTE[3], markersize=5, label="p99" if y == 0 else None)
            ends = [max(b.p50_ms or 0.0, b.p99_ms or 0.0, *(b.p99_interval or ())) for b in bars]
            labels = [" · ".join(f"{name} {fmt(v, 'ms')}" for name, v in (("p50", b.p50_ms), ("p99", b.p99_ms))
                                 if v is not None) for b in bars]
            _scale(ax, ends, labels, "ms", [v for b in bars for v in (b.p50_ms, b.p99_ms) if v])
            ax.set_title("latency: p50 bar, ▲ p99 [95% interval]", fontsize=8)
        else:
            load = [b.cold_ms[0] if b.cold_ms else 0.0 for b in bars]
            first = [b.cold_ms[1] if b.cold_ms else 0.0 for b in bars]
            ax.barh(names, load, color=PALETTE[1], label="load")
            ax.barh(names, first, left=load, color=PALETTE[2], label="first inference")
            totals = [a + c for a, c in zip(load, first)]
            _scale(ax, totals, [fmt(t, "ms") if b.cold_ms else "" for t, b in zip(totals, bars)], "ms", totals)
            ax.set_title("cold start: load + first inference", fontsize=8)
            ax.legend(fontsize=6, loc="lower right", frameon=False)
        if index:
            ax.set_yticklabels([])
        ax.invert_yaxis()
    fig.suptitle(title, fontsize=9)
    return to_svg(fig, title)


def _scale(ax: Axes, ends: Sequence[float], labels: Sequence[str], unit: str, values: Sequence[float]) -> None:
    """Room for each bar's label inside the axes (past its bar's end, ``ends``); a log axis when the
    drawn ``values`` span more than 30x (a 0.3 ms bar beside a 20 ms one would vanish)."""
    positive = [v for v in values if v > 0]
    reach = max((e for e in ends if e > 0), default=0.0)
    log = bool(positive) and max(positive) > 30 * min(positive)
    if log:
        ax.set_xscale("log")
        ax.set_xlim(min(positive) / 2, reach * 30)
    elif positive:
        from matplotlib.ticker import MaxNLocator

        ax.set_xlim(0, reach * 1.8)
        ax.xaxis.set_major_locator(MaxNLocator(4))  # 20000-ms tick labels would run into each other
    for y, (end, label) in enumerate(zip(ends, labels)):
        if label and end > 0:
            ax.text(end, y, f" {label}", va="center", fontsize=7)
    ax.set_xlabel(unit + (" (log scale)" if log else ""), fontsize=8)


#: panels per trend figure (one per model); the rest are named in a note and kept in the table
MAX_PANELS = 6
#: runs up to which every run gets its own labelled tick (date and run id)
MAX_RUN_TICKS = 12


def _run_times(runs: Sequence[Run]) -> list[float] | None:
    """Matplotlib date numbers of the runs' finish times; None when one is missing or two coincide
    (then runs are drawn at their positions, still aligned, labelled by run id)."""
    import pandas as pd
    from matplotlib.dates import date2num

    stamps = pd.to_datetime([r.finished for r in runs], utc=True, errors="coerce", format="mixed")
    if stamps.isna().any() or not stamps.is_monotonic_increasing or stamps.has_duplicates:
        return None
    return [float(x) for x in date2num(stamps.tz_convert(None).to_pydatetime())]


def trend_panels(data: TrendData, title: str) -> str:
    """Small multiples over time: one panel per model (a line per precision/provider), each point at
    the real time of the run that stored it (a variant stored in 2 of 4 runs is drawn at those 2), the
    y axis labelled with the metric's unit (log when the values span two orders of magnitude), the
    baseline band shaded and change points dashed. Lines carry ``gid="series:<variant>"`` and change
    markers ``gid="change:<variant>:<run>"`` in the SVG, so tests and tools can read the drawing."""
    from matplotlib.ticker import FixedLocator, NullFormatter

    by_model: dict[str, list[Series]] = {}
    for s in data.series:
        by_model.setdefault(s.model, []).append(s)
    models = list(by_model)[:MAX_PANELS]
    hidden = len(by_model) - len(models)
    times = _run_times(data.runs)
    xs_all = times if times is not None else [float(i) for i in range(len(data.runs))]
    fig = _figure(8.0, 0.7 + 1.9 * len(models) + (0.3 if hidden else 0))
    axes = fig.subplots(len(models), 1, sharex=True, squeeze=False)[:, 0]
    positive = [v for s in data.series for v in s.values if v is not None and v > 0]
    log = bool(positive) and max(positive) > 100 * min(positive)
    for ax, model in zip(axes, models):
        shown = by_model[model][:MAX_SERIES]
        for i, s in enumerate(shown):
            colour = PALETTE[i % len(PALETTE)]
            points = [(x, v) for x, v in zip(xs_all, s.values) if v is not None]
            (line,) = ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3.5,
                              color=colour, label=s.setting)
            line.set_gid(f"series:{s.variant}")
            if s.band is not None:
                ax.fill_between([xs_all[0], xs_all[-1]], *s.band, color=colour, alpha=0.10, linewidth=0)
            index = {r.run_id: k for k, r in enumerate(data.runs)}
            for c in s.changes:
                at = xs_all[index[c.run_id]]
                marker = ax.axvline(at, color=colour, linewidth=1.1, linestyle="--")
                marker.set_gid(f"change:{s.variant}:{c.run_id}")
                ax.annotate(f"{c.relative:+.0%}" if math.isfinite(c.relative) else "change", (at, 1.0),
                            xycoords=("data", "axes fraction"), xytext=(2, -9), textcoords="offset points",
                            fontsize=7, color=PALETTE[3] if c.worse else colour)
        more = len(by_model[model]) - len(shown)
        ax.set_title(model + (f"  (+{more} more series in the table)" if more else ""), fontsize=9, loc="left")
        ax.set_ylabel(data.quantity.axis_label, fontsize=8)
        if log:
            ax.set_yscale("log")
        else:
            ax.ticklabel_format(axis="y", useOffset=False, style="plain")
        ax.grid(True, axis="y", color="#eee", linewidth=0.6)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    bottom = axes[-1]
    if len(data.runs) <= MAX_RUN_TICKS:
        bottom.xaxis.set_major_locator(FixedLocator(xs_all))
        labels = [f"{r.finished[5:16].replace('T', ' ')}\n{r.run_id[:16]}" if times is not None else r.run_id[:16]
                  for r in data.runs]
        bottom.set_xticks(xs_all, labels, fontsize=7)
    elif times is not None:
        from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

        locator = AutoDateLocator()
        bottom.xaxis.set_major_locator(locator)
        bottom.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    else:
        bottom.xaxis.set_minor_formatter(NullFormatter())
    bottom.set_xlabel("run finished (UTC) and run id" if times is not None else "run (oldest → newest)")
    if len(xs_all) == 1:
        bottom.set_xlim(xs_all[0] - 1, xs_all[0] + 1)
    fig.suptitle(title + (f"  ({hidden} more model(s) in the table)" if hidden else ""), fontsize=10)
    return to_svg(fig, title)


# --- `harness bisect` error along the graph (harness/debug/report.py) ---
def error_along_graph(points: Sequence[tuple[int, float, bool]], bands: Sequence[tuple[int, int, str]],
                      threshold: float | None, first: tuple[int, str] | None, title: str,
                      overflow: tuple[int, str] | None = None) -> str:
    """Each compared tensor's normalised error against its topological position (log scale;
    NaN/inf drawn at the top edge as crosses), divergent ones in red, alternate layers shaded
    and labelled, the per-tensor threshold dashed and the first divergent tensor marked with
    the module it came from: where the error is born and how it grows."""
    import numpy as np

    fig = _figure(9.0, 3.6)
    ax: Axes = fig.add_subplot()
    finite = [(x, y, bad) for x, y, bad in points if math.isfinite(y) and y > 0]
    top = max([y for _, y, _ in finite] + [threshold or 0.0, 1e-6]) * 3
    bottom = max(min([y for _, y, _ in finite] + [top / 1e6]) / 3, 1e-12)
    for i, (lo, hi, label) in enumerate(bands):
        if i % 2 == 0:
            ax.axvspan(lo - 0.5, hi + 0.5, color="#eef", linewidth=0)
        ax.text((lo + hi) / 2, bottom * 1.3, label, fontsize=6, ha="center", va="bottom", rotation=90, color="#557")
    for bad, colour in ((False, PALETTE[0]), (True, PALETTE[3])):
        xs = [x for x, _, b in finite if b is bad]
        ys = [y for _, y, b in finite if b is bad]
        if xs:
            ax.scatter(xs, ys, s=9, color=colour, label="diverges" if bad else "within tolerance", zorder=3)
    broken = [x for x, y, _ in points if not math.isfinite(y)]
    if broken:
        ax.scatter(broken, np.full(len(broken), top / 1.5), marker="x", s=16, color=PALETTE[3],
                   label="NaN / inf", zorder=3)
    ax.set_yscale("log")
    ax.set_ylim(bottom, top)
    if threshold:
        ax.axhline(threshold, color="#c00", linewidth=0.8, linestyle="--", label=f"threshold {threshold:g}")
    if first is not None:
        ax.axvline(first[0], color="#c00", linewidth=1.0)
        ax.annotate(f"first divergent: {first[1]}", (first[0], top / 1.5), xytext=(4, -10),
                    textcoords="offset points", fontsize=7, color="#c00")
    if overflow is not None and (first is None or overflow[0] != first[0]):
        ax.axvline(overflow[0], color=PALETTE[1], linewidth=1.0, linestyle="-.")
        ax.annotate(f"first FP16 overflow: {overflow[1]}", (overflow[0], top / 6), xytext=(4, -10),
                    textcoords="offset points", fontsize=7, color=PALETTE[1])
    ax.set_xlabel("node (FP32 topological order)")
    ax.set_ylabel("norm_max_abs")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="lower right")
    return to_svg(fig, title)


def module_growth(rows: Sequence[tuple[str, float, bool]], threshold: float | None, title: str) -> str:
    """The output error of each module/layer in topological order (bars, log scale), the first
    divergent one in red: the per-layer table as a picture."""
    fig = _figure(9.0, 0.9 + 0.22 * max(len(rows), 1))
    ax: Axes = fig.add_subplot()
    names = [r[0] for r in rows]
    values = [r[1] if math.isfinite(r[1]) and r[1] > 0 else 0.0 for r in rows]
    positive = [v for v in values if v > 0]
    ceiling = max(positive + [threshold or 0.0, 1e-6]) * 10  # NaN/inf: past everything finite and the threshold
    floor = min(positive + [ceiling / 1e6]) / 10  # an exact 0: a stub at the left edge
    shown = [v if v > 0 else (ceiling if not math.isfinite(r[1]) else floor) for v, r in zip(values, rows)]
    colours = [PALETTE[3] if r[2] else PALETTE[0] for r in rows]
    ax.barh(names, shown, color=colours)
    for y, r in enumerate(rows):
        ax.text(shown[y], y, f" {r[1]:.3g}", va="center", fontsize=6)
    ax.set_xscale("log")
    if threshold:
        ax.axvline(threshold, color="#c00", linewidth=0.8, linestyle="--")
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=6)
    ax.set_xlabel("norm_max_abs of the module's output (red: holds the first divergent tensor)")
    ax.set_title(title)
    return to_svg(fig, title)
