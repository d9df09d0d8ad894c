#!/usr/bin/env python
"""How closely a canary follows a model's speed here: block to block in one process, and process to process.

The unpaired gate reads a run's latency against the canary timed beside it (``harness.perf.canary``,
``harness.gate.judge``: each segment divided by the canary block before it; each fresh process's
level by the canary it timed). Dividing by a canary removes what the machine did to both only when
the two move together, at a slope of 1; where they do not, it adds the canary's own noise. This
script measures that for the canary the harness ships and for a model-shaped alternative, on a
real ONNX Runtime model, so the question "would another canary give the unpaired gate its power
back?" (docs/perf-gate.md, "Why the canary cannot close the gap here") is answered by numbers:

* ``model``: a 256->512->512->64 MLP (ReLU, batch 16) in ONNX Runtime, CPU, one intra-op thread:
  the size of ``scripts/bench_gate_power.py``'s model, about 0.2 ms a call here;
* ``canary``: the harness's canary (``harness.perf.canary.make_call``: a small float32 MLP in numpy
  of other widths than the model's);
* ``elementwise``: the canary it replaced (``numpy-elementwise-16k/1``: sine, multiply, exp and add
  on 16 Ki float64 values), kept here to be measured beside it;
* ``model-shaped``: the model's own layers in numpy (float32 matmuls and ReLU into preallocated
  buffers): the best a fixed canary could do for this one model, which no canary can be for
  every model.

Two scales, each in fresh processes of this script with ``OMP_NUM_THREADS`` and
``OPENBLAS_NUM_THREADS`` at 1:

* **blocks**: one process times ``--blocks`` rounds of a 15-call block of each workload in turn
  (``harness.perf.canary.SEGMENT_CANARY_CALLS``, the size of the gate's interleaved blocks);
* **processes**: ``--processes`` fresh processes, each timing ``--calls`` calls of each workload
  after a warm-up (the scale of the gate's between-process spread, ``harness.gate.processes``).

For each canary and scale it prints the correlation of the log medians with the model's, the
slope of the model's on the canary's (1 is what dividing assumes), and the spread (log SD) of the
model alone and of model / canary: a canary helps the gate only where the last is below the first.

    python scripts/bench_canary_match.py --blocks 400 --processes 14
    python scripts/bench_canary_match.py --blocks 400 --processes 14 --json canary-match.json

``HARNESS_BENCH_SMOKE=1``: 20 blocks, 3 processes of 20 calls (``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

try:
    import harness  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.perf import smoke  # noqa: E402
from harness.perf.canary import SEGMENT_CANARY_CALLS, WORKLOAD, make_call  # noqa: E402
from harness.perf.loop import time_calls  # noqa: E402

#: the model's layer widths and batch (the bench_gate_power MLP's shape)
WIDTHS = (256, 512, 512, 64)
BATCH = 16
WARMUP_CALLS = 30
CANARIES = ("canary", "elementwise", "model-shaped")
#: one thread for every pool a workload could start: the model's and the canaries' alike
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def layers(seed: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    """The MLP's input and weights, float32, deterministic."""
    rng = np.random.default_rng(seed)
    weights = [(rng.standard_normal((a, b)) * (1.0 / np.sqrt(a))).astype(np.float32)
               for a, b in zip(WIDTHS, WIDTHS[1:])]
    return rng.standard_normal((BATCH, WIDTHS[0])).astype(np.float32), weights


def model_call(workdir: Path) -> Callable[[], object]:
    """The MLP as an ONNX graph in ONNX Runtime (CPU, one intra-op thread, sequential)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    x, weights = layers()
    nodes, inits, name = [], [], "x"
    for i, w in enumerate(weights):
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [name, f"w{i}"], [f"m{i}"]))
        last = i == len(weights) - 1
        if not last:
            nodes.append(helper.make_node("Relu", [f"m{i}"], [f"h{i}"]))
        name = f"m{i}" if last else f"h{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, [BATCH, WIDTHS[-1]])], inits)
    path = workdir / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = {"x": x}
    return lambda: session.run(None, feed)


def numpy_mlp_call() -> Callable[[], float]:
    """The model's layers in numpy: matmuls and ReLU into preallocated buffers, no allocation per call."""
    x, weights = layers()
    outs = [np.empty((BATCH, w.shape[1]), np.float32) for w in weights]

    def call() -> float:
        h = x
        for i, (w, out) in enumerate(zip(weights, outs)):
            np.matmul(h, w, out=out)
            if i < len(weights) - 1:
                np.maximum(out, 0.0, out=out)
            h = out
        return float(h[0, 0])

    return call


def elementwise_call() -> Callable[[], float]:
    """The former canary (``numpy-elementwise-16k/1``): a chain of element-wise ops on 16 Ki float64 values."""
    x = np.linspace(0.0, 8.0, 16 * 1024)
    y, z = np.empty_like(x), np.empty_like(x)

    def call() -> float:
        np.sin(x, out=y)
        np.multiply(y, x, out=z)
        np.exp(np.negative(y, out=y), out=y)
        np.add(y, z, out=z)
        return float(z.sum())

    return call


