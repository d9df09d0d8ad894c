#!/usr/bin/env python
"""Served vs in-process: latency, throughput and parity of the same artifact, side by side in one run.

For each model (default bert-tiny and encoder-custom, the TransformerEncoder) the harness's FP32
ONNX artifact is served by a real MLServer on 127.0.0.1 (tests/serving/: MLServer from its own
venv, ``HARNESS_MLSERVER`` or ``.mlserver-venv``; ONNX Runtime CPU, one thread) and opened
in-process with ONNX Runtime (one thread). Then, at each concurrency level (default 1, 4, 16):

* served: the harness's load sweep (``harness.serving.sweep``: N workers, one request in flight
  each, windows until p50 and throughput are stable or the step budget ends);
* in-process: N threads calling ``session.run`` on one shared session for the same time.

Both use batch 1 x 32 tokens. Parity: ``harness check`` on the file and on the endpoint, each
against PyTorch FP32 (norm_max_abs and cosine of the logits), and the endpoint's concurrency
check. Prints one table; ``--json`` writes the numbers. Timings depend on the machine's load:
say how loaded it was when quoting them.

    python scripts/bench_serving.py [--models bert-tiny encoder-custom] [--concurrency 1 4 16]

``HARNESS_BENCH_SMOKE=1``: bert-tiny, concurrency 1 and 2, 0.5 s a step (``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def in_process(path: Path, feeds: dict[str, np.ndarray], concurrency: int, seconds: float) -> dict[str, float]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    for _ in range(5):
        session.run(None, feeds)
    samples: list[float] = []
    lock, stop = threading.Lock(), threading.Event()

    def work() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            session.run(None, feeds)
            ms = (time.perf_counter() - t) * 1000
            with lock:
                samples.append(ms)

    threads = [threading.Thread(target=work) for _ in range(concurrency)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)  # a measurement window of fixed length, as the sweep's windows are
    stop.set()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    arr = np.asarray(samples)
    return {"p50": float(np.percentile(arr, 50)), "p90": float(np.percentile(arr, 90)),
            "p99": float(np.percentile(arr, 99)), "throughput": len(arr) / wall, "n": int(arr.size)}


def check_metrics(argv: list[str], out: Path) -> dict[str, dict[str, float]]:
    from harness.cli import main

    main(["check", *argv, "--samples", "16", "--batch-size", "8", "--out", str(out)])
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    found = {}
    for r in records:
        logits = {k.rsplit(".", 1)[1]: v for k, v in r["metrics"].items() if ".logits." in k}
        found[r["suite"]] = {"verdict": r["verdict"], "norm_max_abs": logits.get("norm_max_abs"),
                             "cosine": logits.get("cosine")}
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["bert-tiny", "encoder-custom"])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--step-budget", type=float, default=8.0)
    parser.add_argument("--protocol", choices=("http", "grpc"), default="http",
                        help="the transport of the served side (MLServer's HTTP carries JSON tensors; gRPC binary)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    from harness.perf import smoke

    smoke.announce(smoke.shrink(args, models=["bert-tiny"], concurrency=[1, 2], step_budget=0.5))

    from harness.core import Precision, RunOptions, Settings, Variant
    from harness.families.shaped_feeds import shaped_feeds
    from harness.judge.workspace import Workspace
    from harness.runners import PROVIDERS
    from harness.serving.artifacts import variant_files
    from harness.serving.client import OipClient
    from harness.serving.sweep import SweepSettings, sweep
    from harness.settings.endpoint import parse_endpoint
    from tests.serving import mlserver as ms

    ws = Workspace(RunOptions(settings=Settings(samples=16, batch_size=8, threads=1)))
    built = {}
    for name in args.models:
        model, family, graphs = variant_files(ws, Variant(name, Precision.FP32, PROVIDERS["ort_cpu"]))
        entry = family.graphs(model)[0]
        feeds = shaped_feeds(model, family, entry, ws.texts(model), 1, 32)
        built[name] = (graphs[0].path, {k: v for k, v in feeds.items() if k in entry.input_names})
    rows, parity = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        server = ms.start(Path(tmp) / "repo", [ms.ServedFile(n, p, max_batch_size=8, max_batch_time=0.002)
                                               for n, (p, _) in built.items()])
        url = server.grpc if args.protocol == "grpc" else server.http
        try:
            for name, (path, feeds) in built.items():
                parity[name] = {"file": check_metrics(["--reference", name, "--onnx", str(path)], Path(tmp) / f"f-{name}"),
                                "served": check_metrics(["--reference", name, "--endpoint", url,
                                                         "--served-model", name], Path(tmp) / f"s-{name}")}
                endpoint = parse_endpoint(url, [name])
                client = OipClient(endpoint)
                client.preflight()
                served = client.model(name)
                settings = SweepSettings(concurrency=tuple(args.concurrency), window_s=1.0,
                                         step_budget_s=args.step_budget, budget_s=60 * len(args.concurrency))
                steps = {s.concurrency: s for s in sweep(client, served, feeds, settings)}
                client.close()
                for level in args.concurrency:
                    s = steps[level]
                    local = in_process(path, feeds, level, min(args.step_budget, max(2.0, s.seconds)))
                    arr = np.asarray(s.samples_ms)
                    rows.append({"model": name, "concurrency": level,
                                 "served": {"p50": float(np.percentile(arr, 50)), "p90": float(np.percentile(arr, 90)),
                                            "p99": float(np.percentile(arr, 99)), "throughput": s.throughput,
                                            "n": int(arr.size), "errors": s.errors, "stable": s.stable},
                                 "in_process": local})
        finally:
            server.stop()
    print(f"served over {args.protocol}")
    print(f"{'model':<16}{'conc':>5} | {'served p50':>10} {'p99':>8} {'req/s':>8} | {'in-proc p50':>11} {'p99':>8} "
          f"{'calls/s':>8} | {'p50 ratio':>9}")
    for r in rows:
        s, i = r["served"], r["in_process"]
        print(f"{r['model']:<16}{r['concurrency']:>5} | {s['p50']:>10.2f} {s['p99']:>8.2f} {s['throughput']:>8.1f} | "
              f"{i['p50']:>11.3f} {i['p99']:>8.3f} {i['throughput']:>8.1f} | {s['p50'] / i['p50']:>8.1f}x"
              f"{'' if s['stable'] else '  (served step not stable)'}")
    print("\nparity vs PyTorch FP32 (logits; 16 sentences):")
    for name, p in parity.items():
        f, s, c = p["file"]["check"], p["served"]["check"], p["served"].get("check_concurrency", {})
        print(f"  {name}: file {f['verdict']} norm_max_abs {f['norm_max_abs']:.3g} cosine {f['cosine']:.7f} | "
              f"served {s['verdict']} norm_max_abs {s['norm_max_abs']:.3g} cosine {s['cosine']:.7f} | "
              f"concurrent vs sequential {c.get('verdict')} norm_max_abs {c.get('norm_max_abs')}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "parity": parity}, indent=1))
    return 0


if __name__ == "__main__":
    from harness.perf import smoke

    sys.exit(smoke.finish(main(), verdicts=()))
