"""Matplotlib figures as inline SVG: the report stays one offline file (no CDN, no script).

The Agg backend is forced (no display on CI machines); text stays text in the SVG
(``svg.fonttype = none``: smaller, searchable) and matplotlib escapes it, so a model name
cannot inject markup. Fixed ``svg.hashsalt`` and no date metadata: the same data gives the
same bytes, which keeps reports diffable.
"""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

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
    """The figure as an ``<svg>`` element (no XML prolog) with an accessible label."""
    import html

    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "harness", "font.size": 9}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = buffer.getvalue()
    start = svg.find("<svg")
    return (f'<figure class="plot" aria-label="{html.escape(label)}">'
            f"{svg[start:]}</figure>")


def latency_cdf(series: Mapping[str, Sequence[float]], title: str) -> str:
    """Empirical CDF per variant with p50 and p99 marked: the shape (a tail, two modes) that a
    percentile table hides."""
    import numpy as np

    fig = _figure(7.0, 3.2)
    ax: Axes = fig.add_subplot()
    for i, (name, samples) in enumerate(list(series.items())[:MAX_SERIES]):
        values = np.sort(np.asarray([s for s in samples if math.isfinite(s)], dtype=float))
        if values.size == 0:
            continue
        colour = PALETTE[i % len(PALETTE)]
        ax.step(values, np.arange(1, values.size + 1) / values.size, where="post", color=colour, label=name)
        for q, marker in ((50, "o"), (99, "^")):
            x = float(np.percentile(values, q))
            ax.plot([x], [q / 100], marker=marker, color=colour, markersize=5)
    everything = [s for samples in series.values() for s in samples if math.isfinite(s) and s > 0]
    if everything and max(everything) > 20 * float(np.median(everything)):
        ax.set_xscale("log")  # a tail of preempted calls would squeeze the body of the distribution
    ax.axhline(0.5, color="#999", linewidth=0.6, linestyle=":")
    ax.axhline(0.99, color="#999", linewidth=0.6, linestyle=":")
    ax.set_xlabel("latency per call (ms)   ● p50   ▲ p99")
    ax.set_ylabel("fraction of calls")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="lower right")
    return to_svg(fig, title)


def bars(values: Mapping[str, Sequence[float]], parts: Sequence[str], title: str, unit: str) -> str:
    """Horizontal (stacked when several ``parts``) bars per variant: cold start, memory, tokens/s."""
    fig = _figure(7.0, 0.9 + 0.28 * max(len(values), 1))
    ax: Axes = fig.add_subplot()
    names = list(values)
    left = [0.0] * len(names)
    for j, part in enumerate(parts):
        widths = [values[n][j] if j < len(values[n]) else 0.0 for n in names]
        ax.barh(names, widths, left=left, color=PALETTE[j % len(PALETTE)], label=part)
        left = [a + b for a, b in zip(left, widths)]
    for y, total in enumerate(left):
        ax.text(total, y, f" {total:.4g}", va="center", fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.set_title(title)
    if len(parts) > 1:  # outside the axes: inside, it would cover the longest bar's end
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return to_svg(fig, title)


def trend(series: Mapping[str, Sequence[tuple[str, float]]], title: str, band: Mapping[str, tuple[float, float]]) -> str:
    """One line per variant over runs (oldest left), with the baseline band (the window's median
    ± 3 scaled MADs of the earlier runs) shaded: a point outside its band is a real move."""
    fig = _figure(7.0, 2.8)
    ax: Axes = fig.add_subplot()
    for i, (name, points) in enumerate(list(series.items())[:MAX_SERIES]):
        colour = PALETTE[i % len(PALETTE)]
        xs = list(range(len(points)))
        ax.plot(xs, [v for _, v in points], marker="o", markersize=3, color=colour, label=name)
        if name in band:
            lo, hi = band[name]
            ax.fill_between([0, max(len(points) - 1, 1)], lo, hi, color=colour, alpha=0.12, linewidth=0)
    runs = max((len(p) for p in series.values()), default=0)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.ticklabel_format(axis="y", useOffset=False)
    ax.set_xlabel(f"run (oldest → newest, {runs} runs)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="best")
    return to_svg(fig, title)


# --- issue 14: `harness bisect` error along the graph (harness/debug/report.py) ---
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
