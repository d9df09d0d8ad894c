"""``harness bisect``: the first node where an FP16/INT8 artifact diverges from the FP32 one.

    harness bisect --models marian-tiny --precisions int8 [--graph encoder] [--tolerance norm_max_abs=0.01]

Exit 0 no activation exceeds the tolerance, 1 a divergent node was found, 2 bad usage.
See docs/bisect.md for the rule.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cli._args import parse_metric_values
from harness.core import Precision, UsageError, did_you_mean, parse_precision
from harness.core.rundirs import default_run_dir
from harness.core.writable import ensure_writable_dir
from harness.debug.modules import module_map, reexport_scopes
from harness.metrics.registry import METRICS, Scope, tensor_metric_names

if TYPE_CHECKING:  # pragma: no cover
    from harness.debug.bisect import BisectResult
    from harness.debug.modules import ModuleMap
    from harness.export.cache import CacheEntry
    from harness.families.base import Family, GraphSpec
    from harness.judge.workspace import Workspace
    from harness.zoo.base import ModelSpec
    from harness.zoo.loading import LoadedModel


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from harness.settings.commands import add_command_options

    p = sub.add_parser("bisect", help="find the first ONNX node where FP16/INT8 diverges from FP32",
                       description="Run the FP32 and the FP16/INT8 ONNX artifact of one graph with every "
                                   "intermediate activation as an output, compare them tensor by tensor and report "
                                   "the first node (topological order) whose output exceeds the tolerance. "
                                   "Writes DIR/bisect.json and DIR/bisect.md. Exit 0 none, 1 found, 2 bad usage.")
    add_command_options(p, "bisect")
    p.set_defaults(func=bisect)


def parse_tolerances(values: list[str]) -> dict[str, float]:
    return parse_metric_values(values, tensor_metric_names())


def _validate(args: argparse.Namespace) -> tuple[Precision, dict[str, float]]:
    """Everything checkable before loading a model, so typos cost nothing."""
    precision = parse_precision(args.precisions, option="--precisions")
    if precision is Precision.FP32:
        raise UsageError("--precisions: fp32 is the reference; bisect fp16 or int8 against it")
    if precision is Precision.INT4:
        raise UsageError("--precisions: int4 is not bisected (its fixes would be MatMulNBits exclusions, which "
                         "bisect does not rebuild); bisect fp16, int8 or int8-static")
    from harness.settings.options import option

    option("samples").parse(args.samples, "--samples")  # the run option's row: as `harness run` and the config
    if args.top < 1:
        raise UsageError(f"--top: must be >= 1, got {args.top}")
    if (args.target or args.max_rebuilds is not None) and not args.suggest:
        raise UsageError("--target / --max-rebuilds: only with --suggest")
    args.max_rebuilds = 12 if args.max_rebuilds is None else args.max_rebuilds
    if args.max_rebuilds < 1:
        raise UsageError(f"--max-rebuilds: must be >= 1, got {args.max_rebuilds}")
    from harness.runners import parse_provider

    parse_provider(args.providers, option="--providers")
    args.targets = parse_metric_values(args.target, list(METRICS.as_dict(Scope.NUMERIC)))
    args.out = args.out or default_run_dir("bisect")
    ensure_writable_dir(args.out, "--out")  # before a model is loaded or an artifact built
    return precision, parse_tolerances(args.tolerance)


def bisect(args: argparse.Namespace) -> int:
    precision, overrides = _validate(args)
    from harness.debug.bisect import bisect_graph, bisect_tolerance
    from harness.debug.report import print_tables, write_html, write_json, write_markdown
    from harness.export.artifacts import onnx_artifact
    from harness.judge.workspace import Workspace
    from harness.settings.resolve import build_options

    # resolved as `harness run` resolves (a harness.toml's models, exporter and node lists apply), with
    # one batch of --samples sentences; UsageError (with did-you-mean) before anything is built
    ws = Workspace(build_options({"models": [args.models], "precisions": [precision.value], "samples": args.samples,
                                 "batch_size": args.samples, "threads": 1, "external_data": args.external_data,
                                 **({"config": args.config} if args.config else {})}))
    ws.spec(args.models)
    model = ws.model(args.models)
    family = ws.family(model)
    graphs = {g.name: g for g in family.graphs(model)}
    name = args.graph or next(iter(graphs))
    if name not in graphs:
        raise UsageError(f"--graph: {args.models} has no graph {name!r}{did_you_mean(name, graphs)}; "
                         f"valid: {', '.join(graphs)}")
    graph = graphs[name]
    settings = ws.runtimes.settings_for(model)
    fp32_entry = onnx_artifact(model, family, graph, Precision.FP32, settings, ws.runtimes.artifacts)
    fp32 = fp32_entry.path()
    candidate = onnx_artifact(model, family, graph, precision, settings, ws.runtimes.artifacts).path()
    feeds = family.feeds(model, graph, ws.batches(model)[0])
    tolerance = bisect_tolerance(precision, overrides)
    modules = graph_modules(ws, model, family, graph, fp32_entry)
    result = bisect_graph(fp32, candidate, feeds, tolerance, modules=modules)

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    meta = {"model": args.models, "graph": name, "precision": precision.value, "samples": args.samples,
            "artifacts": {"fp32": str(fp32), precision.value: str(candidate)},
            "feeds": {k: list(v.shape) for k, v in feeds.items()}}
    write_json(result, out / "bisect.json", meta, args.top)
    write_markdown(result, out / "bisect.md", meta, args.top)
    write_html(result, out / "bisect.html", meta)
    print_tables(result, args.top)
    print(f"report: {out / 'bisect.md'}  plot: {out / 'bisect.html'}")
    if args.suggest:
        return suggest(args, precision, result, ws.spec(args.models), out)
    return 1 if result.first_divergent else 0


def suggest(args: argparse.Namespace, precision: Precision, result: BisectResult, spec: ModelSpec, out: Path) -> int:
    """``--suggest``: search, print every step, the before/after verdict and the harness.toml lines."""
    from harness.debug.suggest import candidates_for, harness_judge, search, toml_snippet

    candidates = candidates_for(precision, result)
    modules = {t.node: (f"{t.module} ({t.module_class})" if t.module_class else t.module) for t in result.tensors}
    print(f"\nsuggest: {len(candidates)} candidate nodes from the bisect; each step rebuilds the {precision.value} "
          f"artifact and judges {args.models}-{precision.value}-{args.providers} on the corpus "
          f"(budget {args.max_rebuilds} rebuilds)")

    def report(trial: Any, number: int) -> None:
        verdict = "PASS" if trial.passed else f"fail ({len(trial.failures)} checks: {trial.failures[0]})"
        label = "before (as built today)" if trial.step == "before" else \
            f"step {number} ({trial.step}): {len(trial.nodes)} node(s)"
        print(f"  {label} -> {verdict}  [{trial.seconds:.1f}s]", flush=True)

    judge = harness_judge(args.models, precision, args.providers, {"config": args.config} if args.config else {},
                          args.targets)
    found = search(precision, candidates, judge, args.max_rebuilds, report)
    before, best = found.before, found.best
    (out / "suggest.json").write_text(json.dumps(found.as_dict(), indent=2, default=str) + "\n")
    if before.passed:
        print("suggest: the case already passes; nothing to fix")
        return 0
    assert best is not None
    keys = [k for k in before.thresholds if k in before.metrics]
    shape = ("1-minimal" if found.minimal else "not pruned to a minimum: raise --max-rebuilds") \
        if best.passed else "the best set tried"
    print("\nbefore -> after (" + ("PASS" if best.passed else "still failing") + f", {len(best.nodes)} node(s), "
          f"{shape}, {found.rebuilds} rebuilds):")
    for key in keys:
        rule = before.thresholds[key]
        after = best.metrics.get(key, float("nan"))
        print(f"  {key:<40} {before.metrics[key]:>12.6g} -> {after:<12.6g} ({rule['op']} {rule['threshold']:g})")
    print("\nnodes:")
    for node in best.nodes:
        print(f"  {node}  [{modules.get(node) or '?'}]")
    existing = list(getattr(spec, found.option))  # what the config's [models.<name>] already keeps
    snippet = toml_snippet(spec.name, found.option, list(dict.fromkeys((*existing, *best.nodes))), precision,
                           args.targets, _config_path(args.models), verified=found.fixed)
    (out / "suggested-harness.toml").write_text(snippet)
    print("\nharness.toml:\n" + snippet)
    config = spec.extra.get("config")
    if config:
        print(f"(merge into {config}: its [models.{spec.name}] table takes these keys; the list includes the "
              f"{len(existing)} node(s) it already has)" if existing else
              f"(merge into {config}: a [models.{spec.name}] table there takes these keys)")
    print(f"suggest: {out / 'suggest.json'}, {out / 'suggested-harness.toml'}")
    return 0 if best.passed else 1


def graph_modules(ws: Workspace, model: LoadedModel, family: Family, graph: GraphSpec,
                  fp32_entry: CacheEntry) -> ModuleMap:
    """Node -> PyTorch module of the FP32 artifact, validated against the loaded model. A dynamo
    export below opset 18 lost its node metadata (``harness.debug.modules``): the mapping of a
    metadata-keeping re-export is kept in the artifact cache beside it (keyed by the FP32 entry,
    so it is made once, ~10 s for the zoo's dynamo model)."""
    wrapper = family.module(model, graph)

    def reexport() -> dict[str, list[str]]:
        def build(tmp: Path) -> Path:
            chains = reexport_scopes(family.module(model, graph), graph, family.export_example(model, graph),
                                     tmp / "export")
            shutil.rmtree(tmp / "export", ignore_errors=True)
            target = tmp / "scopes.json"
            target.write_text(json.dumps(chains, sort_keys=True))
            return target

        label = fp32_entry.directory.name.rsplit("-", 1)[0]
        entry = ws.runtimes.artifacts.get_or_build(f"{label}-scopes", {"kind": "module-scopes", "source": fp32_entry.key,
                                                              "opset": 18}, build)
        loaded: dict[str, list[str]] = json.loads(entry.path("scopes.json").read_text())
        return loaded

    return module_map(fp32_entry.path(), wrapper=wrapper, model=model.model, reexport=reexport)


def _config_path(name: str) -> str | None:
    """A local model directory as a ``[models.<name>] path`` (relative to a harness.toml in the
    working directory, which is how the config reads paths); None for a zoo or config model."""
    from harness.zoo.base import is_path

    if not is_path(name):
        return None
    path = Path(name).expanduser().resolve()
    try:
        return "./" + Path(os.path.relpath(path, Path.cwd())).as_posix() if path.is_relative_to(Path.cwd()) else str(path)
    except ValueError:
        return str(path)
