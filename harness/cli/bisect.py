"""``harness bisect``: the first node where an FP16/INT8 artifact diverges from the FP32 one.

    harness bisect --models marian-tiny --precision int8 [--graph encoder] [--tolerance norm_max_abs=0.01]

Exit 0 no activation exceeds the tolerance, 1 a divergent node was found, 2 bad usage.
See docs/bisect.md for the rule.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cli._args import parse_metric_values
from harness.core import Precision, UsageError, did_you_mean, parse_precision

if TYPE_CHECKING:  # pragma: no cover
    from harness.debug.modules import ModuleMap


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bisect", help="find the first ONNX node where FP16/INT8 diverges from FP32",
                       description="Run the FP32 and the FP16/INT8 ONNX artifact of one graph with every "
                                   "intermediate activation as an output, compare them tensor by tensor and report "
                                   "the first node (topological order) whose output exceeds the tolerance. "
                                   "Writes DIR/bisect.json and DIR/bisect.md. Exit 0 none, 1 found, 2 bad usage.")
    p.add_argument("--models", required=True, metavar="MODEL", help="one zoo name or local HF model dir")
    p.add_argument("--precision", required=True, help="fp16 or int8")
    p.add_argument("--graph", default=None, help="graph of the model (default: its first, e.g. encoder)")
    p.add_argument("--samples", type=int, default=8, help="corpus sentences in the one batch that is run (default 8)")
    p.add_argument("--tolerance", action="append", default=[], metavar="METRIC=VALUE",
                   help="override a per-tensor threshold, e.g. norm_max_abs=0.01 or cosine=0.999 (repeatable)")
    p.add_argument("--top", type=int, default=10, help="tensors listed by error (default 10)")
    p.add_argument("--out", type=Path, default=None, help="report directory (default: reports/bisect-<time>)")
    p.add_argument("--external-data", default="auto", choices=("auto", "always", "never"),
                   help="bisect the artifacts built with this --external-data mode (as `harness run`; default auto)")
    p.set_defaults(func=bisect)


def parse_tolerances(values: list[str]) -> dict[str, float]:
    from harness.metrics.registry import tensor_metric_names

    return parse_metric_values(values, tensor_metric_names())


def _validate(args: argparse.Namespace) -> tuple[Precision, dict[str, float]]:
    """Everything checkable before loading a model, so typos cost nothing."""
    precision = parse_precision(args.precision, option="--precision")
    if precision is Precision.FP32:
        raise UsageError("--precision: fp32 is the reference; bisect fp16 or int8 against it")
    from harness.settings.options import option

    option("samples").parse(args.samples, "--samples")  # the run option's row: as `harness run` and the config
    if args.top < 1:
        raise UsageError(f"--top: must be >= 1, got {args.top}")
    from harness.core.writable import ensure_writable_dir

    args.out = args.out or Path("reports") / time.strftime("bisect-%Y%m%d-%H%M%S")
    ensure_writable_dir(args.out, "--out")  # before a model is loaded or an artifact built
    return precision, parse_tolerances(args.tolerance)


def bisect(args: argparse.Namespace) -> int:
    precision, overrides = _validate(args)
    from harness.core import RunOptions
    from harness.debug.bisect import bisect_graph, bisect_tolerance
    from harness.debug.report import print_tables, write_html, write_json, write_markdown
    from harness.export.artifacts import onnx_artifact
    from harness.judge.workspace import Workspace

    ws = Workspace(RunOptions(models=[args.models], precisions=[precision], num_samples=args.samples,
                              batch_size=args.samples, intra_op_threads=1,
                              external_data=args.external_data))
    ws.spec(args.models)  # UsageError (with did-you-mean) before anything is built
    model = ws.model(args.models)
    family = ws.family(model)
    graphs = {g.name: g for g in family.graphs(model)}
    name = args.graph or next(iter(graphs))
    if name not in graphs:
        raise UsageError(f"--graph: {args.models} has no graph {name!r}{did_you_mean(name, graphs)}; "
                         f"valid: {', '.join(graphs)}")
    graph = graphs[name]
    settings = ws.settings_for(model)
    fp32_entry = onnx_artifact(model, family, graph, Precision.FP32, settings, ws.artifacts)
    fp32 = fp32_entry.path()
    candidate = onnx_artifact(model, family, graph, precision, settings, ws.artifacts).path()
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
    return 1 if result.first_divergent else 0


def graph_modules(ws: Any, model: Any, family: Any, graph: Any, fp32_entry: Any) -> "ModuleMap":
    """Node -> PyTorch module of the FP32 artifact, validated against the loaded model. A dynamo
    export below opset 18 lost its node metadata (``harness.debug.modules``): the mapping of a
    metadata-keeping re-export is kept in the artifact cache beside it (keyed by the FP32 entry,
    so it is made once, ~10 s for the zoo's dynamo model)."""
    import json

    from harness.debug.modules import module_map, reexport_scopes

    wrapper = family.module(model, graph)

    def reexport() -> dict[str, list[str]]:
        def build(tmp: Path) -> Path:
            chains = reexport_scopes(family.module(model, graph), graph, family.export_example(model, graph),
                                     tmp / "export")
            import shutil

            shutil.rmtree(tmp / "export", ignore_errors=True)
            target = tmp / "scopes.json"
            target.write_text(json.dumps(chains, sort_keys=True))
            return target

        label = fp32_entry.directory.name.rsplit("-", 1)[0]
        entry = ws.artifacts.get_or_build(f"{label}-scopes", {"kind": "module-scopes", "source": fp32_entry.key,
                                                              "opset": 18}, build)
        loaded: dict[str, list[str]] = json.loads(entry.path("scopes.json").read_text())
        return loaded

    return module_map(fp32_entry.path(), wrapper=wrapper, model=model.model, reexport=reexport)
