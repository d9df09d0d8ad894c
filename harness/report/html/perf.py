"""The performance section: per model, one table of its variants (``harness.report.perf_table``:
p50, p99 with its interval, throughput, peak RSS, size, cold start, the speedup against PyTorch
FP32 and the change against the baseline; regressions first, then the fastest), one small chart
of those variants beside it, and, folded under it, every latency measurement's percentiles and
the model's latency distributions (CDF per variant, p50/p99 marked, from the raw samples each
latency record keeps). Served load sweeps follow. Absent when the run measured no performance.
Markup: ``templates/perf.html.j2``; the figures are matplotlib's SVG (``plots``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from harness.report.html import plots
from harness.report.html.templating import markup, render
from harness.report.perf_table import COLUMNS, ModelPerf, VariantPerf, model_tables, shown_columns
from harness.results import Record
from harness.results.sections import ServedLoad


def _latency_series(records: list[Record]) -> dict[str, dict[str, list[float]]]:
    """``{perf key: {variant: samples}}`` for every latency measurement with raw samples."""
    out: dict[str, dict[str, list[float]]] = {}
    for r in records:
        for key, value in r.perf.items():
            if not str(key).startswith("latency_ms"):  # the canary's samples are the machine's, not a metric
                continue
            if isinstance(value, Mapping) and isinstance(value.get("samples"), list) and value["samples"]:
                samples = [float(s) for s in value["samples"] if isinstance(s, (int, float)) and not isinstance(s, bool)]
                if samples:
                    out.setdefault(key, {})[r.variant or r.id] = samples
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _latency_rows(records: list[Record]) -> list[tuple[str, str, list[str]]]:
    """(variant, measurement, [n, p50, p90, p99, mean, cv]) of every latency summary."""
    rows = []
    for r in records:
        for key, value in r.perf.items():
            summary = value.get("summary") if isinstance(value, Mapping) else None
            if isinstance(summary, Mapping):
                cells = [_fmt(summary.get(s)) for s in ("n", "p50", "p90", "p99", "mean", "cv")]
                rows.append((r.variant or r.id, str(key), cells))
    return rows


def _fmt(value: Any) -> str:
    number = _number(value)
    return "" if number is None else f"{number:.4g}"


@dataclass(frozen=True)
class ModelBlock:
    """What the template shows of one model: its table, its chart, its folded details."""

    name: str
    headers: tuple[str, ...]
    rows: tuple[tuple[VariantPerf, tuple[str, ...]], ...]
    chart: Any
    reference: str | None
    latency: list[tuple[str, str, list[str]]]
    cdfs: list[Any]


def _block(table: ModelPerf, records: list[Record]) -> ModelBlock:
    shown = shown_columns(table)
    rows = tuple((row, tuple(row.cells()[i] for i in shown)) for row in table.rows)
    bars = [plots.VariantBar(row.variant, row.latency.p50_ms, row.latency.p99_ms, row.latency.p99_interval,
                             (row.fresh.cold_load_ms, row.fresh.cold_first_inference_ms)
                             if row.fresh.cold_load_ms is not None and row.fresh.cold_first_inference_ms is not None
                             else None) for row in table.rows]
    chart = plots.model_chart(bars, f"{table.model}: {len(bars)} variant{'s' * (len(bars) != 1)}")
    own = [r for r in records if (r.variant or r.id) in {row.variant for row in table.rows}]
    series = _latency_series(own)
    cdfs = [markup(plots.latency_cdf(series[key], f"latency distribution: {table.model} {key}"))
            for key in sorted(series, key=lambda k: (k != "latency_ms", k))]
    return ModelBlock(table.model, tuple(COLUMNS[i] for i in shown), rows, markup(chart), table.reference,
                      _latency_rows(own), cdfs)


def _load_curves(records: list[Record]) -> list[tuple[str, dict[str, list[plots.LoadPoint]], float | None]]:
    """(title, {variant: points}, p99 budget) of every served load sweep: request-rate levels
    (``perf.serving_rate``) and concurrency steps (``perf.serving``), one figure each kind."""
    rates: dict[str, list[plots.LoadPoint]] = {}
    steps: dict[str, list[plots.LoadPoint]] = {}
    budgets: set[float] = set()
    for r in records:
        name = r.variant or r.id
        load = ServedLoad.of(r)
        summary = load.rate
        if summary is not None:
            if _number(summary.get("p99_budget_ms")) is not None:
                budgets.add(float(summary["p99_budget_ms"]))
            rates[name] = [plots.LoadPoint(f"{lv['rate']:g}/s", float(lv["achieved"]), float(lv["p50"]),
                                           float(lv["p99"]), lv.get("meets_budget"))
                           for lv in summary.get("levels", []) if lv.get("p50") is not None]
        serving = load.steps
        if serving is not None:
            steps[name] = [plots.LoadPoint(f"c={s['concurrency']}", float(s["throughput"]), float(s["p50"]),
                                           float(s["p99"])) for s in serving.get("steps", []) if s.get("p50") is not None]
    out = []
    if any(rates.values()):
        arrival = {str(rate.get("arrival")) for r in records if (rate := ServedLoad.of(r).rate) is not None}
        out.append((f"served latency vs throughput: offered request rates ({', '.join(sorted(arrival))} arrivals)",
                    {k: v for k, v in rates.items() if v}, min(budgets) if len(budgets) == 1 else None))
    if any(steps.values()):
        out.append(("served latency vs throughput: concurrency levels", {k: v for k, v in steps.items() if v}, None))
    return out


def render_perf(records: list[Record], run_dir: Path | None = None) -> str:
    """The section's markup ('' when the run measured no performance); ``run_dir``: where the
    baseline gate's ``perf-compare.json`` is read from, for the change against the baseline."""
    tables = model_tables(records, run_dir)
    curves = [plots.load_curve(c, budget, title) for title, c, budget in _load_curves([r for r in records if r.perf])]
    if not tables and not curves:
        return ""
    return render("perf.html.j2", models=[_block(t, records) for t in tables], curves=[markup(c) for c in curves])
