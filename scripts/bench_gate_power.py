#!/usr/bin/env python
"""Measure the performance gate's false-alarm and detection rates on this machine.

A gate's thresholds are only as good as the noise they were chosen against, so this
script runs a real ONNX Runtime workload and asks the gate two questions many times:

* A/A: two independent sample sets of the *same* workload. Any REGRESSION is a false alarm.
* A/B: the candidate busy-waits an extra ``--slowdown`` x (median call time) per call,
  a real CPU cost like a slower kernel. Every trial should be a REGRESSION.

Trials of both kinds are interleaved in a shuffled order so slow drift of the machine
hits both alike. Each trial's samples go through the same record format and
``compare_runs`` path that ``harness baseline compare`` uses.

    python scripts/bench_gate_power.py --trials 10 --samples 1000 --seed 0
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import numpy as np

try:
    import harness  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.gate.compare import DEFAULT_POLICIES, Comparison, compare_runs, outlier_fraction  # noqa: E402

VARIANT = "bench-mlp-fp32-ort_cpu"
GATED = [name for name, p in DEFAULT_POLICIES.items() if p.kind == "latency" and not p.advisory]


def build_session(workdir: Path, seed: int, threads: int) -> tuple[Callable[[], Any], int]:
    """Export a small MLP with the TorchScript exporter and open it on the ORT CPU provider."""
    import onnxruntime as ort
    import torch

    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 64)
    ).eval()
    example = torch.randn(16, 256)
    path = workdir / "mlp.onnx"
    torch.onnx.export(model, (example,), str(path), input_names=["x"], output_names=["y"], dynamo=False, opset_version=17)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    feed = {"x": example.numpy()}
    return (lambda: session.run(None, feed)), path.stat().st_size


def collect(call: Callable[[], Any], n: int, extra_ns: int = 0) -> list[float]:
    """``n`` per-call latencies in ms; ``extra_ns`` > 0 adds a busy-wait (CPU work, not sleep)."""
    clock = time.perf_counter_ns
    out = [0.0] * n
    for i in range(n):
        start = clock()
        call()
        if extra_ns:
            until = clock() + extra_ns
            while clock() < until:
                pass
        out[i] = (clock() - start) / 1e6
    return out


def record(samples: list[float], size: int) -> dict[str, Any]:
    """One results.jsonl-shaped record, so the benchmark exercises the real reader."""
    return {
        "id": f"test_latency[{VARIANT}]",
        "variant": VARIANT,
        "suite": "perf",
        "verdict": "pass",
        "env": {"fingerprint": "bench", "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "perf": {"latency_ms": {"samples": samples, "warmup": 0}, "artifact_bytes": size},
    }


def _spin(stop: Any) -> None:
    while not stop.is_set():
        pass


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    stop = mp.Event()
    hogs = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.background)]
    for proc in hogs:
        proc.start()
    try:
        with tempfile.TemporaryDirectory(prefix="gate-power-") as tmp:
            call, size = build_session(Path(tmp), args.seed, args.threads)
            collect(call, args.warmup)
            median_ms = float(np.median(collect(call, 300)))
            extra_ns = int(args.slowdown * median_ms * 1e6)
            kinds = ["A/A"] * args.trials + ["A/B"] * args.trials
            order = [kinds[i] for i in rng.permutation(len(kinds))]
            trials: list[dict[str, Any]] = []
            started = time.perf_counter()
            for kind in order:
                base = collect(call, args.samples)
                cand = collect(call, args.samples, extra_ns if kind == "A/B" else 0)
                result = compare_runs([record(base, size)], [record(cand, size)])
                trials.append(summarise_trial(kind, result))
                trials[-1]["outliers"] = max(outlier_fraction(np.asarray(base)), outlier_fraction(np.asarray(cand)))
            wall = time.perf_counter() - started
    finally:
        stop.set()
        for proc in hogs:
            proc.join(timeout=5)
    return {"median_call_ms": median_ms, "extra_ms": extra_ns / 1e6, "wall_s": wall, "trials": trials}


def summarise_trial(kind: str, result: Comparison) -> dict[str, Any]:
    rows = {r.metric.split(".", 1)[-1]: r for r in result.rows if r.metric.startswith("latency_ms.")}
    return {
        "kind": kind,
        "exit_code": result.exit_code,
        "verdicts": {name: rows[name].verdict.value for name in rows},
        "ratios": {name: rows[name].ratio for name in rows},
        "reasons": {name: rows[name].reason for name in rows},
    }


def report(args: argparse.Namespace, out: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=150, highlight=False)
    table = Table(title=f"gate power: {args.trials} A/A + {args.trials} A/B trials, {args.samples} calls per side, "
                        f"+{args.slowdown:.0%} injected")
    table.add_column("trials")
    table.add_column("gating REGRESSION (exit 1)")
    for name in GATED:
        table.add_column(f"{name} verdicts")
    table.add_column("p50 ratio min / median / max")
    table.add_column("p90 ratio median")
    table.add_column("outlier calls")
    for kind in ("A/A", "A/B"):
        group = [t for t in out["trials"] if t["kind"] == kind]
        p50 = np.array([t["ratios"]["p50"] for t in group])
        p90 = np.array([t["ratios"]["p90"] for t in group])
        regressions = sum(t["exit_code"] == 1 for t in group)
        outliers = [t["outliers"] for t in group]
        label = "false alarms" if kind == "A/A" else "detected"
        per_stat = [", ".join(f"{v} {n}" for v, n in sorted(Counter(t["verdicts"][g] for t in group).items())) for g in GATED]
        table.add_row(f"{kind} ({len(group)})", f"{regressions}/{len(group)} {label}", *per_stat,
                      f"{p50.min():.3f} / {np.median(p50):.3f} / {p50.max():.3f}", f"{np.median(p90):.3f}",
                      f"{min(outliers):.1%}-{max(outliers):.1%}")
    console.print(table)
    console.print(f"median call {out['median_call_ms']:.3f} ms, injected {out['extra_ms']:.3f} ms/call; "
                  f"measuring + judging took {out['wall_s']:.1f} s; threads={args.threads}, background hogs={args.background}, "
                  f"cpu cores={os.cpu_count()}, load avg={os.getloadavg()[0]:.2f}")
    # The trials that went wrong, with the gate's own reasons, so a miss can be diagnosed.
    for t in out["trials"]:
        wrong = (t["kind"] == "A/A") == (t["exit_code"] == 1)
        if wrong or args.verbose:
            flag = "WRONG " if wrong else ""
            console.print(f"  {flag}{t['kind']}: " + "; ".join(f"{g} {t['verdicts'][g]} ({t['reasons'][g]})" for g in GATED))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="A/A trials, and as many A/B trials (default 10)")
    parser.add_argument("--samples", type=int, default=1000, help="per-call samples per side (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="model weights, inputs and trial order")
    parser.add_argument("--slowdown", type=float, default=0.25, help="injected slowdown as a fraction of the median call")
    parser.add_argument("--threads", type=int, default=1, help="ORT intra-op threads (default 1)")
    parser.add_argument("--warmup", type=int, default=200, help="calls before anything is measured")
    parser.add_argument("--background", type=int, default=0, help="busy-loop processes to run as noisy neighbours")
    parser.add_argument("--json", metavar="OUT", help="write every trial's verdicts and ratios as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every trial's verdicts and reasons")
    args = parser.parse_args(argv)
    if args.trials < 1 or args.samples < 10:
        parser.error("--trials must be >= 1 and --samples >= 10")
    out = run(args)
    report(args, out)
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), **out}, indent=2) + "\n", encoding="utf-8")
    aa = [t for t in out["trials"] if t["kind"] == "A/A"]
    ab = [t for t in out["trials"] if t["kind"] == "A/B"]
    false_alarms = sum(t["exit_code"] == 1 for t in aa)
    detected = sum(t["exit_code"] == 1 for t in ab)
    # Exit 1 when the gate misses its targets on this machine: 0 false alarms, >= 90% detected.
    return 0 if false_alarms == 0 and detected >= 0.9 * len(ab) else 1


if __name__ == "__main__":
    sys.exit(main())
