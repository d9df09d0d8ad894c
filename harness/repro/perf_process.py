"""Perf bundles of the budgets a fresh process or a decode loop measures (``kind: perf``, ``measure``).

``perf.py`` re-times one call (``test_latency``'s budgets). The other budgets need more than a
call, and each bundle carries what its measurement needs, so ``harness repro`` measures again
*the same way*:

* ``measure: fresh_process`` (``test_cold_start_memory``: ``load_ms``, ``first_inference_ms``,
  ``cold_start_ms``, ``peak_rss_mb``, ``artifact_mb``): the backend class the child imports
  (``loader``), its load spec (``Backend.child_spec``: what to load, threads, runtime settings),
  every graph's ONNX file (``artifact/<graph>/``), the child's feeds (``data.npz``, ``GRAPH::INPUT``
  keys, the file the child read), the steady calls and the number of processes. Repro spawns the
  same child script (``harness/perf/child.py``) that many times with the spec pointing at the
  bundled files; ``artifact_mb`` is the bundled files' size on disk. A backend whose load spec is
  not ``graphs: {graph: ONNX path}`` (PyTorch weights, a native engine) writes no bundle.
* ``measure: decode`` (``test_generation_perf``: ``ttft_ms``, ``tpot_ms``): every graph of the
  family, the tokenizer and configs (``tokenizer/``), the prompt as token ids (``data.npz``
  ``input_ids`` / ``attention_mask``) and its texts, new tokens and repeats. Repro builds the
  family's stepper over fresh sessions of the bundled graphs and runs the same timed greedy loop
  (``harness.perf.generation.generation_fields``).
"""

from __future__ import annotations

import json
import shutil
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.core import Precision, UsageError, Variant
from harness.families import family_for
from harness.generation.decode import torch_threads
from harness.perf import child
from harness.perf.budgets import measured_values
from harness.perf.coldstart import ChildError, cold_start_fields, fresh_runs, spawn
from harness.perf.generation import generation_fields, generation_prompt, repeats_for
from harness.perf.memory import memory_fields
from harness.repro.bundle import (
    DATA,
    FORMAT,
    Bundle,
    BundleError,
    _artifact_files,
    bundle_graphs,
    check_artifact,
    onnx_file,
    recorded_facts,
    runtime_from,
    runtime_json,
    sha256_file,
    write_manifest,
)
from harness.repro.generation import TOKENIZER, bundle_tokenizer, bundled_model
from harness.runners import parse_provider
from harness.runners.base import GraphRef
from harness.runners.prebuilt import open_onnx

if TYPE_CHECKING:  # pragma: no cover
    from harness.families import Family
    from harness.judge.workspace import Workspace
    from harness.perf.measure import PerfSettings
    from harness.zoo.loading import LoadedModel

#: the test whose budgets each measure re-measures (``MetricSpec.measured_by``)
MEASURED_BY = {"fresh_process": "test_cold_start_memory", "decode": "test_generation_perf"}
MiB = float(2 ** 20)


def _common(variant: Variant, budgets: Mapping[str, float], measured: Mapping[str, float]) -> dict[str, Any]:
    return {"format": FORMAT, "kind": "perf", "case": variant.id, "model": variant.model,
            "precision": variant.precision.value, "provider": variant.provider.short,
            "backend": variant.provider.backend, "budget": dict(budgets),
            "measured": {n: measured[n] for n in budgets if n in measured},
            "verdict": {"passed": all(measured.get(n, 0.0) <= v for n, v in budgets.items()),
                        "failures": [{"budget": n, "value": measured[n], "limit": v} for n, v in budgets.items()
                                     if n in measured and measured[n] > v]}}


def _graph_files(spec: Mapping[str, Any]) -> dict[str, Path] | None:
    """The ONNX file of each graph a load spec names, when it names them as ``graphs: {graph: path}``."""
    graphs = spec.get("graphs")
    if not isinstance(graphs, dict) or not graphs:
        return None
    out = {str(g): Path(p) for g, p in graphs.items() if isinstance(p, str) and p.endswith(".onnx")}
    return out if len(out) == len(graphs) and all(p.is_file() for p in out.values()) else None


# -- fresh process ------------------------------------------------------------------------------------------
def write_fresh_process_bundle(directory: Path, variant: Variant, child_args: Sequence[str], repeats: int,
                               budgets: Mapping[str, float], perf: Mapping[str, Any], threads: int | None,
                               mode: str = "auto") -> Path | None:
    """Bundle a cold-start / memory / size budget breach of ``test_cold_start_memory``; None when
    the child's load spec does not name ONNX files (nothing portable to bundle)."""
    args = child.parser().parse_args(list(child_args))
    spec = json.loads(args.spec)
    files = _graph_files(spec)
    if mode == "off" or files is None or not Path(args.feeds).is_file():
        return None
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.feeds, directory / DATA)
    artifacts, checksums = bundle_graphs(directory, files, mode)
    memory = perf.get("memory") or {}
    manifest = {
        **_common(variant, budgets, measured_values(perf)), "measure": "fresh_process", "threads": threads,
        "loader": args.loader, "spec": spec, "artifacts": artifacts, "calls": int(args.calls),
        "repeats": int(repeats),
        "recorded": {"cold_start_ms": perf.get("cold_start_ms"), "peak_rss_bytes": perf.get("peak_rss_bytes"),
                     "baseline_rss_bytes": perf.get("baseline_rss_bytes"),
                     "imports_rss_bytes": perf.get("imports_rss_bytes"),
                     "model_rss_bytes": memory.get("model_rss_bytes"), "artifact_bytes": perf.get("artifact_bytes"),
                     "artifact_files": perf.get("artifact_files")},
        **recorded_facts(threads),
        "files": {DATA: sha256_file(directory / DATA), **checksums},
    }
    return write_manifest(directory, manifest)


