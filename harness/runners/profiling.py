"""ONNX Runtime profiling traces, summarised: where the time of a judged session goes.

``--profile`` turns on ``SessionOptions.enable_profiling`` for every judged ONNX Runtime
session; the Chrome-trace JSON it writes stays in the case directory (open it in
chrome://tracing or Perfetto). The record keeps the summary a release engineer reads first:
the top nodes by total kernel time, the share of each op type, and the first run against the
steady runs (the first pays for allocation and kernel selection). Profiling slows every call,
so a profiled session's numbers are not latency measurements; the perf suites never profile.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Mapping

#: how many nodes the summary lists
TOP = 10


def summarise_trace(path: str | Path, top: int = TOP) -> dict[str, Any]:
    """The summary of one ORT trace file (see the module docstring)."""
    events = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(events, dict):  # some versions wrap the list
        events = events.get("traceEvents", [])
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: e.get("ts", 0))
    kernels = [e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time")]
    by_node: dict[str, dict[str, Any]] = {}
    by_type: dict[str, float] = {}
    for e in kernels:
        node = str(e["name"]).removesuffix("_kernel_time")
        op = str((e.get("args") or {}).get("op_name") or "?")
        us = float(e.get("dur", 0))
        entry = by_node.setdefault(node, {"node": node, "op_type": op, "total_ms": 0.0, "calls": 0})
        entry["total_ms"] += us / 1000.0
        entry["calls"] += 1
        by_type[op] = by_type.get(op, 0.0) + us / 1000.0
    total = sum(by_type.values()) or 1.0
    run_ms = [float(e.get("dur", 0)) / 1000.0 for e in runs]
    nodes = sorted(by_node.values(), key=lambda n: -n["total_ms"])[:top]
    return {
        "trace": str(path),
        "runs": len(run_ms),
        "first_run_ms": round(run_ms[0], 4) if run_ms else None,
        "steady_run_ms": round(statistics.median(run_ms[1:]), 4) if len(run_ms) > 1 else None,
        "kernel_ms": round(sum(by_type.values()), 4),
        "top_nodes": [{**n, "total_ms": round(n["total_ms"], 4), "share": round(n["total_ms"] / total, 4)}
                      for n in nodes],
        "op_type_share": {op: round(ms / total, 4) for op, ms in sorted(by_type.items(), key=lambda kv: -kv[1])},
    }


def headline(summary: Mapping[str, Any]) -> str:
    """One line for summary.md: first vs steady run and the top op types."""
    shares = ", ".join(f"{op} {share:.0%}" for op, share in list(summary.get("op_type_share", {}).items())[:3])
    first, steady = summary.get("first_run_ms"), summary.get("steady_run_ms")
    runs = f"first run {first:.2f} ms, steady {steady:.2f} ms" if first is not None and steady is not None else ""
    return "; ".join(p for p in (runs, shares) if p)
