#!/usr/bin/env python
"""Peak memory of dynamic INT8 quantisation: onnxruntime's quantizer as shipped vs the harness's
``quantize_int8`` (the same call inside ``lean_shape_reload``), side by side in one run.

Builds a synthetic FP32 ONNX graph of ``--layers`` MatMul+Relu blocks with ``--width``² random
weights each (stored with external data, as a large export is), then quantises it twice, each in
a fresh process, and prints each process's peak RSS, the part above the imports, that part over
the FP32 weight bytes, the ratio between the two, and whether the two INT8 artifacts are
byte-identical (they must be: only when the weights are copied changes).

    python scripts/bench_int8_memory.py                    # 8 x 4096² = 0.5 GB of weights
    python scripts/bench_int8_memory.py --layers 16 --width 6144   # 2.4 GB

Linux only (the peak is the kernel's ``VmHWM`` of each child).

``HARNESS_BENCH_SMOKE=1``: 1 layer, 64 wide (``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys
from pathlib import Path
def hwm():  # VmHWM, not ru_maxrss: exec carries the parent's ru_maxrss over (docs/pitfalls.md)
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
import onnx, onnxruntime.quantization  # the floor: what both processes import
import harness.export.int8
floor = hwm()
src, out, how = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
out.mkdir(parents=True, exist_ok=True)
if how == "onnxruntime":
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(str(src), str(out / "model.onnx"), weight_type=QuantType.QInt8, use_external_data_format=True)
else:
    from harness.export.int8 import quantize_int8
    quantize_int8(src, out, external_data="always")
peak = hwm()
print(json.dumps({"floor": floor, "peak": peak}))
"""


def build(path: Path, layers: int, width: int) -> int:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width), dtype=np.float32) / np.sqrt(width)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]), helper.make_node("Relu", [f"m{i}"], [f"r{i}"])]
        x = f"r{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", width])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["b", width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx.data")
    return layers * width * width * 4


def digest(directory: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(directory.iterdir()):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=4096)
    args = parser.parse_args()
    from harness.perf import smoke

    smoke.announce(smoke.shrink(args, layers=1, width=64))
    with tempfile.TemporaryDirectory(prefix="bench-int8-mem-") as tmp:
        root = Path(tmp)
        src = root / "fp32" / "model.onnx"
        src.parent.mkdir()
        weights = build(src, args.layers, args.width)
        print(f"FP32 weights: {weights / 1e9:.2f} GB ({args.layers} x {args.width}²), external data")
        rows = {}
        for how in ("onnxruntime", "harness"):
            out = root / how
            done = subprocess.run([sys.executable, "-c", CHILD, str(src), str(out), how], check=True,
                                  capture_output=True, text=True)
            numbers = json.loads(done.stdout.strip().splitlines()[-1])
            above = numbers["peak"] - numbers["floor"]
            rows[how] = above
            print(f"{how:12s} peak RSS {numbers['peak'] / 1e9:6.2f} GB  above imports {above / 1e9:6.2f} GB  "
                  f"= {above / weights:.2f}x the FP32 weights   artifact {digest(out)}")
        identical = digest(root / "onnxruntime") == digest(root / "harness")
        print(f"harness / onnxruntime (above imports): {rows['harness'] / rows['onnxruntime']:.2f}; "
              f"artifacts byte-identical: {identical}")
        return 0 if identical else 1


if __name__ == "__main__":
    from harness.perf import smoke

    raise SystemExit(smoke.finish(main(), verdicts=()))
