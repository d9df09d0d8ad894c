"""``harness check --perf``: the files a team ships, timed like the harness's own exports.

The same machinery as the perf suites (``harness.perf``): the latency plan (entry graph at each
batch size x sequence length, every other graph on the family's feeds), per-call samples and
their distribution, cold start and peak memory in fresh processes, and for generative layouts
TTFT / TPOT / tokens/s with and without the KV cache. Only the source of the graphs differs:
each judged file, seen through the reference graph's names (``MappedRunner``), is timed on its
deployed call (``session.run`` on feeds already in the file's names and dtypes); the fresh
children open the files themselves through the provider's backend's ``child_load`` (ONNX Runtime or
OpenVINO).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from harness.perf import coldstart, generation, latency, memory
from harness.perf.measure import HarnessEngine, PerfSettings
from harness.runners import backends

if TYPE_CHECKING:  # pragma: no cover
    from harness.check.judge import JobResult
    from harness.core import Variant
    from harness.families import Family
    from harness.judge.workspace import Workspace
    from harness.runners.prebuilt import MappedRunner
    from harness.zoo.loading import LoadedModel


def graph_runners(jobs: "list[JobResult]") -> "dict[str, MappedRunner]":
    """One runner per reference graph: the first job that judged it without an error."""
    out: dict[str, MappedRunner] = {}
    for job in jobs:
        if job.runner is not None and not job.error:
            out.setdefault(job.job.graph.name, job.runner)
    return out


def measure_prebuilt(ws: "Workspace", variant: "Variant", model: "LoadedModel", family: "Family",
                     jobs: "list[JobResult]", settings: PerfSettings, side_dir: Path,
                     generation_runners: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The perf fields of a check (as a perf-suite record holds them) and notes on what was left out."""
    runners = graph_runners(jobs)
    notes: list[str] = []
    points, skipped = latency.plan(model, family, ws.texts(model), settings)
    missing = sorted({p.graph.name for p in points} - set(runners))
    if missing:
        notes.append(f"not timed (no judged file provides them): {', '.join(missing)}")
    points = [p for p in points if p.graph.name in runners]
    if not points:
        return {}, notes + ["no graph to time"]
    if points[0].key != "latency_ms":  # the entry graph is missing: the first timed graph is the headline
        points[0] = latency.Point("latency_ms", points[0].graph, points[0].feeds, points[0].batch_size,
                                  points[0].seq_len)
    perf: dict[str, Any] = dict(latency.measure(dict(runners), points, settings, HarnessEngine()))
    perf["throughput"] = perf["latency_ms"]["throughput"]
    runs, args = _fresh(ws, variant, runners, points, settings, side_dir)
    perf.update(coldstart.cold_start_fields(runs))
    perf.update(memory.memory_fields(runs, memory.floors(variant.backend)))
    records = ws.runtimes.prebuilt.records if ws.runtimes.prebuilt else {}
    files = {name: int(info["bytes"]) for name, info in records.items() if isinstance(info, Mapping) and "bytes" in info}
    perf.update(artifact_bytes=sum(files.values()), artifact_files=files)
    if generation_runners:
        perf.update(generation.measure_generation(model, family, dict(generation_runners), ws.texts(model), settings))
    elif family.generates:
        notes.append("generation perf skipped: the files cannot decode with and without a KV cache")
    perf["settings"] = {**settings.as_dict(), "skipped_buckets": skipped, "child": args,
                        "runtime": ws.runtime_for(variant, model).as_dict(variant.provider.short)}
    return perf, notes


