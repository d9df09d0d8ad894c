"""The performance section: latency distributions (CDF per variant, p50/p99 marked) from the raw
samples every latency record keeps, cold start and memory bars, and throughput (tokens/s of the
generation cases, calls/s of the latency cases). Absent when the run measured none of these.
Markup: ``templates/perf.html.j2``; the figures are matplotlib's SVG (``plots``)."""

from __future__ import annotations

import math
from typing import Any, Mapping

from harness.report.html import plots
from harness.report.html.templating import markup, render
from harness.report.tables import perf_numbers
from harness.results import Record
from harness.results.sections import Generation, PerfHeadlines, ServedLoad

MiB = float(2 ** 20)
#: at most this many latency keys get their own CDF (bs/seq buckets beyond are in the table)
MAX_CDFS = 4


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


def _throughput(records: list[Record]) -> dict[str, dict[str, list[float]]]:
    """``{unit: {bar label: [value]}}``: tokens/s and calls/s never share an axis (torch's 4-15
    tokens/s vanished beside ORT's ~900 calls/s on one "per second" axis)."""
    out: dict[str, dict[str, list[float]]] = {}
    for r in records:
        name = r.variant or r.id
        for key, value in perf_numbers(r.perf).items():
            if key.endswith(("tokens_per_s", "throughput")):
                unit = "tokens/s" if key.endswith("tokens_per_s") else "calls/s"
                out.setdefault(unit, {})[f"{name} {key}"] = [value]
        for key, value in r.perf.items():  # a latency measurement's throughput sits beside its summary
            rate = _number(value.get("throughput")) if isinstance(value, Mapping) else None
            if rate is not None and f"{key}.throughput" not in perf_numbers(r.perf):
                unit = "calls/s" if value.get("items_per_call", 1) in (1, None) else "items/s"
                out.setdefault(unit, {})[f"{name} {key}"] = [rate]
        tokens = Generation.of(r).tokens_per_s
        if tokens is not None:
            out.setdefault("tokens/s", {})[f"{name} decode"] = [tokens]
    return out


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


def render_perf(records: list[Record]) -> str:
    perf = [r for r in records if r.perf]
    throughput = _throughput(records)
    if not perf and not throughput:
        return ""
    series = _latency_series(perf)
    cdfs = [plots.load_curve(curves, budget, title) for title, curves, budget in _load_curves(perf)]
    cdfs += [plots.latency_cdf(series[key], f"latency distribution: {key}")
             for key in sorted(series, key=lambda k: (k != "latency_ms", k))[:MAX_CDFS]]
    cold = {}
    memory = {}
    for r in perf:
        name = r.variant or r.id
        headlines = PerfHeadlines.of(r)
        load, first = headlines.cold_load_ms, headlines.cold_first_inference_ms
        if load is not None and first is not None:
            cold[name] = [load, first]
        peak = headlines.peak_rss_bytes
        if peak is not None:
            memory[name] = [peak / MiB]
    bars = []
    if cold:
        bars.append(plots.bars(cold, ["load", "first inference"], "cold start (fresh process)", "ms"))
    if memory:
        bars.append(plots.bars(memory, ["peak RSS"], "peak memory (fresh process)", "MiB"))
    for unit, values in sorted(throughput.items()):
        bars.append(plots.bars(values, ["throughput"], f"throughput ({unit})", unit))
    return render("perf.html.j2", cdfs=[markup(f) for f in cdfs], latency=_latency_rows(perf),
                  bars=[markup(f) for f in bars])
