"""How a number is written for people, by its unit: one formatter per unit, the unit read from the
metric registry (or, for a perf field no budget declares, from its name).

Every renderer calls :func:`value_text` / :func:`metric_text` for a metric's value (the HTML grid,
failure cards, the compare page, ``summary.md``, JUnit, the terminal table) and :func:`fmt` for a
labelled quantity (trend tables, plot labels, ``history show``/``changes``), so a cold start reads
``10.1 s`` everywhere instead of ``1.007e+04 ms`` in one place and ``10070.000000000002`` in another.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.core.units import FORMATTERS, value_text
from harness.metrics.registry import METRICS, NOT_IN_SAMPLE_UNIT
from harness.metrics.spec import Direction

__all__ = ["FORMATTERS", "Quantity", "fmt", "metric_text", "metric_unit", "quantity", "value_text"]


@dataclass(frozen=True)
class Quantity:
    """What a history metric measures: its label, unit and direction (None: not known)."""

    name: str
    label: str
    unit: str
    higher_is_better: bool | None

    @property
    def axis_label(self) -> str:
        return f"{self.label} ({self.unit})" if self.unit else self.label


def metric_unit(metric: str) -> str:
    """The registry's unit of a metric, by its name (``p50_ms``) or a record key ending in it
    (``model.logits.kl``); '' for a metric the registry does not declare."""
    spec = METRICS.get(metric) or METRICS.get(metric.rsplit(".", 1)[-1])
    return "" if spec is None or spec.unit == "output units" else spec.unit


def metric_text(metric: str, value: float | None, *, digits: int = 4) -> str:
    """:func:`value_text` in the unit the metric registry declares for ``metric``."""
    return value_text(value, metric_unit(metric), digits=digits)


def fmt(value: float | None, unit: str = "") -> str:
    """``value`` in ``unit`` with sensible rounding; '' for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if not math.isfinite(value):
        return str(value)
    formatter = FORMATTERS.get(unit)
    if formatter is not None:
        return formatter(float(value))
    text = f"{value:.4g}"
    return f"{text} {unit}".strip() if unit and unit != "output units" else text


#: perf fields no budget declares, by how their name ends (unit, higher is better)
_SUFFIXES: tuple[tuple[str, str, bool | None], ...] = (
    ("_ms", "ms", False), ("_bytes", "bytes", False), ("tokens_per_s", "tokens/s", True),
    ("throughput", "calls/s", True), ("_per_s", "1/s", True), ("_mb", "MiB", False))


def quantity(history_metric: str) -> Quantity:
    """What ``perf:latency_ms.p50`` or ``metric:model.logits.norm_max_abs`` measures."""
    kind, _, key = history_metric.partition(":")
    if kind == "perf":
        for spec in METRICS:
            reading = spec.reading
            if reading is not None and len(reading.paths) == 1 and reading.divisor == 1.0:
                if ".".join(p for p in reading.paths[0] if p != "summary") == key:
                    return Quantity(history_metric, spec.label or spec.name, spec.unit, False)
        series, _, field_name = key.rpartition(".")
        if series.split("[")[0].endswith("_ms") and field_name in NOT_IN_SAMPLE_UNIT:  # a count, a ratio
            return Quantity(history_metric, key, NOT_IN_SAMPLE_UNIT[field_name], None)
        for part in (key.rsplit(".", 1)[-1], key.split(".")[0]):  # `latency_ms.throughput` is calls/s
            for suffix, unit, better in _SUFFIXES:
                if part.endswith(suffix):
                    return Quantity(history_metric, key, unit, better)
        return Quantity(history_metric, key, "", None)
    found = METRICS.get(key.rsplit(".", 1)[-1])
    if found is None:
        return Quantity(history_metric, key, "", None)
    unit = "" if found.unit == "output units" else found.unit
    return Quantity(history_metric, key, unit, found.direction is Direction.HIGHER)
