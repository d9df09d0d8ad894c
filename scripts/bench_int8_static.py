"""Static INT8 (QDQ) against dynamic INT8 and FP32 on the zoo encoders: accuracy and latency.

For each model, in one process, on ONNX Runtime's CPU provider: the numeric parity of the
FP32, dynamic-INT8 and static-INT8 artifacts (each calibration method) against PyTorch FP32 on
the judged corpus sentences (calibration uses the sentences after them), and the latency of
each artifact's ``session.run`` on one batch, timed in interleaved rounds (every variant once
per round, order rotating) so machine noise falls on all alike. Prints per-variant accuracy
and p50 latency, and the p50 ratio to FP32 measured in the same rounds.

Run: ``python scripts/bench_int8_static.py [--models bert-tiny minilm-l6 ...] [--rounds 200]``.

``HARNESS_BENCH_SMOKE=1``: bert-tiny, 2 sentences, 2 calibration sentences, 2 timed calls, batch 2 x
8 tokens (``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["bert-tiny", "encoder-custom", "minilm-l6"])
    parser.add_argument("--samples", type=int, default=32, help="judged corpus sentences")
    parser.add_argument("--calibration-samples", type=int, default=32)
    parser.add_argument("--methods", nargs="+", default=["minmax", "entropy", "percentile"])
    parser.add_argument("--rounds", type=int, default=200, help="timed calls per variant")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    from harness.perf import smoke

    smoke.announce(smoke.shrink(args, models=["bert-tiny"], samples=2, calibration_samples=2, rounds=2, batch_size=2, seq_len=8))

    from harness.case.pipeline import numeric_parity
    from harness.core import Precision, Variant
    from harness.families.shaped_feeds import shaped_feeds
    from harness.judge.workspace import Workspace
    from harness.runners import PROVIDERS
    from harness.runners.base import GraphRef
    from harness.settings.resolve import build_options

    provider = PROVIDERS["ort_cpu"]
    for name in args.models:
        rows: list[tuple[str, dict[str, float], object]] = []
        for label, precision, method in ([("fp32", Precision.FP32, "minmax"), ("int8-dynamic", Precision.INT8, "minmax")]
                                         + [(f"int8-static/{m}", Precision.INT8_STATIC, m) for m in args.methods]):
            options = build_options(models=[name], samples=args.samples, threads=args.threads,
                                    batch_size=args.batch_size, int8_calibration=method,
                                    int8_calibration_samples=args.calibration_samples)
            ws = Workspace(options)
            variant = Variant(name, precision, provider)
            result = numeric_parity(ws, variant)
            model = ws.model(name)
            family = ws.family(model)
            graph = family.graphs(model)[0]
            runner = ws.backend(variant, model).load(GraphRef(model, family, graph, variant))
            feeds = shaped_feeds(model, family, graph, ws.texts(model), args.batch_size, args.seq_len)
            metrics = {k.split(".", 2)[-1]: v for k, v in result.metrics().items()
                       if k.split(".")[1] != "artifact" and k.rsplit(".", 1)[-1] in
                       ("norm_max_abs", "cosine", "top1_agreement", "embedding_cosine")}
            size = sum(int(a["bytes"]) for a in result.artifacts.values())
            metrics["MB"] = size / 1e6
            rows.append((label, metrics, runner.timed_call(feeds)))
        samples: dict[str, list[float]] = {label: [] for label, _, _ in rows}
        for _ in range(5):  # warmup
            for _, _, call in rows:
                call()  # type: ignore[operator]
        for r in range(args.rounds):
            order = rows[r % len(rows):] + rows[: r % len(rows)]
            for label, _, call in order:
                start = time.perf_counter_ns()
                call()  # type: ignore[operator]
                samples[label].append((time.perf_counter_ns() - start) / 1e6)
        base = statistics.median(samples["fp32"])
        print(f"\n{name}: batch {args.batch_size} x {args.seq_len} tokens, {args.threads} thread(s), "
              f"{args.rounds} interleaved rounds; parity on {args.samples} sentences, calibration on the next "
              f"{args.calibration_samples}")
        print(f"{'variant':24} {'p50 ms':>8} {'vs fp32':>8} {'MB':>7}  accuracy vs PyTorch FP32")
        for label, metrics, _ in rows:
            p50 = statistics.median(samples[label])
            acc = ", ".join(f"{k} {v:.4g}" for k, v in metrics.items() if k != "MB")
            print(f"{label:24} {p50:8.3f} {p50 / base:8.2f} {metrics['MB']:7.2f}  {acc}")
    return 0


if __name__ == "__main__":
    from harness.perf import smoke

    raise SystemExit(smoke.finish(main(), verdicts=()))
