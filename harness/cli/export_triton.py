"""``harness export-triton``: a Triton model repository of the variants a run judges.

    harness export-triton --models bert-tiny --precisions fp32 fp16 --providers ort_cpu --out model_repository
    harness export-triton --models encoder-custom --providers ort_trt --opset 17 \\
        --trt-profile input_ids=1x1,8x64,16x128 --out model_repository

Each (model, precision, provider) becomes ``<out>/<model>-<precision>[-<graph>]/`` with the
artifact the harness judged (its content-addressed cache) and a ``config.pbtxt`` derived from
the artifact and the variant's runtime settings, validated with Triton's model-config protobuf.
Exit 0 written, 2 bad input (unknown model, a provider that does not run ONNX files, a config
that does not parse). docs/serving.md shows how to serve it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core import Precision, UsageError, Variant
from harness.results.store import read_records

if TYPE_CHECKING:  # pragma: no cover
    from harness.judge.workspace import Workspace
    from harness.serving.triton import ModelEntry, TritonSettings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from harness.settings.commands import add_command_options

    p = sub.add_parser("export-triton", help="write a Triton model repository (model.onnx + config.pbtxt) of the "
                                             "variants a run judges",
                       description="Write <out>/<model>-<precision>/<version>/model.onnx and config.pbtxt for each "
                                   "variant (dynamic dims, max batch size, dynamic batching, instance groups, the "
                                   "ONNX Runtime / TensorRT backend settings of the variant's runtime settings), "
                                   "each config parsed back with Triton's model-config protobuf. Exit 0 written, "
                                   "2 bad input.")
    add_command_options(p, "export-triton")
    p.set_defaults(func=export_triton)


def _write_variant(ws: Workspace, variant: Variant, out: Path, settings: TritonSettings,
                   plan: Path | None) -> list[ModelEntry]:
    """Every graph of one variant into the repository; one line per written config."""
    from harness.runners.ort_runner import OrtBackend
    from harness.serving.artifacts import variant_files
    from harness.serving.triton import repository_name, write_model

    model, family, graphs = variant_files(ws, variant)
    if len(graphs) > 1 and plan:
        raise UsageError(f"--plan: {variant.model} has {len(graphs)} graphs; one engine serves one graph")
    runtime = ws.runtime_for(variant, model)
    backend = ws.backend(variant, model)
    written = []
    for g in graphs:
        # the TensorRT EP's shape profile: only the ONNX Runtime backend has one (the command takes its variants only)
        profile = (backend.trt_profile(model, family, g.graph)
                   if variant.provider.device == "TensorrtExecutionProvider" and isinstance(backend, OrtBackend) else None)
        name = repository_name(variant.model, variant.precision.value, g.graph.name, len(graphs))
        entry = write_model(out, name, g.path, variant, runtime, settings, profile, plan)
        written.append(entry)
        note = f"  ({'; '.join(entry.notes)})" if entry.notes else ""
        print(f"{entry.directory}/config.pbtxt  [{variant.id}, {g.graph.name}]{note}")
    return written


def judged_variants(run_dir: Path) -> list[Variant]:
    """The ONNX Runtime variants a run judged and passed, from its results.jsonl, in order."""
    from harness.runners import parse_provider

    path = run_dir / "results.jsonl"
    if not path.is_file():
        raise UsageError(f"--run: {path}: no such file (give a run directory of harness run or harness check)")
    seen: dict[str, Variant] = {}
    for record in read_records(path):
        provider = record.get("provider")
        if record.get("verdict") != "pass" or not isinstance(provider, str) or not provider.startswith("ort_"):
            continue
        variant = Variant(str(record["model"]), Precision(str(record["precision"])),
                          parse_provider(provider, option="--run"))
        seen.setdefault(variant.id, variant)
    if not seen:
        raise UsageError(f"--run: {path}: no passing ONNX Runtime case to export")
    return list(seen.values())


def export_triton(args: argparse.Namespace) -> int:
    from harness.runners import backends
    from harness.runners.prebuilt import runs_onnx_files
    from harness.serving.triton import TritonSettings
    from harness.settings.commands import value_of
    from harness.settings.options import cli_values
    from harness.settings.resolve import build_options

    settings = TritonSettings(args.max_batch_size, tuple(value_of(args, "preferred_batch_sizes") or ()),
                              args.max_queue_delay_us, args.instances, args.model_version)
    settings.validate()
    options = build_options(cli_values(args), rootdir=Path.cwd())
    if len(options.precisions) * len(options.models) > 1 and args.plan:
        raise UsageError("--plan: one engine is one model at one precision; give one --models and one --precisions")
    if args.plan is not None and not Path(args.plan).is_file():
        raise UsageError(f"--plan: {args.plan}: no such file")
    providers = [p for p in options.providers if runs_onnx_files(backends().get(p.backend))
                 and p.backend == "onnxruntime"]
    if not providers:
        raise UsageError("--providers: Triton's ONNX Runtime backend serves ort_cpu, ort_cuda or ort_trt variants; "
                         f"got {', '.join(p.short for p in options.providers)}")
    from harness.judge.workspace import Workspace

    ws = Workspace(options)
    out = Path(args.out)
    written = []
    todo = (judged_variants(Path(args.from_run)) if args.from_run is not None else
            [Variant(name, precision, provider) for name in options.models for precision in options.precisions
             for provider in providers])
    for variant in todo:
        written += _write_variant(ws, variant, out, settings, args.plan)
    print(f"{len(written)} model(s) in {out}; every config.pbtxt parsed with Triton's model-config protobuf. "
          f"Serve: tritonserver --model-repository {out.resolve()}")
    return 0
