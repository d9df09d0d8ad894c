"""Absolute performance budgets from a model's spec (``ModelSpec.budgets``).

Baselines catch a variant getting *slower than it was*; budgets catch one that is *too
slow to ship* however it got there. Every budget is declared once in
``harness.metrics.registry`` with where its number is read from a record's ``perf`` payload,
so a name the config file accepts is a name this module measures. A budget is checked only by
the test that measures its number, and a breach is a ``fail`` verdict whose message has the
number and the budget. Sizes are MiB (2**20 bytes), times milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from harness.core import UsageError
from harness.core.verdict_text import compared_text
from harness.metrics.registry import METRICS, MetricSpec, Scope
from harness.results.checks import raise_failures
from harness.results.record import MetricKey

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Variant
    from harness.zoo.loading import LoadedModel


class BudgetedCase(Protocol):
    """What enforcing budgets reads and writes of a case (``harness.case.collector.Case``, a layer
    above): the model's declared budgets, and the metrics and thresholds its record will carry."""

    @property
    def model(self) -> LoadedModel: ...

    @property
    def variant(self) -> Variant | None: ...

    @property
    def metrics(self) -> dict[str, float]: ...

    @property
    def thresholds(self) -> dict[str, dict[str, Any]]: ...


def judged_variant(case: BudgetedCase) -> Variant:
    """The variant a measured case judged (a suite case without one measures nothing)."""
    assert case.variant is not None, "a measured case judges a variant"
    return case.variant


#: budget name -> its declaration (derived from the registry)
BUDGETS: dict[str, MetricSpec] = METRICS.as_dict(Scope.PERF_BUDGET)


@dataclass(frozen=True)
class BudgetCheck:
    name: str
    value: float
    limit: float

    @property
    def passed(self) -> bool:
        """Within the limit in the budget's declared direction (a NaN never passes)."""
        return BUDGETS[self.name].direction.holds(self.value, self.limit)

    def message(self) -> str:
        """``latency p50 = 2 exceeds budget p50_ms <= 1.5``, the value written by the one formatter of a
        value beside its threshold (``harness.core.verdict_text``: never rounded onto the limit)."""
        spec = BUDGETS[self.name]
        shown = compared_text(self.value, self.limit, spec.direction)
        return f"{spec.title} = {shown.value} exceeds budget {self.name} {shown.gate}"


def validate(budgets: Mapping[str, Any], model: str = "") -> dict[str, float]:
    """Known names with numeric limits, else a one-line UsageError (with did-you-mean)."""
    out: dict[str, float] = {}
    for name, limit in budgets.items():
        try:
            METRICS.lookup(name, Scope.PERF_BUDGET, what="budget")
        except UsageError as exc:
            raise UsageError(f"{model}: {exc}") from None
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0:
            raise UsageError(f"{model}: budget {name} must be a positive number, got {limit!r}")
        out[name] = float(limit)
    return out


def measured_values(perf: Mapping[str, Any]) -> dict[str, float]:
    """The budgeted numbers present in a record's ``perf`` fields, each read as declared."""
    out: dict[str, float] = {}
    for name, spec in BUDGETS.items():
        value = spec.reading.read(perf) if spec.reading is not None else None
        if value is not None:
            out[name] = value
    return out


def check(budgets: Mapping[str, float], measured: Mapping[str, float]) -> list[BudgetCheck]:
    """A check for every budget whose number was measured."""
    return [BudgetCheck(name, float(measured[name]), float(limit)) for name, limit in budgets.items()
            if name in measured]


def enforce(case: BudgetedCase, perf: Mapping[str, Any]) -> list[BudgetCheck]:
    """Record each checked budget on ``case`` (metric + threshold, so reports show it) and
    raise GateFailure listing every breach."""
    model = case.model
    checks = check(validate(model.spec.budgets, model.name), measured_values(perf))
    for c in checks:
        key = str(MetricKey.perf(c.name))
        case.metrics[key] = c.value
        case.thresholds[key] = {"threshold": c.limit, "op": BUDGETS[c.name].symbol}
    raise_failures(judged_variant(case).id, [c.message() for c in checks if not c.passed], "performance budget(s) exceeded")
    return checks
