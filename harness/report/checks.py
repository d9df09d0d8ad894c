"""Condense a record's gated metrics to the worst value per metric (renderers only)."""

from __future__ import annotations

from harness.results.reason import reason_line, worst_outcomes
from harness.results.record import RecordLike

__all__ = ["format_checks", "reason_line", "worst_checks", "worst_outcomes"]


def worst_checks(record: RecordLike) -> list[tuple[str, float, str, float, bool]]:
    """[(metric, worst value, op, threshold, passed)] over every output of the record."""
    return [(o.metric, o.value, o.op, o.threshold, o.passed) for o in worst_outcomes(record)]


def format_checks(record: RecordLike, limit: int = 4) -> str:
    """The worst value per gated metric, failing metrics first, at most ``limit`` of them and
    "+N more" for the rest: a table cell never hides a failing check behind passing ones."""
    outcomes = sorted(worst_outcomes(record), key=lambda o: o.passed)  # stable: failures first, else record order
    parts = []
    for o in outcomes[:limit]:
        mark = "" if o.passed else " ✗"
        shown = o.text()
        parts.append(f"{o.metric} {shown.value} {shown.gate}{mark}")
    if len(outcomes) > limit:
        failing_left = sum(not o.passed for o in outcomes[limit:])
        parts.append(f"+{len(outcomes) - limit} more" + (f" ({failing_left} failing)" if failing_left else ""))
    return "; ".join(parts)


