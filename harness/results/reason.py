"""The one line that says why a case needs attention, and the worst outcome per metric it is built
from. Every surface that names a case's reason (the terminal table, ``summary.md``, JUnit's
``message``, the HTML grid and case table, ``harness compare``, ``history``) reads it here, so a
failure reads as its first failing check everywhere and never as the count header
``1 check(s) failed``."""

from __future__ import annotations

import math
import re

from harness.core.direction import Direction
from harness.results.checks import CheckResult
from harness.results.record import Record, RecordLike


def worst_outcomes(record: RecordLike) -> list[CheckResult]:
    """The worst outcome per metric name over every output of the record (a NaN is the worst
    value there is, and fails)."""
    worst: dict[str, CheckResult] = {}
    for outcome in Record.coerce(record).checks():
        current = worst.get(outcome.metric)
        if current is None or _worse(outcome.value, current.value, outcome.op):
            worst[outcome.metric] = outcome
    return list(worst.values())


def _worse(a: float, b: float, op: str) -> bool:
    """``a`` worse than ``b`` for a gate of ``op``; a NaN is the worst value there is."""
    return math.isnan(a) or Direction.from_op(op).worse(a, b)


#: the header ``failure_text`` writes (``model: 2 check(s) failed``): says how many, not which
_COUNT_HEADER = re.compile(r"(?:^|: )(?P<count>\d+) [\w() -]*(?:failed|exceeded)$")
#: failing metrics named on one line before "+N more"
REASON_METRICS = 3


def reason_line(record: RecordLike) -> str:
    """The one line that says why a case needs attention: for a failure, each failing metric with
    its value and threshold (``model/logits: norm_max_abs = 0.31 (must be <= 0.15)``), never the
    count header ``1 check(s) failed``; for an error or a not-run case, the first line of its
    reason. The same line heads ``summary.md``, the GitHub job summary and JUnit's ``message``."""
    r = Record.coerce(record)
    if r.verdict == "fail":
        failing = [o for o in worst_outcomes(r) if not o.passed]
        if failing:
            parts = [o.line() for o in failing[:REASON_METRICS]]
            more = f"; +{len(failing) - REASON_METRICS} more" if len(failing) > REASON_METRICS else ""
            return "; ".join(parts) + more
    lines = [line.strip() for line in r.reason.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    header = _COUNT_HEADER.search(lines[0])
    if header and len(lines) > 1:  # the checks are the indented lines under it (then uncounted context)
        count = int(header.group("count"))
        body = [line.split("; worst element at ")[0] for line in lines[1:1 + min(count, REASON_METRICS)]]
        more = f"; +{count - REASON_METRICS} more" if count > REASON_METRICS else ""
        return "; ".join(body) + more
    return lines[0]


