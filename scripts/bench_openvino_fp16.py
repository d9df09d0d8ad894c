"""Which file OpenVINO's FP16 variant should compile: measured side by side in one run.

    python scripts/bench_openvino_fp16.py --models bert-tiny encoder-custom-12x768 --threads 1

For the first graph of each model, three ways to an OpenVINO "FP16" are compiled and judged on
the same corpus batches against the PyTorch FP32 reference, then timed in interleaved blocks
(``harness.perf.bench``) at batch 1 x ``--seq`` tokens:

* ``fp32-onnx+f16``: the FP32 artifact, ``INFERENCE_PRECISION_HINT=f16`` (what ``ov_cpu`` fp16 runs);
* ``fp16-onnx+f16``: the FP16 artifact (onnxconverter-common, FP32 I/O), f16 hint;
* ``fp16-onnx+f32``: the FP16 artifact, f32 hint (FP16 weights upcast: FP32 compute).

Printed per model: norm_max_abs and max_abs of the output vs PyTorch FP32, the heavy layers'
runtime precisions, p50 latency and the ratios to ``fp32-onnx+f16`` with 95% CIs.

``HARNESS_BENCH_SMOKE=1``: bert-tiny, 8 tokens, 2 rounds x 2 calls (``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OPTIONS = {"fp32-onnx+f16": ("fp32", "f16"), "fp16-onnx+f16": ("fp16", "f16"), "fp16-onnx+f32": ("fp16", "f32")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["bert-tiny", "encoder-custom-12x768"])
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    from harness.perf import smoke

    smoke.announce(smoke.shrink(args, models=["bert-tiny"], seq=8, rounds=2, calls=2))

    import numpy as np

    from harness.core import Precision, RunOptions, Settings
    from harness.export.artifacts import onnx_artifact
    from harness.families.shaped_feeds import shaped_feeds
    from harness.judge.numeric import run_graph_parity
    from harness.judge.workspace import Workspace
    from harness.perf import bench
    from harness.perf.measure import time_calls
    from harness.runners.openvino_runner import OvGraphRunner, runtime_precisions

    ws = Workspace(RunOptions(models=list(args.models), settings=Settings(samples=16, batch_size=8)))
    for name in args.models:
        model = ws.model(name)
        family = ws.family(model)
        graph = family.graphs(model)[0]
        batches = ws.refs.parity_batches(model, family, graph)
        files = {prec: onnx_artifact(model, family, graph, Precision(prec), ws.runtimes.settings_for(model),
                                          ws.runtimes.artifacts).path()
                 for prec in ("fp32", "fp16")}
        runners = {label: OvGraphRunner(str(files[src]), hint, args.threads) for label, (src, hint) in OPTIONS.items()}
        feeds = shaped_feeds(model, family, graph, ws.texts(model), 1, args.seq)
        print(f"\n{name} ({graph.name}; parity on {sum(len(b[0][graph.input_names[0]]) for b in batches)} sentences)")
        for label, runner in runners.items():
            outs = run_graph_parity(runner, graph, batches, Precision.FP16, {})
            first = outs[0]
            print(f"  {label:15s} {first.output}: norm_max_abs {first.metrics['norm_max_abs']:.3e} "
                  f"max_abs {first.metrics['max_abs']:.3e}; runtime {runtime_precisions(runner.compiled)}")
        calls = {label: runner.timed_call(feeds) for label, runner in runners.items()}
        blocks = {label: (lambda n, c=call: time_calls(c, n)) for label, call in calls.items()}
        samples = bench.interleave(blocks, args.rounds, args.calls, warmup_rounds=1)
        base = "fp32-onnx+f16"
        for label in OPTIONS:
            med = float(np.median(samples[label]))
            line = f"  {label:15s} p50 {med:8.3f} ms"
            if label != base:
                r = bench.latency_ratio(name, label, samples, base, label, block_size=args.calls)
                line += f"   vs {base}: {r.ratio:.3f} [{r.lo:.3f}, {r.hi:.3f}]"
            print(line)
        for runner in runners.values():
            runner.close()
    return 0


if __name__ == "__main__":
    from harness.perf import smoke

    sys.exit(smoke.finish(main(), verdicts=()))
