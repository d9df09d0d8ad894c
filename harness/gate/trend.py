"""A history store's series judged by the perf gate's one judge: ``harness history changes``.

Each ``(variant, metric)`` column of ``harness.results.history.trend``'s wide table becomes one
``SERIES`` evidence (``harness.gate.evidence``), judged with the policy the gate already has for
that number (``p50`` for ``perf:latency_ms.p50``, ``peak_rss_bytes``...: a nightly p50 that moved
5 % fails where ``baseline compare``'s would) and, for a number no perf policy declares (an
accuracy metric, throughput), the change-point rule's own threshold. Which way is better is the
caller's to say (``harness.report.units.quantity``, one layer up, reads it from the registry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from harness.core.direction import Direction
from harness.gate.changepoints import MIN_RELATIVE
from harness.gate.evidence import Evidence, EvidenceKind
from harness.gate.judge import judge, latency_stat
from harness.gate.row import Row
from harness.metrics.registry import perf_policies
from harness.metrics.spec import MetricPolicy
from harness.results.numbers import PERF_PREFIX

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def series_policy(history_metric: str, policies: Mapping[str, MetricPolicy] | None = None) -> MetricPolicy:
    """The policy a stored series is judged by: the perf gate's for the same number
    (``perf:latency_ms*.pNN`` -> ``pNN``, ``perf:<key>`` -> ``<key>``), else a ``trend`` policy at
    the change-point rule's threshold."""
    pols = perf_policies() if policies is None else policies
    key = history_metric.removeprefix(PERF_PREFIX) if history_metric.startswith(PERF_PREFIX) else ""
    if key:
        series, _, stat = key.rpartition(".")
        if series.startswith("latency_ms") and latency_stat(stat) is not None and stat in pols:
            return pols[stat]
        if key in pols:
            return pols[key]
    name = history_metric.rpartition(":")[2]
    return MetricPolicy(name=name, kind="trend", min_effect=MIN_RELATIVE)


def series_evidence(series: pd.Series, variant: str, metric: str, policy: MetricPolicy,
                    higher_is_better: bool | None) -> Evidence:
    """One column of the wide table (index ``(finished, run_id)``, oldest first) as evidence;
    runs without a value are left out, not read as zero."""
    present = series.astype(float).dropna()
    values = present.to_numpy(dtype=float)
    runs = tuple(f"{run_id} ({str(finished)[:16].replace('T', ' ')})" for finished, run_id in present.index)
    return Evidence(EvidenceKind.SERIES, variant, metric, (policy.name,), values[:-1], values[-1:], unit="",
                    direction=None if higher_is_better is None else Direction.of(higher_is_better), runs=runs)


@dataclass(frozen=True)
class TrendVerdict:
    """Every series judged: one row each, in the wide table's column order."""

    rows: tuple[Row, ...]

    @property
    def exit_code(self) -> int:
        """1 when a gating series regressed (INCONCLUSIVE never fails a build, as in the gate)."""
        return 1 if any(r.gating_regression for r in self.rows) else 0

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            out[r.verdict.value] = out.get(r.verdict.value, 0) + 1
        return out


def judge_trends(wide: pd.DataFrame, directions: Mapping[str, bool | None],
                 policies: Mapping[str, MetricPolicy] | None = None) -> TrendVerdict:
    """Each ``(variant, metric)`` series of ``wide`` judged (module docstring); ``directions``:
    metric -> higher is better (None or absent: not known, never a REGRESSION)."""
    rows: list[Row] = []
    for variant, metric in wide.columns:
        policy = series_policy(str(metric), policies)
        evidence = series_evidence(wide[(variant, metric)], str(variant), str(metric), policy,
                                   directions.get(str(metric)))
        if evidence.base.size + evidence.cand.size:
            rows += judge(evidence, {policy.name: policy})
    return TrendVerdict(tuple(rows))

