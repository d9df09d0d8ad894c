"""A small run directory that exercises every section of the HTML report: a failing numeric case
with a saved batch, a failing generation case with hostile text, passing and skipped cases, a
latency case with raw samples, a cold-start case; and a history store of three earlier nights."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ENV = {"fingerprint": "f00d", "cpu": "Test CPU <b>", "cores": 2, "host": "ci-runner-7",
       "versions": {"onnxruntime": "1.20.0"}}
HOSTILE = "<script>alert('x')</script>"
FAILING_ID = "test_logits_parity[bert-int8-ort_cpu]"


def record(case: str, variant: str, verdict: str = "pass", run_id: str = "tonight", **extra: Any) -> dict[str, Any]:
    model, precision, provider = variant.rsplit("-", 2)
    base = {"schema": "harness.result/1", "id": f"{case}[{variant}]", "run_id": run_id, "suite": case,
            "variant": variant, "model": model, "precision": precision, "backend": "onnxruntime",
            "provider": provider, "verdict": verdict, "reason": "", "metrics": {}, "thresholds": {}, "env": ENV,
            "duration_s": 1.25, "finished": "2026-01-05T00:00:00+0000",
            "rerun": f"harness run --models {model} --precisions {precision} -k '{case} and {variant}'"}
    base.update(extra)
    return base


def logits(variant: str, norm: float, verdict: str = "pass", run_id: str = "tonight", **extra: Any) -> dict[str, Any]:
    threshold = {"fp32": 1e-4, "int8": 0.15}[variant.split("-")[1]]
    return record("test_logits_parity", variant, verdict, run_id, metrics={
        "model.logits.norm_max_abs": norm, "model.logits.cosine": 0.9999, "model.logits.max_abs": norm * 3},
        thresholds={"model.logits.norm_max_abs": {"threshold": threshold, "op": "<="},
                    "model.logits.cosine": {"threshold": 0.99, "op": ">="}}, **extra)


def records(run_dir: Path, run_id: str = "tonight", scale: float = 1.0) -> list[dict[str, Any]]:
    batch = run_dir / "cases" / FAILING_ID / "model.npz"
    batch.parent.mkdir(parents=True, exist_ok=True)
    batch.write_bytes(b"npz")
    bundle = batch.parent / "repro-model"
    bundle.mkdir(exist_ok=True)
    (bundle / "bundle.json").write_text("{}")
    fail_reason = f"model/logits: norm_max_abs = 0.31 (must be <= 0.15); worst element at batch=3 {HOSTILE}"
    samples = [1.0 + 0.01 * (i % 17) * scale for i in range(200)] + [4.0 * scale]
    return [
        logits("bert-fp32-ort_cpu", 2e-7 * scale, run_id=run_id),
        logits("bert-int8-ort_cpu", 0.31, "fail", run_id=run_id, reason=fail_reason,
               data={"worst": {"model.logits": f"batch=3, position=17 (ref 1.2, got 0.4) {HOSTILE}"},
                     "failing_batches": {"model": str(batch)}, "repro_bundles": {"model": str(bundle)}}),
        record("test_generation_parity", "marian-int8-ort_cpu", "fail", run_id,
               reason="gen_bleu_vs_torch = 12 (must be >= 30)",
               metrics={"gen_bleu_vs_torch": 12.0, "gen_token_exact_match": 0.2},
               thresholds={"gen_bleu_vs_torch": {"threshold": 30.0, "op": ">="}},
               data={"worst_pairs": [{"index": 4, "source": f"two cats {HOSTILE}", "reference": "zwei Katzen",
                                      "pytorch": "zwei Katzen sitzen", "variant": "zwei Hunde sitzen sitzen",
                                      "edit_distance": 9, "norm_edit_distance": 0.4}],
                     "generation": {"seconds": {"tokens_per_s": 850.0 * scale}}}),
        record("test_generation_parity", "marian-fp16-ort_cuda", "skip", run_id, reason="CUDAExecutionProvider not available"),
        record("test_latency", "bert-fp32-ort_cpu", run_id=run_id, perf={
            "latency_ms": {"samples": samples, "summary": {"p50": 1.08 * scale, "p90": 1.15, "p99": 1.16, "n": 201},
                           "throughput": 900.0}}),
        record("test_cold_start_memory", "bert-fp32-ort_cpu", run_id=run_id, perf={
            "cold_start_ms": {"load": 40.5 * scale, "first_inference": 3.25}, "peak_rss_bytes": 80 * 2 ** 20}),
    ]


def write_run(run_dir: Path, rows: list[dict[str, Any]]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return run_dir


def make_run(root: Path) -> Path:
    run = root / "run"
    return write_run(run, records(run))


def make_history(root: Path) -> Path:
    from harness.results import history

    db = root / "history.sqlite"
    for night, scale in enumerate((1.0, 1.02, 0.99, 1.3)):
        run = root / f"night-{night}"
        rows = records(run, run_id=f"night{night}", scale=scale)
        for row in rows:
            row["finished"] = f"2026-01-0{night + 1}T00:00:00+0000"
        history.ingest(write_run(run, rows), db)
    return db


#: the perf fixture's variants: (variant, backend, p50 ms, p99 ms, cold load ms, peak RSS MiB, verdict)
PERF_VARIANTS = (
    ("bert-fp32-torch_cpu", "pytorch", 6.8, 18.3, 17100.0, 397.0, "pass"),
    ("bert-fp32-ort_cpu", "onnxruntime", 0.31, 20.6, 306.0, 63.5, "pass"),
    ("bert-int8-ort_cpu", "onnxruntime", 0.50, 29.8, 211.0, 63.9, "fail"),  # its p99 budget: a regression
    ("marian-fp32-torch_cpu", "pytorch", 41.0, 60.0, 21000.0, 610.0, "pass"),
    ("marian-fp32-ort_cpu", "onnxruntime", 12.0, 19.0, 900.0, 150.0, "pass"),
    ("marian-int8-ort_cpu", "onnxruntime", 8.0, 14.0, 700.0, 120.0, "pass"),
)
#: what the baseline gate said of the fixture's variants (``perf-compare.json``): p50 ratio, verdict
PERF_BASELINE = {"bert-fp32-ort_cpu": (1.04, "PASS"), "marian-fp32-ort_cpu": (1.31, "REGRESSION")}


def perf_records(run_dir: Path) -> list[dict[str, Any]]:
    """A ``--perf`` run of two models (2-3 variants each, PyTorch FP32 among them): a latency case
    with raw samples and its p99 interval, and a cold-start/memory case per variant."""
    rows = []
    for variant, backend, p50, p99, load, rss, verdict in PERF_VARIANTS:
        samples = [p50 * (1 + 0.02 * (i % 11)) for i in range(400)] + [p99] * 5
        reason = f"p99_ms = {p99} ms (must be <= 25 ms)" if verdict == "fail" else ""
        thresholds = {"p99_ms": {"threshold": 25.0, "op": "<="}} if verdict == "fail" else {}
        rows.append(record("test_latency", variant, verdict, backend=backend, reason=reason, thresholds=thresholds,
                           perf={"latency_ms": {"samples": samples, "items_per_call": 1, "throughput": 1000.0 / p50,
                                                "summary": {"n": len(samples), "p50": p50, "p90": p50 * 1.1,
                                                            "p99": p99, "mean": p50 * 1.1, "cv": 0.1},
                                                "tail": {"interval": [p99 * 0.9, p99 * 1.2]}}}))
        rows.append(record("test_cold_start_memory", variant, backend=backend, perf={
            "cold_start_ms": {"load": load, "first_inference": load / 20}, "peak_rss_bytes": rss * 2 ** 20,
            "artifact_bytes": 17.5 * 2 ** 20 if "int8" not in variant else 4.6 * 2 ** 20}))
    write_run(run_dir, rows)
    gate = [{"variant": v, "metric": "latency_ms.p50", "ratio": ratio, "verdict": verdict, "advisory": False}
            for v, (ratio, verdict) in PERF_BASELINE.items()]
    (run_dir / "perf-compare.json").write_text(json.dumps({"schema": "harness.perf-compare/1", "rows": gate}))
    return rows
