"""Perf-budget repro bundles (``kind: perf``): a latency budget breach, measured again elsewhere.

A latency budget (``p50_ms`` ... ``mean_ms``: the ones ``test_latency`` measures) reads the
entry graph's timed call on one fixed batch. The bundle holds that file (or its path and
sha256), that batch (``data.npz`` ``input.<name>``), the runtime settings and threads, the
timing settings (samples, warmup), the budgets with the values measured and the recorded
latency summary, versions and environment. ``harness repro`` times the same call the same way
on this machine and judges the same budgets.

Timings are a property of the machine as much as of the artifact: a breach that does not
reproduce on a faster machine says nothing about the file, so the output always shows recorded
and measured numbers side by side with the environment differences, and says so. Budgets of
the other perf tests (cold start, memory and size; time to first token and per output token)
need a fresh process or a decode loop: their bundles say so in ``measure`` (``fresh_process``,
``decode``; absent: ``latency``) and are written and measured by ``perf_process.py``; this
module judges every measure's budgets the same way.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator, Mapping, Protocol, Sequence

import numpy as np

from harness.core import Precision, Variant
from harness.perf.budgets import BUDGETS, BudgetCheck, BudgetedCase, judged_variant, measured_values
from harness.perf.measure import HarnessEngine, latency_entry, timed_call
from harness.repro import perf_process
from harness.repro.bundle import (
    DATA,
    FORMAT,
    Bundle,
    BundleError,
    Outcome,
    bundle_artifact,
    check_artifact,
    here_vs_recorded,
    recorded_facts,
    resolve_artifact,
    runtime_from,
    runtime_json,
    sha256_file,
    verdict_line,
    write_manifest,
)
from harness.repro.perf_process import MEASURED_BY as BY
from harness.repro.perf_process import write_decode_bundle, write_fresh_process_bundle
from harness.results.checks import GateFailure
from harness.results.sections import Evidence
from harness.runners import parse_provider
from harness.runners.base import GraphRef
from harness.runners.prebuilt import open_onnx

if TYPE_CHECKING:  # pragma: no cover
    from harness.judge.workspace import Workspace
    from harness.perf.latency import Point
    from harness.perf.measure import PerfSettings


class BreachedCase(BudgetedCase, Protocol):
    """What a budget breach's bundle is written from: the suite case (``harness.case.collector.Case``,
    a layer above) as this module reads it, beyond what enforcing its budgets reads."""

    @property
    def workspace(self) -> Workspace: ...

    @property
    def perf(self) -> dict[str, Any]: ...

    @property
    def data(self) -> dict[str, Any]: ...

    def case_dir(self) -> Path: ...

#: the test whose budgets a bundle can re-measure (``MetricSpec.measured_by``)
MEASURED_BY = "test_latency"
NOTE = "timings depend on the machine: compare like with like (same CPU, load, threads) before blaming the file"


def latency_budgets(budgets: Mapping[str, float]) -> dict[str, float]:
    """The budgets of ``budgets`` that a perf bundle can re-measure (``test_latency``'s)."""
    return budgets_measured_by(budgets, MEASURED_BY)


def budgets_measured_by(budgets: Mapping[str, float], test: str) -> dict[str, float]:
    """The budgets of ``budgets`` that ``test`` measures (``MetricSpec.measured_by``)."""
    return {n: float(v) for n, v in budgets.items() if n in BUDGETS and BUDGETS[n].measured_by == test}


def write_perf_bundle(directory: Path, ws: "Workspace", variant: Variant, point: "Point", artifact: Path,
                      settings: "PerfSettings", budgets: Mapping[str, float], perf: Mapping[str, Any],
                      mode: str = "auto") -> Path | None:
    """Bundle a latency budget breach of ``point`` (the entry graph's ``latency_ms``)."""
    wanted = latency_budgets(budgets)
    if mode == "off" or not wanted or not artifact.is_file() or not artifact.name.endswith(".onnx"):
        return None
    model = ws.model(variant.model)
    measured = measured_values(perf)
    directory.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(directory / DATA, **{f"input.{k}": np.asarray(v)  # type: ignore[arg-type]
                                             for k, v in point.feeds.items()})
    art, copied = bundle_artifact(directory, artifact, mode)
    threads = ws.options.settings.threads
    entry = perf.get(point.key) or {}
    manifest = {
        "format": FORMAT, "kind": "perf", "case": variant.id, "model": variant.model, "graph": point.graph.name,
        "precision": variant.precision.value, "provider": variant.provider.short, "backend": variant.provider.backend,
        "threads": threads, "runtime": runtime_json(ws.runtime_for(variant, model)), "artifact": art,
        "inputs": sorted(point.feeds), "batch_size": point.batch_size, "seq_len": point.seq_len,
        "timing": {"samples": settings.samples, "warmup": settings.warmup, "engine": entry.get("engine"),
                   "key": point.key},
        "budget": wanted,
        "measured": {n: measured[n] for n in wanted if n in measured},
        "summary": entry.get("summary"),
        "verdict": {"passed": all(measured.get(n, 0.0) <= v for n, v in wanted.items()),
                    "failures": [{"budget": n, "value": measured[n], "limit": v} for n, v in wanted.items()
                                 if n in measured and measured[n] > v]},
        "note": NOTE,
        **recorded_facts(threads),
        "files": {DATA: sha256_file(directory / DATA), **copied},
    }
    return write_manifest(directory, manifest)


def validate(manifest_path: Path, m: Mapping[str, Any]) -> None:
    budget, measured = m["budget"], m["measured"]
    if not isinstance(budget, dict) or not budget or not all(isinstance(v, (int, float)) for v in budget.values()):
        raise BundleError(f"{manifest_path}: budget must map budget names to limits")
    if not isinstance(measured, dict):
        raise BundleError(f"{manifest_path}: measured must map budget names to values")
    verdict = m.get("verdict")
    if not isinstance(verdict, dict) or not isinstance(verdict.get("failures"), list) or not all(
            isinstance(f, dict) and "budget" in f for f in verdict["failures"]):
        raise BundleError(f"{manifest_path}: verdict.failures must list the breached budgets")
    measure = m.get("measure") or "latency"
    if measure != "latency":
        if measure not in perf_process.MEASURED_BY:
            raise BundleError(f"{manifest_path}: unknown measure {measure!r} (latency, "
                              f"{', '.join(perf_process.MEASURED_BY)})")
        perf_process.validate(manifest_path, m)
        return
    check_artifact(manifest_path, m.get("artifact"))
    for key in ("artifact", "inputs"):
        if key not in m:
            raise BundleError(f"{manifest_path}: missing keys {key}")
    timing = m.get("timing") or {}
    if not isinstance(timing.get("samples"), int) or timing["samples"] < 1:
        raise BundleError(f"{manifest_path}: timing.samples must be a positive integer")


def remeasure(bundle: Bundle, provider: str | None, threads: int | None) -> tuple[dict[str, float], dict[str, Any], str]:
    """Time the bundled call here as it was timed there: (budget values now, latency entry, artifact source)."""
    m = bundle.manifest
    path, source = resolve_artifact(bundle.directory, m["artifact"])
    prov = parse_provider(provider or m["provider"], option="--providers")
    workers = threads if threads is not None else m.get("threads")
    try:
        with np.load(bundle.directory / DATA, allow_pickle=False) as data:
            feeds = {n: data[f"input.{n}"] for n in m["inputs"]}
    except KeyError as exc:
        raise BundleError(f"{bundle.directory}: {DATA} has no array {exc.args[0]!r} that bundle.json names") from None
    runner = open_onnx(path, prov, workers, Precision(m["precision"]), runtime_from(m.get("runtime")))
    try:
        timing = m["timing"]
        samples = HarnessEngine()(timed_call(runner, feeds), int(timing["samples"]), int(timing.get("warmup") or 0))
    finally:
        runner.close()
    entry = latency_entry(samples, warmup=int(timing.get("warmup") or 0), engine="harness",
                          items_per_call=int(m.get("batch_size") or 1))
    return measured_values({"latency_ms": entry}), entry, source


def outcome(bundle: Bundle, provider: str | None, threads: int | None) -> Outcome:
    """``harness repro`` of a perf bundle: the budgets judged on a measurement made here, the
    same way as recorded (one timed call, fresh processes, or the decode loop)."""
    m = bundle.manifest
    if (m.get("measure") or "latency") == "latency":
        now, entry, source = remeasure(bundle, provider, threads)
        lines = [f"artifact: {source}",
                 f"timed: {m.get('graph')} batch {m.get('batch_size')} x sequence {m.get('seq_len')}, "
                 f"{m['timing']['samples']} samples after {m['timing'].get('warmup', 0)} warmup"]
        extra: dict[str, Any] = {"summary_now": entry["summary"], "artifact": source}
    else:
        now, lines, extra = perf_process.remeasure(bundle, provider, threads)
    lines.append(f"note: {NOTE}")
    recorded = [str(f["budget"]) for f in m["verdict"]["failures"]]
    failing = []
    for name, limit in m["budget"].items():
        value, then = now.get(name), m["measured"].get(name)
        if value is None:
            continue
        spec = BUDGETS[name]  # a verified manifest names known budgets only (harness.repro.verify)
        unit = spec.unit
        breached = not BudgetCheck(name, float(value), float(limit)).passed  # the suites' rule: NaN breaches
        failing += [name] if breached else []
        state = f"  {name}: now {value:.4g} {unit} vs budget {spec.symbol} {float(limit):g}: {'FAIL' if breached else 'pass'}"
        lines.append(f"{state} (recorded {float(then):.4g} {unit}; now/recorded {value / float(then):.2f}x)" if then
                     else f"{state} (not recorded)")
    reproduces = bool(recorded) and set(recorded) <= set(failing)
    versions, env = here_vs_recorded(m, threads if threads is not None else m.get("threads"))
    verdict = verdict_line(reproduces, recorded, failing, "budget breach(es)")
    if not reproduces and env:
        verdict += " (on a different machine: see environment differs)"
    data = {"recorded_breaches": recorded, "breaches_now": failing, "measured_now": now,
            "measured_recorded": m["measured"], "measure": m.get("measure") or "latency", **extra, "note": NOTE}
    return Outcome(lines, reproduces, verdict, data, versions, env)


@contextmanager
def on_breach(case: BreachedCase, write: Callable[[Path], Path | None]) -> Iterator[None]:
    """Around ``budgets.enforce``: a budget breach (``GateFailure``) calls ``write`` with the
    case's bundle directory (``cases/<id>/repro-perf``) and names the bundle in its record before
    the failure goes on. Best-effort evidence: the breach is the verdict either way."""
    try:
        yield
    except GateFailure:
        if case.workspace.options.settings.repro_bundles != "off":
            try:
                bundle = write(case.case_dir() / "repro-perf")
            except Exception:  # noqa: BLE001 - best-effort evidence: the budget failure stands either way
                bundle = None
            if bundle is not None:
                Evidence(repro_bundles={"perf": str(bundle)}).write(case.data)
        raise


def bundle_on_breach(case: BreachedCase, point: "Point", settings: "PerfSettings") -> ContextManager[None]:
    """``test_latency``: a latency budget breach writes the entry graph's timed call."""

    def write(directory: Path) -> Path | None:
        ws, variant = case.workspace, judged_variant(case)
        model = ws.model(variant.model)
        files = ws.backend(variant, model).artifacts(GraphRef(model, ws.family(model), point.graph, variant))
        onnx = [Path(str(i["path"])) for k, i in files.items() if k.startswith(f"{point.graph.name}/")
                and str(i.get("path", "")).endswith(".onnx")]
        return write_perf_bundle(directory, ws, variant, point, onnx[0], settings, model.spec.budgets, case.perf,
                                 ws.options.settings.repro_bundles) if len(onnx) == 1 else None

    return on_breach(case, write)


def cold_start_on_breach(case: BreachedCase, child_args: Sequence[str], settings: "PerfSettings") -> ContextManager[None]:
    """``test_cold_start_memory``: a cold-start, memory or size budget breach writes the fresh
    processes' load spec, files and feeds (``perf_process.write_fresh_process_bundle``)."""
    def write(directory: Path) -> Path | None:
        ws = case.workspace
        wanted = budgets_measured_by(case.model.spec.budgets, BY["fresh_process"])
        return write_fresh_process_bundle(directory, judged_variant(case), child_args, settings.repeats, wanted, case.perf,
                                          ws.options.settings.threads, ws.options.settings.repro_bundles) if wanted else None

    return on_breach(case, write)


def generation_on_breach(case: BreachedCase, settings: "PerfSettings") -> ContextManager[None]:
    """``test_generation_perf``: a ttft / tpot budget breach writes the graphs, tokenizer and prompt
    the decode loop timed (``perf_process.write_decode_bundle``)."""
    def write(directory: Path) -> Path | None:
        ws, model = case.workspace, case.model
        wanted = budgets_measured_by(model.spec.budgets, BY["decode"])
        return write_decode_bundle(directory, ws, judged_variant(case), model, ws.family(model), settings, wanted, case.perf,
                                   ws.options.settings.repro_bundles) if wanted else None

    return on_breach(case, write)
