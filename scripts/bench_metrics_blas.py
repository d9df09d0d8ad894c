#!/usr/bin/env python
"""The element metrics right after a runtime call: BLAS reductions against ufunc sums, side by side.

The closed loop of a check compares every decode step's caches the moment the runtime returns
them. The metrics once took their cosine and relative L2 from ``np.dot`` and whole-array
``np.linalg.norm`` -- numpy's OpenBLAS, which wakes its own threads for arrays of tens of
thousands of elements and then waits for a core that ONNX Runtime's intra-op pool is still
spinning on after the call (docs/pitfalls.md #23). This script reproduces that moment: each round
runs an ONNX Runtime session (two intra-op threads, spinning as by default), then times one
comparison of a cache-sized pair of arrays, alternately with

* ``blas``: the former formulas (``np.dot`` and ``np.linalg.norm`` of the whole array), and
* ``ufunc``: the harness's metrics as they are (``harness.metrics.numeric.compare_arrays`` asked
  for the closed loop's two metrics, ``harness.judge.cached_decoding.PRESENT_METRICS``),

and prints each one's median, 90th percentile, worst and total, the ratio of the totals, and
the largest difference between the two cosines (the same number, to rounding).

    python scripts/bench_metrics_blas.py --rounds 1000
    python scripts/bench_metrics_blas.py --rounds 1000 --elements 70000 --threads 1

``--threads 1`` is the control: without a second runtime thread spinning, BLAS has a core to
itself and the two read alike. ``HARNESS_BENCH_SMOKE=1``: 20 rounds.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from harness.judge.cached_decoding import PRESENT_METRICS
from harness.metrics.numeric import compare_arrays
from harness.perf import smoke


def blas_metrics(ref: np.ndarray, got: np.ndarray) -> float:
    """The former cosine and relative L2 (``np.dot``, whole-array ``np.linalg.norm``); returns the cosine."""
    r, g = ref.astype(np.float64).ravel(), got.astype(np.float64).ravel()
    err = np.abs(g - r)
    scale = float(np.max(np.abs(r)))
    _ = float(np.linalg.norm(err / scale) / np.linalg.norm(r / scale))
    rn, gn = r / scale, g / float(np.max(np.abs(g)))
    return float(np.dot(rn, gn) / (np.linalg.norm(rn) * np.linalg.norm(gn)))


def ufunc_metrics(ref: np.ndarray, got: np.ndarray) -> float:
    """The harness's metrics as the closed loop asks for them; returns the cosine."""
    return compare_arrays(ref, got, only=PRESENT_METRICS).metrics["cosine"]


def runtime_call(workdir: Path, threads: int) -> Callable[[], object]:
    """One call of a 3-layer 512-wide MLP in ONNX Runtime (intra-op pool of ``threads``, spinning)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, name = [], [], "x"
    for i in range(3):
        inits.append(numpy_helper.from_array(rng.standard_normal((512, 512)).astype(np.float32) * 0.05, f"w{i}"))
        nodes += [helper.make_node("MatMul", [name, f"w{i}"], [f"m{i}"]), helper.make_node("Relu", [f"m{i}"], [f"y{i}"])]
        name = f"y{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 512])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, [64, 512])], inits)
    path = workdir / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = {"x": rng.standard_normal((64, 512)).astype(np.float32)}
    return lambda: session.run(None, feed)


def summary(ms: list[float]) -> str:
    ordered = sorted(ms)
    p90 = ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]
    return (f"median {statistics.median(ms):7.3f} ms  p90 {p90:7.3f} ms  worst {max(ms):7.2f} ms  "
            f"total {sum(ms) / 1e3:6.3f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1000, help="comparisons per formula (default 1000)")
    parser.add_argument("--elements", type=int, default=40000,
                        help="floats per compared array (default 40000: a cache of the closed loop here held 20-70 k)")
    parser.add_argument("--threads", type=int, default=2, help="ONNX Runtime intra-op threads (default 2)")
    args = parser.parse_args(argv)
    smoke.announce(smoke.shrink(args, rounds=20))
    if args.rounds < 1 or args.elements < 1 or args.threads < 1:
        print("--rounds, --elements and --threads must be at least 1", file=sys.stderr)
        return 2
    rng = np.random.default_rng(1)
    ref = rng.standard_normal(args.elements).astype(np.float32)
    got = (ref + rng.standard_normal(args.elements).astype(np.float32) * 1e-4).astype(np.float32)
    formulas = {"blas": blas_metrics, "ufunc": ufunc_metrics}
    times: dict[str, list[float]] = {name: [] for name in formulas}
    cosines: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-blas-") as tmp:
        call = runtime_call(Path(tmp), args.threads)
        for _ in range(5):
            call()
        for i in range(args.rounds):
            order = list(formulas) if i % 2 == 0 else list(reversed(formulas))
            for name in order:
                call()  # the runtime's pool is spinning again when the comparison starts
                start = time.perf_counter_ns()
                cosines[name] = formulas[name](ref, got)
                times[name].append((time.perf_counter_ns() - start) / 1e6)
    print(f"{args.rounds} comparisons of {args.elements} floats each, right after an ONNX Runtime call "
          f"({args.threads} intra-op thread(s)); alternated")
    for name, ms in times.items():
        print(f"  {name:<6} {summary(ms)}")
    ratio = sum(times["blas"]) / sum(times["ufunc"])
    print(f"blas / ufunc total: {ratio:.2f}x; cosine difference {abs(cosines['blas'] - cosines['ufunc']):.1e}")
    return smoke.finish(0, verdicts=())


if __name__ == "__main__":
    sys.exit(main())