def _remeasure_fresh(bundle: Bundle, provider: str | None, threads: int | None
                     ) -> tuple[dict[str, float], list[str], dict[str, Any]]:
    m = bundle.manifest
    if provider is not None and provider != m["provider"]:
        raise UsageError(f"--providers: a fresh-process bundle is measured on its recorded provider {m['provider']} "
                         "(its load spec was derived for it); the case's rerun command measures another")
    if threads is not None:
        raise UsageError("--threads: a fresh-process bundle replays its recorded load spec, threads included")
    files, sources = bundle.graph_artifacts()
    spec = {**m["spec"], "graphs": {g: str(p) for g, p in files.items()}}
    args = ["--loader", str(m["loader"]), "--spec", json.dumps(spec, sort_keys=True),
            "--feeds", str(bundle.directory / DATA), "--calls", str(int(m["calls"]))]
    perf: dict[str, Any] = {"artifact_bytes": sum(f.stat().st_size for p in files.values() for f in _artifact_files(p))}
    lines = ["artifacts: " + ", ".join(f"{g}: {s}" for g, s in sources.items())]
    rec = m.get("recorded") or {}
    if any(n != "artifact_mb" for n in m["budget"]):
        try:
            runs = fresh_runs(args, int(m["repeats"]))
            perf.update(cold_start_fields(runs))
            floors = None
            if "peak_rss_mb" in m["budget"]:
                floors = {"baseline_rss_bytes": int(spawn(["--mode", "empty"])["peak_rss_bytes"]),
                          "imports_rss_bytes": int(spawn(["--mode", "imports", "--loader",
                                                          str(m["loader"])])["peak_rss_bytes"])}
                perf.update(memory_fields(runs, floors))
        except ChildError as exc:
            raise BundleError(f"{bundle.directory}: {exc}") from None
        lines.append(f"measured: {len(runs)} fresh process(es) importing {m['loader']}, loading "
                     f"{', '.join(files)} and running {1 + int(m['calls'])} call(s) each; medians")
        cold, was = perf["cold_start_ms"], rec.get("cold_start_ms") or {}
        lines.append("cold start now: " + ", ".join(
            f"{k} {cold[k]:.4g} ms" + (f" (recorded {float(was[k]):.4g})" if was.get(k) is not None else "")
            for k in ("import", "load", "first_inference")))
        if floors is not None:
            lines.append(_floors_line(perf, rec))
    files_now = {f.name: f.stat().st_size for p in files.values() for f in _artifact_files(p)}
    lines.append("artifact files now: " + ", ".join(f"{n} {b / MiB:.4g} MiB" for n, b in files_now.items())
                 + (f" (recorded: {', '.join(f'{n} {b / MiB:.4g} MiB' for n, b in rec['artifact_files'].items())})"
                    if rec.get("artifact_files") else ""))
    return measured_values(perf), lines, {"perf_now": perf, "artifacts": sources}


def _floors_line(perf: Mapping[str, Any], rec: Mapping[str, Any]) -> str:
    def mib(value: Any) -> str:
        return f"{float(value) / MiB:.1f}" if value is not None else "?"

    model = (perf.get("memory") or {}).get("model_rss_bytes")
    return (f"memory floors now: empty interpreter {mib(perf.get('baseline_rss_bytes'))} MiB, backend imported "
            f"{mib(perf.get('imports_rss_bytes'))} MiB, the model itself {mib(model)} MiB "
            f"(recorded {mib(rec.get('baseline_rss_bytes'))}, {mib(rec.get('imports_rss_bytes'))}, "
            f"{mib(rec.get('model_rss_bytes'))} MiB)")


