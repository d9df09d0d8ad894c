"""Absolute performance budgets from a model's spec (``ModelSpec.budgets``).

Baselines catch a variant getting *slower than it was*; budgets catch one that is *too
slow to ship* however it got there. A budget is checked only by the test that measures
its number, and a breach is a ``fail`` verdict whose message has the number and the budget.
Sizes are MiB (2**20 bytes), times milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from harness.config import UsageError, did_you_mean

MiB = 1024 * 1024

#: budget name -> what it limits (for messages)
BUDGETS: dict[str, str] = {
    "p50_ms": "latency p50", "p90_ms": "latency p90", "p95_ms": "latency p95", "p99_ms": "latency p99",
    "peak_rss_mb": "peak RSS (MiB)", "artifact_mb": "artifact size (MiB)",
    "load_ms": "cold-start load", "first_inference_ms": "cold-start first inference",
    "ttft_ms": "time to first token p50", "tpot_ms": "time per output token p50",
}


@dataclass(frozen=True)
class BudgetCheck:
    name: str
    value: float
    limit: float

    @property
    def passed(self) -> bool:
        return self.value <= self.limit

    def message(self) -> str:
        return f"{BUDGETS[self.name]} = {self.value:.4g} exceeds budget {self.name} <= {self.limit:g}"


def validate(budgets: Mapping[str, Any], model: str = "") -> dict[str, float]:
    """Known names with numeric limits, else a one-line UsageError (with did-you-mean)."""
    out: dict[str, float] = {}
    for name, limit in budgets.items():
        if name not in BUDGETS:
            raise UsageError(f"{model}: unknown budget {name!r}{did_you_mean(name, BUDGETS)}; "
                             f"known: {', '.join(BUDGETS)}")
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0:
            raise UsageError(f"{model}: budget {name} must be a positive number, got {limit!r}")
        out[name] = float(limit)
    return out


def measured_values(perf: Mapping[str, Any]) -> dict[str, float]:
    """The budgeted numbers present in a record's ``perf`` fields."""
    out: dict[str, float] = {}
    primary = perf.get("latency_ms")
    if isinstance(primary, Mapping):
        for p in ("p50", "p90", "p95", "p99"):
            out[f"{p}_ms"] = float(primary["summary"][p])
    if "peak_rss_bytes" in perf:
        out["peak_rss_mb"] = perf["peak_rss_bytes"] / MiB
    if "artifact_bytes" in perf:
        out["artifact_mb"] = perf["artifact_bytes"] / MiB
    cold = perf.get("cold_start_ms")
    if isinstance(cold, Mapping):
        out["load_ms"], out["first_inference_ms"] = float(cold["load"]), float(cold["first_inference"])
    for gen, name in (("ttft", "ttft_ms"), ("tpot", "tpot_ms")):
        entry = perf.get(f"latency_ms[gen={gen},kv=on]")
        if isinstance(entry, Mapping):
            out[name] = float(entry["summary"]["p50"])
    return out


def check(budgets: Mapping[str, float], measured: Mapping[str, float]) -> list[BudgetCheck]:
    """A check for every budget whose number was measured."""
    return [BudgetCheck(name, float(measured[name]), float(limit)) for name, limit in budgets.items()
            if name in measured]


def enforce(case: Any, perf: Mapping[str, Any]) -> list[BudgetCheck]:
    """Record each checked budget on ``case`` (metric + threshold, so reports show it) and
    raise GateFailure listing every breach."""
    from harness.results.checks import raise_failures
    from harness.results.record import MetricKey

    model = case.model
    checks = check(validate(model.spec.budgets, model.name), measured_values(perf))
    for c in checks:
        case.metrics[str(MetricKey.perf(c.name))] = c.value
        case.thresholds[str(MetricKey.perf(c.name))] = {"threshold": c.limit, "op": "<="}
    raise_failures(case.variant.id, [c.message() for c in checks if not c.passed], "performance budget(s) exceeded")
    return checks
