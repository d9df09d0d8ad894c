"""A timing child for environment-paired comparisons: one ONNX file, blocks of timed calls on request.

Run **by path** with another environment's interpreter (``/venv-new/bin/python envchild.py ...``):
it imports only the standard library, numpy and onnxruntime, never ``harness``, so the other
environment needs nothing of the harness installed -- only the runtime being compared.

Protocol (one JSON object per line): the child answers ``{"ready": true, "onnxruntime": version,
"python": version, "providers": [...]}`` once the session exists and its warmup calls ran; then,
for each line ``N`` it reads, it times N calls (each alone, ``perf_counter_ns``, GC paused) and
answers ``{"samples_ms": [...]}``. An empty line or EOF ends it. Errors go to stderr with exit 2.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("feeds", help=".npz with one array per graph input")
    parser.add_argument("--provider", default="CPUExecutionProvider")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args(argv)
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if args.threads:
        options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        session = ort.InferenceSession(args.model, options, providers=[args.provider])
    except Exception as exc:  # noqa: BLE001 - reported by the parent as one line
        print(f"{args.model}: onnxruntime {ort.__version__} cannot open it ({str(exc).splitlines()[0][:200]})",
              file=sys.stderr)
        return 2
    with np.load(args.feeds) as data:
        feeds = {name: data[name] for name in data.files}
    run = session.run
    for _ in range(args.warmup):
        run(None, feeds)
    ready = {"ready": True, "onnxruntime": ort.__version__, "python": sys.version.split()[0],
             "providers": session.get_providers()}
    print(json.dumps(ready), flush=True)
    clock = time.perf_counter_ns
    for line in sys.stdin:
        line = line.strip()
        if not line:
            break
        n = int(line)
        out = [0] * n
        gc.collect()
        gc.disable()
        try:
            for i in range(n):
                start = clock()
                run(None, feeds)
                out[i] = clock() - start
        finally:
            gc.enable()
        print(json.dumps({"samples_ms": [ns / 1e6 for ns in out]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
