"""The one number a report shows for a case, chosen by the metric registry, not by a hand list.

Order of choice: a failing gated check (the one that failed the case), else the gated metric the
registry declares first (``norm_max_abs`` before ``cosine``, ``gen_token_exact_match`` ...), taking
the worst value over the case's outputs; a case without gates shows its first ``headline`` metric;
a performance case its first perf budget the record can read (p50 latency, then cold start ...).
Adding a metric to the registry changes what reports show without touching this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.core.direction import Direction
from harness.core.verdict_text import ComparedText, compared_text
from harness.metrics.registry import METRICS
from harness.metrics.spec import Scope
from harness.report.units import value_text
from harness.results import MetricKey, Record
from harness.results.checks import CheckResult


@dataclass(frozen=True)
class Headline:
    metric: str  # the registry name (``norm_max_abs``, ``p50_ms``)
    key: str  # the record key (``decoder.logits.norm_max_abs``, ``perf.p50_ms``)
    value: float
    threshold: float | None = None
    op: str = ""
    passed: bool | None = None  # None: not gated
    unit: str = ""

    @property
    def value_text(self) -> str:
        """The value as printed: beside a threshold, with digits enough not to contradict it."""
        gated = self.gated()
        return gated.value if gated is not None else value_text(self.value, self.unit)

    @property
    def gate_text(self) -> str:
        """``<= 0.15`` exactly as configured; '' for an ungated number."""
        gated = self.gated()
        return gated.gate if gated is not None else ""

    def gated(self) -> ComparedText | None:
        """The value and threshold as every surface prints them (``harness.core.verdict_text``)."""
        if self.threshold is None:
            return None
        return compared_text(self.value, self.threshold, Direction.from_op(self.op), self.unit)

    def text(self) -> str:
        """``norm_max_abs 0.0155 <= 0.15``, and ``✗`` after a failing one; a time, size or rate
        through its unit's formatter (``load_ms 10.1 s <= 15 s``, not ``1.007e+04 ms``)."""
        gate = f" {self.gate_text}" if self.gate_text else ""
        mark = " ✗" if self.passed is False else ""
        return f"{self.metric} {self.value_text}{gate}{mark}"


def format_number(value: float | None, digits: int = 4) -> str:
    """A number without a unit (a logit, a margin) for a table cell: :func:`units.value_text`."""
    return value_text(value, digits=digits)


_ORDER = {spec.name: i for i, spec in enumerate(METRICS)}


def _worse(a: CheckResult, b: CheckResult) -> CheckResult:
    """The worse of two checks of one metric (NaN is the worst)."""
    if math.isnan(a.value):
        return a
    if math.isnan(b.value):
        return b
    spec = METRICS.get(a.metric)
    direction = spec.direction if spec is not None else Direction.from_op(a.op)
    return b if direction.worse(b.value, a.value) else a  # a tie keeps the first, as summary.md's reason does


def _from_checks(record: Record) -> Headline | None:
    checks = record.checks()
    if not checks:
        return None
    failing = [c for c in checks if not c.passed]
    pool = failing or checks
    best = min(_ORDER.get(c.metric, len(_ORDER)) for c in pool)
    candidates = [c for c in pool if _ORDER.get(c.metric, len(_ORDER)) == best]
    worst = candidates[0]
    for c in candidates[1:]:
        worst = _worse(worst, c)
    key = str(MetricKey(worst.metric, *worst.subject.split("/", 1))) if worst.subject else worst.metric
    spec = METRICS.get(worst.metric)
    return Headline(worst.metric, key, worst.value, worst.threshold, worst.op, worst.passed,
                    spec.unit if spec else "")


def headline(record: Record) -> Headline | None:
    """The case's headline number, or None (a skip, an error before measuring)."""
    found = _from_checks(record)
    if found is not None:
        return found
    for spec in METRICS:
        if spec.headline:
            for key, value in record.metrics.items():
                if MetricKey.parse(key).metric == spec.name and isinstance(value, (int, float)):
                    return Headline(spec.name, key, float(value), unit=spec.unit)
    if record.perf:
        for spec in METRICS.of(Scope.PERF_BUDGET):
            read = spec.reading.read(record.perf) if spec.reading else None
            if read is not None:
                return Headline(spec.name, str(MetricKey.perf(spec.name)), read, unit=spec.unit)
    return None
