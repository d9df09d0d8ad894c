"""Every number of a record, flattened to ``metric:<key>`` / ``perf:<key>`` columns.

One flattening for the CSV/HTML exports (``harness.report.tables``) and the history store
(``harness.results.history``); it lives in the results layer so the store does not import the
report renderers.
"""

from __future__ import annotations

from numbers import Real
from typing import Any, Mapping

from harness.results.record import Record, RecordLike

METRIC_PREFIX = "metric:"
PERF_PREFIX = "perf:"
# perf sections that describe how a measurement was taken, not what it measured
_PERF_SKIP = {"settings", "samples", "cold_start_runs", "artifact_files", "canary_ms"}


def _number(value: Any) -> float | None:
    """A float for real numbers (bools are flags, not measurements), else None."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return None
    return float(value)


def perf_numbers(perf: Mapping[str, Any]) -> dict[str, float]:
    """``perf`` flattened: latency summaries as ``<key>.<stat>``, scalars as-is, one level of
    sub-dicts (``cold_start_ms.load``, ``memory.model_rss_bytes``). Raw samples are left out:
    they belong to the baseline gate, not to a table."""
    out: dict[str, float] = {}
    for key, value in perf.items():
        if key in _PERF_SKIP:
            continue
        scalar = _number(value)
        if scalar is not None:
            out[key] = scalar
        elif isinstance(value, Mapping):
            summary = value.get("summary")
            source = summary if isinstance(summary, Mapping) else value
            for sub, sub_value in source.items():
                number = _number(sub_value)
                if number is not None and sub not in _PERF_SKIP:
                    out[f"{key}.{sub}"] = number
    return out


def record_numbers(record: RecordLike) -> dict[str, float]:
    """Every number of a record, keyed ``metric:<key>`` or ``perf:<key>`` (the column names)."""
    out: dict[str, float] = {}
    metrics = record.metrics if isinstance(record, Record) else record.get("metrics") or {}
    for key, value in metrics.items():
        number = _number(value)
        if number is not None:
            out[f"{METRIC_PREFIX}{key}"] = number
    perf = record.perf if isinstance(record, Record) else record.get("perf")
    if isinstance(perf, Mapping):
        out.update({f"{PERF_PREFIX}{k}": v for k, v in perf_numbers(perf).items()})
    return out