def _fresh(ws: "Workspace", variant: "Variant", runners: "Mapping[str, MappedRunner]",
           points: list[latency.Point], settings: PerfSettings, side_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Cold start and memory: fresh children open each file with the loader of the variant's
    backend and run it on feeds already in the file's own names."""
    feeds = {graph: runners[graph].artifact_feeds(f) for graph, f in latency.feeds_by_graph(points).items()}
    path = coldstart.write_feeds(side_dir / "perf-feeds.npz", feeds)
    backend = backends()[variant.provider.backend]  # ov_cpu's children compile with OpenVINO, not ORT's CPU EP
    spec = backend.file_child_spec({graph: str(runner.path or "") for graph, runner in runners.items()}, variant,
                                   ws.runtime_for(variant))
    args = ["--loader", backend.loader_ref(), "--spec", json.dumps(spec.to_dict(), sort_keys=True), "--feeds", str(path),
            "--calls", "5"]
    return coldstart.fresh_runs(args, settings.repeats), args


def describe(perf: Mapping[str, Any]) -> list[str]:
    """Lines for the terminal: latency percentiles (with n and confidence) and cold start; for a
    served model, its load sweep."""
    if "serving" in perf:
        return describe_sweep(perf)
    if "serving_rate" in perf:
        return describe_rates(perf)
    if "generation_serving" in perf:
        return [f"concurrency {lv['concurrency']:>2}: TTFT p50 {_ms(lv['ttft_ms_p50'])}  TPOT p50 {_ms(lv['tpot_ms_p50'])}"
                f"  {lv['tokens_per_s']:.1f} tokens/s  {lv['requests']} requests, {lv['errors']} errors"
                for lv in perf["generation_serving"]["levels"]]
    lines = []
    for key, entry in perf.items():
        if key.startswith("latency_ms") and isinstance(entry, Mapping):
            s = entry["summary"]
            low = [k for k, v in (s.get("low_confidence") or {}).items() if v]
            flag = f" (low confidence: {', '.join(low)})" if low else ""
            lines.append(f"{key}: p50 {s['p50']:.3f} ms  p90 {s['p90']:.3f}  p95 {s['p95']:.3f}  p99 {s['p99']:.3f}  "
                         f"n={s['n']}{flag}")
    cold = perf.get("cold_start_ms")
    if isinstance(cold, Mapping):
        lines.append(f"cold start: load {cold['load']:.1f} ms, first inference {cold['first_inference']:.1f} ms, "
                     f"process {cold['process']:.0f} ms (median of {len(perf.get('cold_start_runs', []))} processes)")
    if perf.get("peak_rss_bytes"):
        model_rss = (perf.get("memory") or {}).get("model_rss_bytes")
        extra = f" ({model_rss / 2**20:.0f} MiB above the runtime's import floor)" if model_rss else ""
        lines.append(f"peak RSS {perf['peak_rss_bytes'] / 2**20:.0f} MiB{extra}")
    gen = perf.get("generation")
    if isinstance(gen, Mapping) and isinstance(gen.get("kv=on"), Mapping):
        on, off = gen["kv=on"], gen.get("kv=off") or {}
        lines.append(f"generation: TTFT {on['ttft_ms_p50']:.2f} ms, TPOT {on['tpot_ms_p50']:.2f} ms, "
                     f"{on['tokens_per_s']:.1f} tok/s (no cache {off.get('tokens_per_s', float('nan')):.1f} tok/s)")
    return lines


def describe_sweep(perf: Mapping[str, Any]) -> list[str]:
    """A served model's load sweep (``perf.serving``, written by ``harness.serving.sweep``):
    one terminal line per concurrency step."""
    lines = []
    for s in (perf.get("serving") or {}).get("steps", []):
        p50 = "n/a" if s["p50"] is None else f"{s['p50']:.2f}"
        p90 = "n/a" if s["p90"] is None else f"{s['p90']:.2f}"
        p99 = "n/a" if s["p99"] is None else f"{s['p99']:.2f}"
        server = s.get("server") or {}
        extra = (f"  server queue {server['queue_ms']:.2f} ms compute {server['compute_infer_ms']:.2f} ms"
                 if server.get("queue_ms") is not None and server.get("compute_infer_ms") is not None else "")
        lines.append(f"concurrency {s['concurrency']:>2}: p50 {p50} ms  p90 {p90}  p99 {p99}  "
                     f"{s['throughput']:.1f}/s  {s['requests']} requests, {s['errors']} errors"
                     f"{'' if s['stable'] else ' (not stable)'}{extra}")
    return lines


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} ms"


def describe_rates(perf: Mapping[str, Any]) -> list[str]:
    """A served model's request-rate sweep (``perf.serving_rate``, ``harness.serving.rate``):
    one line per offered rate, then the sustainable rate at the p99 budget."""
    summary = perf["serving_rate"]
    budget = summary.get("p99_budget_ms")
    lines = []
    for lv in summary.get("levels", []):
        pct = "  ".join(f"{p} {'n/a' if lv[p] is None else format(lv[p], '.2f')}" for p in ("p50", "p90", "p99"))
        verdict = "" if lv.get("meets_budget") is None else ("  meets budget" if lv["meets_budget"] else "  over budget")
        lines.append(f"rate {lv['rate']:>7g}/s ({summary['arrival']}): {pct} ms  {lv['achieved']:.1f} answers/s  "
                     f"{lv['sent']} sent, {lv['errors']} errors ({lv['timeouts']} timeouts), {lv['late']} late, "
                     f"{lv['backlog']} never sent{'' if lv['stable'] else ' (p99 not stable)'}{verdict}")
    if budget is not None:
        best = summary.get("sustainable_rate")
        lines.append(f"sustainable rate at p99 <= {budget:g} ms: "
                     + (f"{best:g} requests/s" if best is not None else "none of the offered rates"))
    return lines


__all__ = ["describe", "describe_rates", "describe_sweep", "graph_runners", "measure_prebuilt", "np"]
