"""Fresh-process measurement: load a variant, run it, report cold start and peak memory.

    python harness/perf/child.py --loader harness.runners.ort_runner:OrtBackend \\
        --spec '{"device": "CPUExecutionProvider", "graphs": {"model": "/cache/.../model.onnx"}}' \\
        --feeds feeds.npz --calls 5

Cold start and peak RSS only mean something in a process that has loaded nothing else
(optimum-benchmark, pyperf): the test process already holds torch, every model and every
ORT arena. The parent (``harness.perf.coldstart``) writes the feeds and asks the variant's
backend for a small JSON description of what to load (``Backend.child_spec``: built
artifacts from its on-disk cache, so the child measures load + first inference, never
export). This script knows no backend: it imports the one backend module ``--loader``
names, then lets that class import its runtime (``child_imports``) and load
(``child_load``). An ONNX Runtime child so imports numpy, onnxruntime and the harness's
``OrtGraphRunner`` only, as a deployed service would (the runner package imports the torch
backend lazily; eagerly it cost +4.3 s and +200 MB here).

The parent runs this file by path, not with ``-m``: ``-m`` first imports
``harness.perf/__init__`` and with it scipy, which would count in every cold start.
Output: one line ``HARNESS_CHILD_RESULT {json}`` on stdout.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # before any other import: import time is part of cold start

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    from harness.runners.base import Backend

if __name__ == "__main__" and sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)  # run by path: harness/perf must not shadow top-level modules

MARKER = "HARNESS_CHILD_RESULT "
#: canary blocks a child times at least (``SEGMENT_CANARY_CALLS`` calls each, ~1.5 ms each here)
CANARY_BLOCKS = 2
#: after the ``--calls`` steady calls (and the peak-memory reading), more steady calls
#: (``level_ms``), up to this much time or :data:`MAX_STEADY_CALLS` in all, each segment of them
#: after a canary block: with the steady calls, the process's level for the gate
#: (``harness.gate.processes``). Five calls of a 0.2-ms model are a median of
#: a millisecond, whose 15-call blocks spread 7-10 % within one process here
#: (``scripts/bench_canary_match.py``); a model of 40 ms a call or more gets no extra call
STEADY_BUDGET_MS = 200.0
MAX_STEADY_CALLS = 100


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
        import resource  # deferred: absent on Windows (the fallback below)
    except ImportError:  # Windows
        import psutil

        info = psutil.Process().memory_info()
        return int(getattr(info, "peak_wset", info.rss))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # macOS: bytes, spawned fresh
    return int(peak if sys.platform == "darwin" else peak * 1024)


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


def _load_feeds(path: str) -> dict[str, dict[str, Any]]:
    import numpy as np

    out: dict[str, dict[str, Any]] = {}
    with np.load(path) as data:
        for key in data.files:
            graph, name = key.split("::", 1)
            out.setdefault(graph, {})[name] = data[key]
    return out


def backend_class(ref: str) -> "type[Backend]":
    """The backend class ``module:Class`` names, importing that module only (never the
    backend registry, which would import every runtime)."""
    module, _, name = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[no-any-return]


def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"mode": args.mode, "pid": os.getpid()}
    if args.mode == "empty":
        result["peak_rss_bytes"] = peak_rss_bytes()
        return result
    start = time.perf_counter()
    backend = backend_class(args.loader)
    backend.child_imports()
    result["import_ms"] = _ms(start)
    if args.mode == "imports":
        result["peak_rss_bytes"] = peak_rss_bytes()
        return result
    feeds = _load_feeds(args.feeds)
    start = time.perf_counter()
    from harness.runners.base import ChildSpec

    loaded = backend.child_load(ChildSpec.from_dict(json.loads(args.spec)))
    calls = loaded.calls
    result["load_ms"] = _ms(start)
    result["load_ms_by_graph"] = loaded.load_ms
    result["peak_rss_after_load_bytes"] = peak_rss_bytes()
    first: dict[str, float] = {}
    for graph, call in calls.items():
        start = time.perf_counter()
        call(feeds[graph])
        first[graph] = _ms(start)
    result["first_inference_ms"] = sum(first.values())
    result["first_inference_ms_by_graph"] = first
    result["ready_ms"] = _ms(_T0)  # script start -> imported, loaded and answered once
    from harness.perf.loop import time_calls  # deferred: a by-path child imports late (see the module docstring)

    def every_graph() -> None:
        for graph, call in calls.items():
            call(feeds[graph])

    result["steady_ms"] = time_calls(every_graph, args.calls) if args.calls > 0 else []
    result["peak_rss_bytes"] = peak_rss_bytes()
    result["gpu_peak_bytes"] = loaded.gpu_peak_bytes()
    result["settings"] = loaded.settings
    if args.calls > 0:
        result["level_ms"], result["canary"] = _level(every_graph, result["steady_ms"])
    return result


def _level(call: Any, steady: list[float]) -> tuple[list[float], dict[str, Any]]:
    """More steady calls (up to :data:`STEADY_BUDGET_MS`, at most :data:`MAX_STEADY_CALLS` with ``steady``)
    in segments, the harness's canary (``harness.perf.canary``) timed before each segment and after
    the last: what the machine did in this process's moment, so the gate reads a process that ran
    while a neighbour was busy as a busier moment, not as a slower process
    (``harness.gate.processes``). After the peak-memory reading: the canary's buffers count nowhere."""
    from harness.perf.canary import SEGMENT_CALLS, SEGMENT_CANARY_CALLS, Canary  # deferred: a by-path child
    from harness.perf.loop import time_calls  # deferred: a by-path child imports late (see the module docstring)

    per_call = statistics.median(steady)
    extra = max(0, min(MAX_STEADY_CALLS, int(STEADY_BUDGET_MS / per_call)) - len(steady)) if per_call > 0 else 0
    canary = Canary(calls=SEGMENT_CANARY_CALLS)
    more: list[float] = []
    while len(more) < extra:
        canary.block()
        more += time_calls(call, min(SEGMENT_CALLS, extra - len(more)))
    canary.block()  # after the last segment (or, without one, after the steady calls)
    while canary.blocks < CANARY_BLOCKS:
        canary.block()
    return more, canary.entry()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.perf.child", description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("run", "imports", "empty"), default="run",
                   help="run: load and run; imports: only import the backend; empty: nothing (interpreter floor)")
    p.add_argument("--loader", help="the backend class, module:Class (Backend.loader_ref())")
    p.add_argument("--spec", help="JSON: what the backend loads (Backend.child_spec, written by the parent)")
    p.add_argument("--feeds", help=".npz with GRAPH::INPUT arrays (written by the parent)")
    p.add_argument("--calls", type=int, default=5, help="steady-state rounds after the first inference")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.mode != "empty" and not args.loader:
        print("harness.perf.child: --loader is required unless --mode empty", file=sys.stderr)
        return 2
    if args.mode == "run" and (not args.spec or not args.feeds):
        print("harness.perf.child: --spec and --feeds are required in run mode", file=sys.stderr)
        return 2
    result = run(args)
    sys.stdout.write(MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
