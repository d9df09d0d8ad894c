"""Condense a record's gated metrics to the worst value per metric (renderers only)."""

from __future__ import annotations


def worst_checks(record: dict) -> list[tuple[str, float, str, float, bool]]:
    """[(metric, worst value, op, threshold, passed)] over every output of the record."""
    metrics = record.get("metrics", {})
    worst: dict[str, tuple[float, str, float]] = {}
    for key, check in (record.get("thresholds") or {}).items():
        value = metrics.get(key)
        if value is None:
            continue
        name = key.rsplit(".", 1)[-1]
        op, threshold = check.get("op", "<="), float(check.get("threshold", 0.0))
        current = worst.get(name)
        if current is None or _worse(value, current[0], op):
            worst[name] = (float(value), op, threshold)
    out = []
    for name, (value, op, threshold) in worst.items():
        ok = value >= threshold if op == ">=" else value <= threshold
        out.append((name, value, op, threshold, bool(ok and value == value)))
    return out


def _worse(a: float, b: float, op: str) -> bool:
    if a != a:
        return True
    return a < b if op == ">=" else a > b


def format_checks(record: dict, limit: int = 4) -> str:
    parts = []
    for name, value, op, threshold, ok in worst_checks(record)[:limit]:
        mark = "" if ok else " ✗"
        parts.append(f"{name} {value:.3g} {op} {threshold:g}{mark}")
    return "; ".join(parts)
