"""Where a timing loop's tail comes from: the candidate causes, measured side by side.

In one process holding the harness's usual heap (the torch model, tokenizer, references),
on one ONNX Runtime session and one batch, interleaved blocks (rotating order) of:

* ``bare``: ``t = perf_counter(); session.run(None, feeds); ...`` with no collection;
* ``collect-then-time``: the loop as it was before the settle calls (``perf/loop.py``) -- ``gc.collect()`` right before
  the first timed call;
* ``collect-freeze``: the loop of version 2 -- collect and freeze, then settle calls, then time;
* ``harness``: ``time_calls`` today (loop version 3: freeze without collecting, then settle
  calls, then time);
* ``gc-off``: ``time_calls`` with the collector disabled while timing;
* ``io-binding``: ``time_calls`` on ``run_with_iobinding`` with bound inputs (outputs still
  allocated by the runtime, but no per-call feed dict or output list).

For each it prints p50/p90/p99, the number of collections that ran inside timed blocks
(``gc.callbacks``), and the median latency of the first five calls of a block against the
rest: a slow first call after a collection is cache misses, and with blocks of 100 calls it
sits exactly at p99. Run: ``python scripts/bench_tail_sources.py [--model bert-tiny]``.

``HARNESS_BENCH_SMOKE=1``: bert-tiny, 2 rounds of 10 calls (``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from typing import Callable

import numpy as np


def main() -> int:  # noqa: C901 -- one closure per loop measured, side by side
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="encoder-custom")
    parser.add_argument("--rounds", type=int, default=40, help="interleaved rounds (default 40)")
    parser.add_argument("--calls", type=int, default=100, help="calls per block (default 100)")
    args = parser.parse_args()
    from harness.perf import smoke

    smoke.announce(smoke.shrink(args, model="bert-tiny", rounds=2, calls=10))

    from harness.core import Precision, RunOptions, Settings, Variant
    from harness.families.shaped_feeds import shaped_feeds
    from harness.judge.workspace import Workspace
    from harness.perf.measure import time_calls, timed_call
    from harness.runners import PROVIDERS
    from harness.runners.base import GraphRef

    ws = Workspace(RunOptions(models=[args.model], settings=Settings(threads=1)))
    model = ws.model(args.model)
    family = ws.family(model)
    graph = family.graphs(model)[0]
    variant = Variant(args.model, Precision.FP32, PROVIDERS["ort_cpu"])
    runner = ws.backend(variant, model).load(GraphRef(model, family, graph, variant))
    feeds = shaped_feeds(model, family, graph, ws.texts(model), 1, 32)
    session, prepared = runner.session, runner.prepare(feeds)  # type: ignore[attr-defined]
    binding = session.io_binding()
    for name, value in prepared.items():
        binding.bind_cpu_input(name, value)
    for out in session.get_outputs():
        binding.bind_output(out.name)

    def bare(n: int) -> list[float]:
        run, clock, out = session.run, time.perf_counter, []
        for _ in range(n):
            t = clock()
            run(None, prepared)
            out.append((clock() - t) * 1000.0)
        return out

    def collect_then_time(n: int) -> list[float]:
        gc.collect()
        return bare(n)

    def collect_freeze(n: int) -> list[float]:
        gc.collect()
        return time_calls(timed_call(runner, feeds), n, 0)

    def harness(n: int) -> list[float]:
        return time_calls(timed_call(runner, feeds), n, 0)

    def gc_off(n: int) -> list[float]:
        gc.disable()
        try:
            return time_calls(timed_call(runner, feeds), n, 0)
        finally:
            gc.enable()

    def io_binding(n: int) -> list[float]:
        return time_calls(lambda: session.run_with_iobinding(binding), n, 0)

    engines: dict[str, Callable[[int], list[float]]] = {
        "bare": bare, "collect-then-time": collect_then_time, "collect-freeze": collect_freeze, "harness": harness,
        "gc-off": gc_off, "io-binding": io_binding}
    timing = {"on": False}
    collections = dict.fromkeys(engines, 0)
    current = {"name": ""}

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and timing["on"]:
            collections[current["name"]] += 1

    for _ in range(200):
        session.run(None, prepared)
    samples: dict[str, list[float]] = {k: [] for k in engines}
    gc.callbacks.append(on_gc)
    names = list(engines)
    load_before = os.getloadavg()[0]
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            current["name"] = name
            timing["on"] = name == "bare"  # the others collect on purpose before timing; count bare's only
            samples[name] += engines[name](args.calls)
            timing["on"] = False
    gc.callbacks.remove(on_gc)
    print(f"{args.model}, ORT 1 thread, {args.rounds} rounds x {args.calls} calls, {len(gc.get_objects())} "
          f"GC-tracked objects, load avg {load_before:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"{'loop':18s} {'p50':>8s} {'p90':>8s} {'p99':>8s}   first five calls of a block / rest (medians)")
    for name, values in samples.items():
        arr = np.asarray(values)
        blocks = arr.reshape(-1, args.calls)
        rest = float(np.median(blocks[:, 5:]))
        first = " ".join(f"{float(np.median(blocks[:, i])) / rest:.2f}" for i in range(5))
        print(f"{name:18s} {np.percentile(arr, 50):8.4f} {np.percentile(arr, 90):8.4f} {np.percentile(arr, 99):8.4f}   "
              f"{first}")
    print(f"automatic collections inside bare's timed blocks: {collections['bare']}")
    runner.close()
    return 0


if __name__ == "__main__":
    from harness.perf import smoke

    sys.exit(smoke.finish(main(), verdicts=()))