def workloads(workdir: Path) -> dict[str, Callable[[], object]]:
    return {"model": model_call(workdir), "canary": make_call(), "elementwise": elementwise_call(),
            "model-shaped": numpy_mlp_call()}


def child(mode: str, count: int, calls: int) -> dict[str, list[float]]:
    """In a fresh process: ``blocks`` -- ``count`` rounds of a block of each workload in turn,
    each block's median; ``levels`` -- ``calls`` calls of each workload (order rotated by ``count``),
    each one's median."""
    with tempfile.TemporaryDirectory(prefix="canary-match-") as tmp:
        calls_of = workloads(Path(tmp))
        for _ in range(WARMUP_CALLS):
            for call in calls_of.values():
                call()
        names = list(calls_of)
        if mode == "blocks":
            out: dict[str, list[float]] = {name: [] for name in names}
            for _ in range(count):
                for name in names:
                    out[name].append(statistics.median(time_calls(calls_of[name], SEGMENT_CANARY_CALLS)))
            return out
        order = names[count % len(names):] + names[: count % len(names)]
        return {name: [statistics.median(time_calls(calls_of[name], calls))] for name in order}


def spawn(mode: str, count: int, calls: int) -> dict[str, list[float]]:
    done = subprocess.run([sys.executable, __file__, "--child", mode, "--count", str(count), "--calls", str(calls)],
                          capture_output=True, text=True, env={**os.environ, **ONE_THREAD})
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise SystemExit(f"timing process exited with {done.returncode}: {last}")
    result: dict[str, list[float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def match(model: list[float], canary: list[float]) -> dict[str, float]:
    """Correlation and slope of the log medians, and the spreads dividing would trade."""
    lm, lc = np.log(np.asarray(model)), np.log(np.asarray(canary))
    flat = float(np.std(lc)) == 0.0 or float(np.std(lm)) == 0.0
    return {
        "correlation": float("nan") if flat else float(np.corrcoef(lm, lc)[0, 1]),
        "slope": float("nan") if flat else float(np.polyfit(lc, lm, 1)[0]),
        "sd_model": float(np.std(lm, ddof=1)),
        "sd_canary": float(np.std(lc, ddof=1)),
        "sd_adjusted": float(np.std(lm - lc, ddof=1)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=400, help="rounds of blocks in one process (default 400)")
    parser.add_argument("--processes", type=int, default=14, help="fresh processes (default 14)")
    parser.add_argument("--calls", type=int, default=100, help="calls per workload in each fresh process (default 100)")
    parser.add_argument("--json", type=Path, help="write every median and the summary here")
    parser.add_argument("--child", choices=("blocks", "levels"), help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.count, args.calls)))
        return 0
    smoke.announce(smoke.shrink(args, blocks=20, processes=3, calls=20))
    if args.blocks < 3 or args.processes < 3 or args.calls < 1:
        print("--blocks and --processes must be at least 3 (a correlation needs them), --calls at least 1",
              file=sys.stderr)
        return 2
    if args.json is not None and not os.access(args.json.parent if str(args.json.parent) else Path("."), os.W_OK):
        print(f"--json {args.json}: its folder does not exist or is not writable", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    blocks = spawn("blocks", args.blocks, args.calls)
    levels: dict[str, list[float]] = {}
    for i in range(args.processes):
        for name, values in spawn("levels", i, args.calls).items():
            levels.setdefault(name, []).extend(values)
    scales = {f"blocks ({args.blocks} x {SEGMENT_CANARY_CALLS} calls, one process)": blocks,
              f"processes ({args.processes} x {args.calls} calls)": levels}
    print(f"model: ONNX Runtime MLP {'->'.join(map(str, WIDTHS))}, batch {BATCH}, one thread; canary: {WORKLOAD}; "
          f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} cores")
    print("medians (ms): " + ", ".join(f"{name} {statistics.median(v):.4f}" for name, v in levels.items()))
    print(f"{'scale':<42} {'canary':<12} {'corr':>6} {'slope':>6} {'sd model':>9} {'sd canary':>9} "
          f"{'sd model/canary':>15}  dividing")
    summary = {}
    for scale, data in scales.items():
        for name in CANARIES:
            m = match(data["model"], data[name])
            summary[f"{scale}: {name}"] = m
            verdict = "removes noise" if m["sd_adjusted"] < m["sd_model"] else "adds noise"
            print(f"{scale:<42} {name:<12} {m['correlation']:6.2f} {m['slope']:6.2f} {m['sd_model']:9.1%} "
                  f"{m['sd_canary']:9.1%} {m['sd_adjusted']:15.1%}  {verdict}")
    if args.json is not None:
        args.json.write_text(json.dumps({"blocks": blocks, "processes": levels, "summary": summary}, indent=1) + "\n",
                             encoding="utf-8")
    return smoke.finish(0)


if __name__ == "__main__":
    sys.exit(main())
