"""Measurement fidelity: does the harness report the latency a bare ``session.run`` loop sees?

For an ONNX Runtime session, three timers take turns in one pytest process, on the same
session and feeds, in interleaved blocks (rotating order):

* ``bare``: ``t = perf_counter(); session.run(None, feeds); t = perf_counter() - t``
* ``harness``: the harness's own loop (``time_calls`` on ``timed_call``), which times every
  latency metric but the first;
* ``pytest-benchmark``: ``benchmark.pedantic(..., iterations=1)`` through the harness's
  ``BenchmarkEngine``, which times the primary ``latency_ms`` in the perf suite.

It prints each engine's p50, p90 and p99 divided by the bare loop's, with a 95%
block-bootstrap interval (blocks = the interleaved rounds); the target is 0.97-1.03 for
every statistic -- the tail too, since the gate's mission is p99: the harness's own work
(bookkeeping, GC of its large heap) must not show up in the tail. Run:
``python scripts/bench_fidelity.py [--models ...] [--stats p50,p90,p99]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap
from pathlib import Path

ENGINES = ("bare", "harness", "pytest-benchmark")

TEST_MODULE = '''
import json, os, time
import pytest

from harness.core import PROVIDERS, Precision, RunOptions, Settings, Variant
from harness.perf.feeds import shaped_feeds
from harness.perf.measure import BenchmarkEngine, HarnessEngine, timed_call
from harness.judge.workspace import Workspace

CFG = json.loads(os.environ["FIDELITY_CONFIG"])
SAMPLES = {}


@pytest.fixture(scope="module")
def target():
    ws = Workspace(RunOptions(models=[CFG["model"]], settings=Settings(threads=CFG["threads"])))
    model = ws.model(CFG["model"])
    family = ws.family(model)
    graph = family.graphs(model)[0]
    variant = Variant(CFG["model"], Precision.FP32, PROVIDERS["ort_cpu"])
    runner = ws.backend(variant, model).load(model, family, graph, variant)
    feeds = shaped_feeds(model, family, graph, ws.texts(model), CFG["batch_size"], CFG["seq_len"])
    yield runner, feeds
    with open(CFG["out"], "w") as fh:
        json.dump(SAMPLES, fh)
    runner.close()


def bare_block(session, feeds, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        session.run(None, feeds)
        out.append((time.perf_counter() - t) * 1000.0)
    return out


@pytest.mark.parametrize("block", CFG["blocks"])
def test_block(block, target, request):
    runner, feeds = target
    engine, n, warm = block.split(":")[0], CFG["calls"], block.endswith(":warmup")
    if engine == "bare":
        samples = bare_block(runner.session, runner.prepare(feeds), n)
    elif engine == "harness":
        samples = HarnessEngine()(timed_call(runner, feeds), n, 0)
    else:
        samples = BenchmarkEngine(request.getfixturevalue("benchmark"))(timed_call(runner, feeds), n, 0)
    if not warm:
        SAMPLES.setdefault(engine, []).extend(samples)
'''


def block_ids(rounds: int) -> list[str]:
    from harness.perf.bench import round_order

    ids = [f"{e}:w{i}:warmup" for i, e in enumerate(ENGINES)]
    for r in range(rounds):
        ids += [f"{e}:r{r}" for e in round_order(list(ENGINES), r)]
    return ids


def measure(model: str, args: argparse.Namespace, index: int) -> dict[str, list[float]]:
    import pytest

    with tempfile.TemporaryDirectory() as tmp:
        module = Path(tmp) / f"test_fidelity_blocks_{index}.py"  # unique: one pytest session per model, one process
        module.write_text(textwrap.dedent(TEST_MODULE))
        out = Path(tmp) / "samples.json"
        os.environ["FIDELITY_CONFIG"] = json.dumps({
            "model": model, "threads": args.threads, "batch_size": args.batch_size, "seq_len": args.seq_len,
            "calls": args.calls, "blocks": block_ids(args.rounds), "out": str(out)})
        code = pytest.main([str(module), "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--benchmark-disable-gc",
                            "--benchmark-quiet", f"--rootdir={tmp}", "-W", "ignore"])
        if code != 0:
            raise SystemExit(f"fidelity blocks failed for {model} (pytest exit {code})")
        return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["encoder-custom", "bert-tiny"])
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds (default 30)")
    parser.add_argument("--calls", type=int, default=100, help="calls per block (default 100)")
    parser.add_argument("--threads", type=int, default=1, help="ORT intra-op threads (default 1)")
    parser.add_argument("--stats", default="p50,p90,p99", help="percentiles to compare (default p50,p90,p99)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    import numpy as np

    from harness.perf.stats import bootstrap_ratio_ci

    stats = [x.strip() for x in args.stats.split(",") if x.strip()]
    rows = []
    for index, model in enumerate(args.models):
        samples = measure(model, args, index)
        base = np.asarray(samples["bare"])
        for engine in ENGINES[1:]:
            cand = np.asarray(samples[engine])
            for stat in stats:
                q = float(stat.lstrip("p"))  # a float statistic is a percentile (harness.perf.stats.Stat)
                ratio, lo, hi = bootstrap_ratio_ci(base, cand, q, block_size=args.calls)
                rows.append({"model": model, "engine": engine, "stat": stat, "bare_ms": float(np.percentile(base, q)),
                             "engine_ms": float(np.percentile(cand, q)),
                             "ratio": ratio, "ci": [lo, hi], "n": int(cand.size),
                             "within_0.97_1.03": 0.97 <= ratio <= 1.03})
    print(f"\nfidelity: each engine's statistic / the bare session.run loop's (batch {args.batch_size} x "
          f"{args.seq_len}, {args.rounds} rounds x {args.calls} calls interleaved, {args.threads} ORT thread(s), "
          f"load avg {os.getloadavg()[0]:.2f})")
    print(f"{'model':16s} {'engine':17s} {'stat':>4s} {'bare':>10s} {'engine':>10s} {'ratio':>7s}  95% CI")
    for row in rows:
        lo, hi = row["ci"]
        print(f"{row['model']:16s} {row['engine']:17s} {row['stat']:>4s} {row['bare_ms']:8.4f}ms {row['engine_ms']:8.4f}ms "
              f"{row['ratio']:7.4f}  [{lo:.4f}, {hi:.4f}]{'' if row['within_0.97_1.03'] else '  OUTSIDE 0.97-1.03'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["within_0.97_1.03"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
