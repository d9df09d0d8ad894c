"""Condense a record's gated metrics to the worst value per metric (renderers only)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from harness.results import CheckResult, Record


def worst_outcomes(record: Record | Mapping[str, Any]) -> list[CheckResult]:
    """The worst outcome per metric name over every output of the record (a NaN is the worst
    value there is, and fails)."""
    worst: dict[str, CheckResult] = {}
    for outcome in Record.coerce(record).checks():
        current = worst.get(outcome.metric)
        if current is None or _worse(outcome.value, current.value, outcome.op):
            worst[outcome.metric] = outcome
    return list(worst.values())


def worst_checks(record: Record | Mapping[str, Any]) -> list[tuple[str, float, str, float, bool]]:
    """[(metric, worst value, op, threshold, passed)] over every output of the record."""
    return [(o.metric, o.value, o.op, o.threshold, o.passed) for o in worst_outcomes(record)]


def _worse(a: float, b: float, op: str) -> bool:
    if math.isnan(a):
        return True
    return a < b if op == ">=" else a > b


def format_checks(record: Record | Mapping[str, Any], limit: int = 4) -> str:
    parts = []
    for o in worst_outcomes(record)[:limit]:
        mark = "" if o.passed else " ✗"
        parts.append(f"{o.metric} {o.value:.3g} {o.op} {o.threshold:g}{mark}")
    return "; ".join(parts)
