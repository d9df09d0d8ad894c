"""Fresh-process measurement: load a variant, run it, report cold start and peak memory.

    python -m harness.perf.child --backend onnxruntime --provider ort_cpu \\
        --graph model=/cache/.../model.onnx --feeds feeds.npz --calls 5

Cold start and peak RSS only mean something in a process that has loaded nothing else
(optimum-benchmark, pyperf): the test process already holds torch, every model and every
ORT arena. The parent (``harness.perf.coldstart``) writes the feeds and resolves the
artifacts from its on-disk cache, so the child measures load + first inference, never
export. An ONNX Runtime child imports numpy, onnxruntime and the harness's
``OrtGraphRunner`` only, as a deployed service would (the runner package imports the
torch backend lazily; eagerly it cost +4.3 s and +200 MB here).

The parent runs this file by path, not with ``-m``: ``-m`` first imports
``harness.perf/__init__`` and with it scipy, which would count in every cold start.
Output: one line ``HARNESS_CHILD_RESULT {json}`` on stdout.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # before any other import: import time is part of cold start

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

if __name__ == "__main__" and sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)  # run by path: harness/perf must not shadow top-level modules

MARKER = "HARNESS_CHILD_RESULT "


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far.

    Linux: ``VmHWM`` from /proc/self/status, the high-water mark of this process's own
    address space. Not ``ru_maxrss``: exec carries the parent's high-water mark over, so
    a child of a 450 MB pytest process would report >= 450 MB whatever it loads.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    try:
        import resource
    except ImportError:  # Windows
        import psutil

        info = psutil.Process().memory_info()
        return int(getattr(info, "peak_wset", info.rss))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # macOS: bytes, spawned fresh
    return int(peak if sys.platform == "darwin" else peak * 1024)


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


def _session_settings(session: Any) -> dict[str, Any]:
    o = session.get_session_options()
    return {
        "enable_cpu_mem_arena": o.enable_cpu_mem_arena, "enable_mem_pattern": o.enable_mem_pattern,
        "enable_mem_reuse": o.enable_mem_reuse, "execution_mode": str(o.execution_mode),
        "graph_optimization_level": str(o.graph_optimization_level),
        "intra_op_num_threads": o.intra_op_num_threads, "inter_op_num_threads": o.inter_op_num_threads,
        "providers": session.get_providers(), "provider_options": session.get_provider_options(),
    }


def _nvml_process_bytes() -> int | None:
    """GPU memory this process holds (ONNX Runtime has no peak counter of its own)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == os.getpid():
                return int(proc.usedGpuMemory or 0)
    except Exception:  # no pynvml, no driver: unknown, not zero
        return None
    return None


def _load_feeds(path: str) -> dict[str, dict[str, Any]]:
    import numpy as np

    out: dict[str, dict[str, Any]] = {}
    with np.load(path) as data:
        for key in data.files:
            graph, name = key.split("::", 1)
            out.setdefault(graph, {})[name] = data[key]
    return out


def _ort_loader(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, float], dict[str, Any]]:
    from harness.config import PROVIDERS
    from harness.runners.ort_runner import OrtGraphRunner

    device = PROVIDERS[args.provider].device
    sessions, load = {}, {}
    for spec in args.graph:
        name, path = spec.split("=", 1)
        start = time.perf_counter()
        sessions[name] = OrtGraphRunner(path, device, args.intra_op_threads or None, args.inter_op_threads or None)
        load[name] = _ms(start)
    first = next(iter(sessions.values()))
    if first.providers[0] != device:
        raise SystemExit(f"{device} was requested but the session runs on {first.providers}")
    # session.run on prepared feeds: what the in-process latency measurement times too
    calls = {g: (lambda r: (lambda feeds: r.session.run(None, r.prepare(feeds))))(r) for g, r in sessions.items()}
    return calls, load, {"onnxruntime": _session_settings(first.session)}


