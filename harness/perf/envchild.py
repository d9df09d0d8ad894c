"""A timing child for environment-paired comparisons: one file, blocks of timed calls on request.

Run **by path** with another environment's interpreter (``/venv-new/bin/python envchild.py ...``):
it puts this harness's source tree on its own path and imports only what a fresh cold-start child
imports (``harness/perf/child.py``): the backend module ``--loader`` names, which imports numpy and
its runtime, and the harness's standard-library timing loop (``harness.perf.loop``). So the other
environment needs only numpy and the runtime being compared, none of the harness's dependencies;
the file is loaded by the backend's own ``child_load`` and timed through its runner's
``timed_call``, as the perf suite times it, on any backend that runs files (ONNX Runtime, OpenVINO).

Protocol (one JSON object per line): the child answers ``{"ready": true, "versions": {...},
"python": version, "settings": {...}}`` once the file is loaded and its warmup calls ran; then, for
each line ``N`` it reads, it times N calls with ``time_calls`` and answers ``{"samples_ms": [...]}``.
An empty line or EOF ends it. Errors go to stderr with exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

_HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "__main__" and sys.path and os.path.abspath(sys.path[0]) == _HERE:
    sys.path[0] = str(Path(_HERE).parents[1])  # run by path: the harness's tree, not harness/perf, on the path

#: runtimes whose version a ready line reports, when the backend imported them
RUNTIMES = ("onnxruntime", "openvino", "tensorrt", "torch")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loader", required=True, help="the backend class, module:Class (Backend.loader_ref())")
    parser.add_argument("--spec", required=True, help="JSON: what the backend loads (Backend.file_child_spec)")
    parser.add_argument("--feeds", required=True, help=".npz with one array per graph input")
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args(argv)
    import numpy as np

    from harness.perf.child import backend_class  # deferred: a by-path child imports late (see the module docstring)
    from harness.perf.loop import time_calls  # deferred: a by-path child imports late (see the module docstring)
    from harness.runners.base import ChildSpec

    spec = ChildSpec.from_dict(json.loads(args.spec))
    try:
        backend = backend_class(args.loader)
        backend.child_imports()
        loaded = backend.child_load(spec)
    except Exception as exc:  # noqa: BLE001 - reported by the parent as one line
        print(f"{', '.join(map(str, spec.files().values()))}: cannot load it ({str(exc).splitlines()[0][:200]})",
              file=sys.stderr)
        return 2
    with np.load(args.feeds) as data:
        feeds = {name: data[name] for name in data.files}
    graph = next(iter(loaded.calls))
    runner = loaded.runners.get(graph)
    call = runner.timed_call(feeds) if runner is not None else (lambda: loaded.calls[graph](feeds))
    for _ in range(args.warmup):
        call()
    versions = {name: str(getattr(sys.modules[name], "__version__", "?")) for name in RUNTIMES if name in sys.modules}
    ready = {"ready": True, "versions": versions, "python": sys.version.split()[0], "settings": loaded.settings,
             **versions}
    print(json.dumps(ready, default=str), flush=True)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            break
        print(json.dumps({"samples_ms": time_calls(call, int(line))}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
