"""Default numeric tolerances per precision, and how a model overrides them.

The thresholds are declared with their metrics in ``harness.metrics.registry`` (docs/tolerances.md
has the table and the measurements behind it); this module only merges them with a model's
overrides into the checks of one output.
"""

from __future__ import annotations

from typing import Mapping

from harness.core import Precision, Tolerance, precision_overrides
from harness.metrics.registry import METRICS, Scope
from harness.metrics.spec import TOLERANCE_SCOPES

#: metric -> default threshold, per precision (derived from the registry; kept for callers).
DEFAULT_TOLERANCES: dict[Precision, dict[str, float]] = {p: METRICS.defaults(p, Scope.NUMERIC) for p in Precision}
#: numeric metrics that exist for logits outputs only (derived from the registry).
LOGITS_ONLY = frozenset(s.name for s in METRICS.of(Scope.NUMERIC) if s.logits_only)


def tolerance_for(precision: Precision, *, is_logits: bool,
                  overrides: Mapping[str, Mapping[str, float]] | None = None) -> Tolerance:
    """Checks for one output: defaults for ``precision`` merged with the model's overrides.

    Overrides of other scopes (``gen_*``, ``embedding_*``) belong to other gates and are left to
    them; an output's comparison never computes them.
    """
    values = dict(DEFAULT_TOLERANCES[precision])
    if overrides:
        values.update(precision_overrides(overrides, precision))
    numeric = METRICS.as_dict(Scope.NUMERIC)
    checks = tuple(
        numeric[metric].check(threshold)
        for metric, threshold in values.items()
        if metric in numeric and (is_logits or not numeric[metric].logits_only)
    )
    return Tolerance(checks)


def scope_tolerance(scope: Scope, precision: Precision,
                    overrides: Mapping[str, Mapping[str, float]] | None = None) -> Tolerance:
    """The checks of a derived output judged with the metrics of ``scope`` (an answer span's):
    the scope's defaults at ``precision``, then the model's overrides of those metrics."""
    if scope not in TOLERANCE_SCOPES:
        raise ValueError(f"metrics of scope {scope.value!r} take no tolerance")
    values = METRICS.defaults(precision, scope)
    values.update({k: v for k, v in precision_overrides(overrides, precision).items() if k in METRICS.names(scope)})
    return Tolerance(tuple(METRICS[name].check(value) for name, value in values.items()))