def _torch_loader(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, float], dict[str, Any]]:
    import torch

    from harness.config import PROVIDERS, Precision, RunOptions, Variant
    from harness.workspace import Workspace

    variant = Variant(args.model, Precision(args.precision), PROVIDERS[args.provider])
    options = RunOptions(models=[args.model], precisions=[variant.precision], providers=[variant.provider],
                         intra_op_threads=args.intra_op_threads or None, inter_op_threads=args.inter_op_threads or None)
    start = time.perf_counter()
    ws = Workspace(options, args.cache)
    model = ws.model(args.model)
    family = ws.family(model)
    backend = ws.backend(variant, model)
    load = {"weights": _ms(start)}  # weights and tokenizer, shared by the graphs
    runners = {}
    for graph in family.graphs(model):
        if graph.name in args.graph:
            start = time.perf_counter()
            runners[graph.name] = backend.load(model, family, graph, variant)
            load[graph.name] = _ms(start)
    calls = {g: r.run for g, r in runners.items()}
    settings = {"torch": {"num_threads": torch.get_num_threads(), "num_interop_threads": torch.get_num_interop_threads(),
                          "device": variant.provider.device}}
    return calls, load, settings


def _gpu_peak(args: argparse.Namespace) -> int | None:
    if args.backend == "pytorch":
        import torch

        if torch.cuda.is_available() and args.provider != "torch_cpu":
            return int(torch.cuda.max_memory_allocated())
        return None
    return _nvml_process_bytes() if args.provider in ("ort_cuda", "ort_trt") else None


def _import_backend(backend: str) -> None:
    if backend == "onnxruntime":
        import numpy  # noqa: F401
        import onnxruntime  # noqa: F401

        import harness.runners.ort_runner  # noqa: F401  (light: no torch)
    else:
        import harness.workspace  # noqa: F401  (torch, transformers and the runners)


def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"mode": args.mode, "pid": os.getpid()}
    if args.mode == "empty":
        result["peak_rss_bytes"] = peak_rss_bytes()
        return result
    start = time.perf_counter()
    _import_backend(args.backend)
    result["import_ms"] = _ms(start)
    if args.mode == "imports":
        result["peak_rss_bytes"] = peak_rss_bytes()
        return result
    feeds = _load_feeds(args.feeds)
    start = time.perf_counter()
    calls, load_by_graph, settings = (_ort_loader if args.backend == "onnxruntime" else _torch_loader)(args)
    result["load_ms"] = _ms(start)
    result["load_ms_by_graph"] = load_by_graph
    result["peak_rss_after_load_bytes"] = peak_rss_bytes()
    first: dict[str, float] = {}
    for graph, call in calls.items():
        start = time.perf_counter()
        call(feeds[graph])
        first[graph] = _ms(start)
    result["first_inference_ms"] = sum(first.values())
    result["first_inference_ms_by_graph"] = first
    result["ready_ms"] = _ms(_T0)  # script start -> imported, loaded and answered once
    steady = []
    for _ in range(args.calls):
        start = time.perf_counter()
        for graph, call in calls.items():
            call(feeds[graph])
        steady.append(_ms(start))
    result["steady_ms"] = steady
    result["peak_rss_bytes"] = peak_rss_bytes()
    result["gpu_peak_bytes"] = _gpu_peak(args)
    result["settings"] = settings
    return result


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.perf.child", description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("run", "imports", "empty"), default="run",
                   help="run: load and run; imports: only import the backend; empty: nothing (interpreter floor)")
    p.add_argument("--backend", choices=("onnxruntime", "pytorch"), default="onnxruntime")
    p.add_argument("--provider", default="ort_cpu", help="provider short name (ort_cpu, torch_cpu, ...)")
    p.add_argument("--graph", action="append", default=[],
                   help="onnxruntime: NAME=PATH of an artifact; pytorch: a graph NAME (repeatable)")
    p.add_argument("--model", help="pytorch: zoo name or local HF dir")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--cache", help="artifact cache dir (pytorch: where the workspace looks)")
    p.add_argument("--feeds", help=".npz with GRAPH::INPUT arrays (written by the parent)")
    p.add_argument("--intra-op-threads", type=int, default=0)
    p.add_argument("--inter-op-threads", type=int, default=0)
    p.add_argument("--calls", type=int, default=5, help="steady-state rounds after the first inference")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.mode == "run" and (not args.graph or not args.feeds):
        print("harness.perf.child: --graph and --feeds are required in run mode", file=sys.stderr)
        return 2
    result = run(args)
    sys.stdout.write(MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