# -- decode loop --------------------------------------------------------------------------------------------
def write_decode_bundle(directory: Path, ws: "Workspace", variant: Variant, model: "LoadedModel",
                        family: "Family", settings: "PerfSettings", budgets: Mapping[str, float],
                        perf: Mapping[str, Any], mode: str = "auto") -> Path | None:
    """Bundle a ttft / tpot budget breach of ``test_generation_perf``; None when a graph is not
    one ONNX file (PyTorch, a native engine)."""
    backend = ws.backend(variant, model)
    files: dict[str, Path] = {}
    for graph in family.graphs(model):
        path = onnx_file(backend.artifacts(GraphRef(model, family, graph, variant)), graph.name)
        if path is None:
            return None
        files[graph.name] = path
    if mode == "off" or not files:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    prompts, ids, mask = generation_prompt(model, ws.texts(model), settings)
    np.savez_compressed(directory / DATA, input_ids=ids, attention_mask=mask)
    checksums = bundle_tokenizer(model, directory)
    artifacts, copied = bundle_graphs(directory, files, mode)
    threads = ws.options.settings.threads
    manifest = {
        **_common(variant, budgets, measured_values(perf)), "measure": "decode", "family": model.family,
        "threads": threads, "runtime": runtime_json(ws.runtime_for(variant, model)), "artifacts": artifacts,
        "prompts": prompts, "new_tokens": settings.new_tokens, "repeats": repeats_for(settings), "warmup": 1,
        "tokenizer": {"dir": TOKENIZER, "class": type(model.tokenizer).__name__,
                      "outputs": "data.npz input_ids / attention_mask (the prompt batch)"},
        "recorded": {"generation": perf.get("generation"),
                     **{k: (v or {}).get("summary") for k, v in perf.items() if k.startswith("latency_ms[gen=")}},
        "model_sha256": model.weights_sha256,
        **recorded_facts(threads),
        "files": {DATA: sha256_file(directory / DATA), **checksums, **copied},
    }
    return write_manifest(directory, manifest)


def _remeasure_decode(bundle: Bundle, provider: str | None, threads: int | None
                      ) -> tuple[dict[str, float], list[str], dict[str, Any]]:
    m = bundle.manifest
    files, sources = bundle.graph_artifacts()
    prov = parse_provider(provider or m["provider"], option="--providers")
    workers = threads if threads is not None else m.get("threads")
    model = bundled_model(bundle)
    family = family_for(str(m["family"]))
    with np.load(bundle.directory / DATA, allow_pickle=False) as data:
        ids, mask = data["input_ids"], data["attention_mask"]
    same_ids = [np.array_equal(a, b) for a, b in zip(family.prompt_batch(model, list(m["prompts"])), (ids, mask))]
    runtime = runtime_from(m.get("runtime"))
    with ExitStack() as stack:
        stack.enter_context(torch_threads(workers or 1))
        runners = {}
        for graph, path in files.items():
            runners[graph] = open_onnx(path, prov, workers, Precision(m["precision"]), runtime)
            stack.callback(runners[graph].close)
        fields = generation_fields(family.starter(model, runners), ids, mask, int(m["new_tokens"]),
                                   int(m["repeats"]))
    summary = fields["generation"]
    lines = ["artifacts: " + ", ".join(f"{g}: {s}" for g, s in sources.items()),
             f"tokenizer outputs: {'identical to the recording' if all(same_ids) else 'DIFFER from the recording'} "
             "(the bundled token ids are timed either way)",
             f"measured: {m['repeats']} greedy generation(s) of {m['new_tokens']} tokens per cache mode, batch "
             f"{summary['batch_size']} x {summary['prompt_tokens']} prompt tokens; kv=on "
             f"{summary['kv=on']['tokens_per_s']:.1f} tokens/s, kv=off {summary['kv=off']['tokens_per_s']:.1f} tokens/s"]
    return measured_values(fields), lines, {"generation_now": summary, "artifacts": sources,
                                            "tokenizer_matches": all(same_ids)}


def remeasure(bundle: Bundle, provider: str | None, threads: int | None
              ) -> tuple[dict[str, float], list[str], dict[str, Any]]:
    """(budget values now, lines to print, outcome data) for a fresh-process or decode bundle."""
    if bundle.manifest["measure"] == "fresh_process":
        return _remeasure_fresh(bundle, provider, threads)
    return _remeasure_decode(bundle, provider, threads)


def validate(manifest_path: Path, m: Mapping[str, Any]) -> None:
    """The shape ``remeasure`` relies on; one line per problem (exit 2)."""
    arts = m.get("artifacts")
    if not isinstance(arts, dict) or not arts:
        raise BundleError(f"{manifest_path}: artifacts must map each graph to its file")
    for art in arts.values():
        check_artifact(manifest_path, art)
    need = {"fresh_process": ("loader", "spec", "calls", "repeats"),
            "decode": ("family", "prompts", "new_tokens", "repeats")}[str(m["measure"])]
    missing = [k for k in need if k not in m]
    if missing:
        raise BundleError(f"{manifest_path}: missing keys {', '.join(missing)}")
    for key in ("calls", "repeats", "new_tokens"):
        if key in need and (not isinstance(m[key], int) or m[key] < (0 if key == "calls" else 1)):
            raise BundleError(f"{manifest_path}: {key} must be a positive integer")
    if m["measure"] == "fresh_process" and not (isinstance(m["spec"], dict) and ":" in str(m["loader"])):
        raise BundleError(f"{manifest_path}: spec must be the child's load spec and loader module:Class")
    if m["measure"] == "decode":
        try:
            family_for(str(m["family"]))
        except ValueError as exc:
            raise BundleError(f"{manifest_path}: {exc}") from None
