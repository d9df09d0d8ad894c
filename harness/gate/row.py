"""The one perf row: a judged number of one variant, whatever evidence decided it, and its cells.

Recorded runs (``baseline compare``), paired re-timing (``--perf``, ``perf-compare``), environment
pairs and single numbers all produce this row (``harness.gate.judge``), so a table, a JSON
document or a report reads every perf verdict the same way.
"""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass
from typing import Any

from harness.core.units import value_text


class Verdict(enum.StrEnum):
    PASS = "PASS"
    REGRESSION = "REGRESSION"
    IMPROVEMENT = "IMPROVEMENT"
    INCONCLUSIVE = "INCONCLUSIVE"


class Gated:
    """What every gate row has: a verdict that fails the build unless the row is advisory."""

    verdict: Verdict
    advisory: bool

    @property
    def gating_regression(self) -> bool:
        return self.verdict is Verdict.REGRESSION and not self.advisory


@dataclass(frozen=True)
class Row(Gated):
    """One metric of one variant, judged. ``ratio`` is candidate / baseline (canary-adjusted where
    the reason says so); ``evidence`` names the kind of evidence (``harness.gate.evidence``) and
    ``counts`` how much of it each side had (calls, pairs, or one number)."""

    variant: str
    metric: str
    kind: str
    base: float
    cand: float
    ratio: float
    ci_lo: float | None
    ci_hi: float | None
    p_value: float | None
    verdict: Verdict
    reason: str
    advisory: bool = False
    evidence: str = "two-runs"
    counts: tuple[int, int] = (0, 0)
    #: two runs: the level came from every process of both (the main one and the fresh ones, each
    #: against its canary), so the interval carries the measured between-process spread
    #: (``harness.gate.processes``); False: the main processes alone
    process_levels: bool = False

    @property
    def stat(self) -> str:
        """The judged statistic or number: ``p50`` of ``latency_ms.p50``."""
        return self.metric.rsplit(".", 1)[-1]

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdict"] = self.verdict.value
        out["stat"] = self.stat
        out["counts"] = list(self.counts)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def fmt_value(value: float | None, kind: str) -> str:
    """A gated number in its unit (bytes for memory and size, else milliseconds) through the
    reports' one formatter per unit (``harness.core.units``)."""
    if value is None or not math.isfinite(value):
        return "-"
    return value_text(value, unit_of(kind))


def unit_of(kind: str) -> str:
    """The unit a policy kind's numbers are in."""
    return "bytes" if kind in ("memory", "size") else "ms"


def fmt_change(ratio: float | None) -> str:
    return "-" if ratio is None or not math.isfinite(ratio) else f"{(ratio - 1) * 100:+.1f}%"


def fmt_ci(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return "-"
    return f"[{(lo - 1) * 100:+.1f}%, {(hi - 1) * 100:+.1f}%]"


def fmt_p(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return "-"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.0e}"
