"""The GPU latency/accuracy table: every GPU runtime at FP32/FP16/INT8, batch 1 x seq 64.

    python scripts/gpu_check.py                                   # the defaults below
    python scripts/gpu_check.py --providers torch_cpu ort_cpu ov_cpu --seq 16   # the same table on a CPU

For each model and provider, each precision is loaded through the harness's own backend
(the registry: ``torch_cuda``, ``ort_cuda``, ``ort_trt``, ``trt_native`` ...), run on one batch
of real corpus tokens of exactly ``--batch`` x ``--seq``, and compared with the PyTorch FP32
reference on the CPU: ``max err`` is the max |difference| of the first output (the logits),
``ms`` the median of ``--iterations`` timed calls after ``--warmup`` (each call timed to
completion: the runner's own ``timed_call`` and device synchronise). A variant that cannot run
here prints its skip reason instead of numbers; one that breaks prints its error. Native
TensorRT also reports trtexec's split (GPU compute vs host latency, enqueue) in ``--json``.

Exit 0 when the table was produced (skips included), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_MODELS = ("bert-tiny", "encoder-custom-12x768")
DEFAULT_PROVIDERS = ("torch_cuda", "ort_cuda", "ort_trt", "trt_native")
PRECISIONS = ("fp32", "fp16", "int8")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    p.add_argument("--providers", nargs="+", default=list(DEFAULT_PROVIDERS))
    p.add_argument("--precisions", nargs="+", default=list(PRECISIONS))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int, default=None, help="intra-op threads of CPU runtimes")
    p.add_argument("--json", type=Path, default=None, metavar="OUT")
    p.add_argument("--markdown", type=Path, default=None, metavar="OUT")
    return p


def measure_cell(ws: Any, model: Any, family: Any, graph: Any, feeds: dict, reference: dict, variant: Any,
                 iterations: int, warmup: int) -> dict[str, Any]:
    """One (model, provider, precision): ``{"ms", "max_err"}``, or ``{"skip"}`` / ``{"error"}``."""
    import numpy as np

    from harness.perf.measure import time_calls
    from harness.runners.base import GraphRef

    reason = ws.runtimes.unavailable_reason(variant)
    if reason:
        return {"skip": reason}
    runner = None
    try:
        runner = ws.backend(variant, model).load(GraphRef(model, family, graph, variant))
        out = runner.run(feeds)
        name = graph.output_names[0]
        err = float(np.max(np.abs(out[name].astype(np.float64) - reference[name].astype(np.float64))))
        samples = time_calls(runner.timed_call(feeds), iterations, warmup, sync=runner.synchronize)
        cell: dict[str, Any] = {"ms": float(np.median(samples)), "max_err": err, "output": name}
        trtexec = getattr(runner, "trtexec_timing", None)
        if trtexec is not None:  # native TensorRT: host latency vs GPU compute, enqueue
            timing = trtexec(feeds, iterations=iterations, warmup=warmup).as_dict()
            cell["trtexec_median_ms"] = {k: float(np.median(v)) for k, v in timing.items()}
        memory = getattr(runner, "memory", None)
        if memory is not None:
            cell["memory"] = memory()
        return cell
    except Exception as exc:  # noqa: BLE001 - one broken cell must not cost the table
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
    finally:
        if runner is not None:
            runner.close()


def fmt(cell: dict[str, Any]) -> tuple[str, str]:
    if "skip" in cell:
        return "skip", cell["skip"]
    if "error" in cell:
        return "error", cell["error"]
    return f"{cell['ms']:.3f}", f"{cell['max_err']:.2e}"


def table(rows: list[dict[str, Any]], precisions: list[str]) -> str:
    """The seed table's shape: one row per model x provider, ms and max error per precision;
    skip reasons and errors listed under it (a table cell only says which)."""
    head = ["model", "provider"] + [f"{p.upper()} {what}" for p in precisions for what in ("ms", "max err")]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|"]
    notes: list[str] = []
    for row in rows:
        cells = [row["model"], row["provider"]]
        for p in precisions:
            ms, err = fmt(row["cells"][p])
            if ms in ("skip", "error"):
                notes.append(f"- {row['model']} {p} {row['provider']}: {ms}: {err}")
                cells += [ms, "-"]
            else:
                cells += [ms, err]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from harness.core import RunOptions, Settings, UsageError, Variant, parse_precision
    from harness.runners import parse_provider

    try:
        providers = [parse_provider(p) for p in args.providers]
        precisions = [parse_precision(p, option="--precisions") for p in args.precisions]
        for name in ("batch", "seq", "iterations"):
            if getattr(args, name) < 1:
                raise UsageError(f"--{name}: must be >= 1, got {getattr(args, name)}")
        if args.warmup < 0:
            raise UsageError(f"--warmup: must be >= 0, got {args.warmup}")
        from harness.zoo import resolve

        for name in args.models:
            resolve(name)
    except UsageError as exc:
        print(f"gpu_check: error: {exc}", file=sys.stderr)
        return 2
    from harness.families.shaped_feeds import shaped_feeds
    from harness.judge.workspace import Workspace
    from harness.results.envinfo import environment

    options = RunOptions(models=list(args.models), settings=Settings(threads=args.threads, trt_max_batch=max(8, args.batch),
                                                                     trt_max_seq=max(128, args.seq)))
    ws = Workspace(options)
    env = environment(args.threads, None)
    started = time.time()
    rows: list[dict[str, Any]] = []
    for name in args.models:
        model = ws.model(name)
        family = ws.family(model)
        graph = family.graphs(model)[0]
        feeds = shaped_feeds(model, family, graph, ws.texts(model), args.batch, args.seq)
        reference = ws.refs.reference(model, family, graph, dict(feeds))
        for provider in providers:
            cells = {p.value: measure_cell(ws, model, family, graph, dict(feeds), reference, Variant(name, p, provider),
                                           args.iterations, args.warmup) for p in precisions}
            rows.append({"model": name, "provider": provider.short, "cells": cells})
            print(f"{name} {provider.short}: " + ", ".join(f"{p} {'/'.join(fmt(c))}" for p, c in cells.items()),
                  flush=True)
    title = (f"GPU: {env['gpu'] or 'none'}; CPU: {env['cpu']}; batch {args.batch} x seq {args.seq}; "
             f"median of {args.iterations} calls after {args.warmup} warmup; max err = max |output - PyTorch FP32 (CPU)|")
    text = table(rows, [p.value for p in precisions])
    print()
    print(title)
    print(text)
    if args.markdown:
        args.markdown.write_text(title + "\n\n" + text, encoding="utf-8")
    if args.json:
        payload = {"schema": "harness.gpu_check/1", "env": env, "title": title, "seconds": time.time() - started,
                   "settings": {k: getattr(args, k) for k in ("batch", "seq", "iterations", "warmup", "threads")},
                   "rows": rows}
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
