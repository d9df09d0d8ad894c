"""Default numeric tolerances per precision, and how a model overrides them.

The thresholds are declared with their metrics in ``harness.metrics.registry`` (docs/tolerances.md
has the table and the measurements behind it); this module only merges them with a model's
overrides into the checks of one output.
"""

from __future__ import annotations

from typing import Mapping

from harness.core import Precision, Tolerance, precision_overrides
from harness.metrics.registry import METRICS, Scope

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
