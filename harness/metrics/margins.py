"""Accuracy-gate margins: the registry's defaults, overridden per metric, precision and model.

Each metric declares its default :class:`~harness.metrics.spec.Margin` in
``harness.metrics.registry``. A team narrows or widens one without code, from the
``[margins]`` tables of ``harness.toml`` (whole run, or ``[models.<name>.margins]``) or from
``--accuracy-margin [MODEL:][PRECISION:]METRIC=...`` on the command line. This module parses
both spellings into :class:`MarginRule` objects and resolves, for one (metric, model,
precision), the :class:`EffectiveMargin` the gate applies: the most specific rule wins
(model + precision > model > precision > every precision), and among equally specific rules
the later one (the command line comes after the config file).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.core import Precision, UsageError, did_you_mean
from harness.metrics.registry import METRICS
from harness.metrics.spec import MetricSpec

#: fields of a margin override, in ``harness.toml`` and on the command line
FIELDS = ("rel", "abs", "exact", "advisory")
#: what ``[margins]`` / ``--accuracy-margin`` say for "every precision"
ALL = "*"


@dataclass(frozen=True)
class MarginOverride:
    """Changes to a default margin; None leaves that part as declared."""

    rel: float | None = None
    abs: float | None = None
    exact: bool | None = None
    advisory: bool | None = None


@dataclass(frozen=True)
class MarginRule:
    """``override`` for ``metric`` at ``precision`` (None: all) of ``model`` (None: all)."""

    metric: str
    override: MarginOverride
    model: str | None = None
    precision: str | None = None
    source: str = ""

    @property
    def specificity(self) -> int:
        return (2 if self.model is not None else 0) + (1 if self.precision is not None else 0)

    def applies(self, metric: str, model: str | None, precision: str | None) -> bool:
        return (self.metric == metric and (self.model is None or self.model == model)
                and (self.precision is None or self.precision == precision))


@dataclass(frozen=True)
class EffectiveMargin:
    """The margin one comparison uses: the declared one with every applicable override applied."""

    rel: float
    floor: float
    exact: bool
    advisory: bool
    source: str = "default"

    def describe(self) -> str:
        parts = [f"rel {self.rel:.0%}", f"abs {self.floor:.3g}"]
        if self.exact:
            parts.append("exact")
        if self.advisory:
            parts.append("advisory")
        return ", ".join(parts) + ("" if self.source == "default" else f" ({self.source})")


class MarginTable:
    """Every override of a run's accuracy gate, in the order given; resolves per comparison."""

    def __init__(self, rules: Iterable[MarginRule] = ()) -> None:
        self.rules = tuple(rules)

    def __add__(self, other: MarginTable) -> MarginTable:
        return MarginTable((*self.rules, *other.rules))

    def resolve(self, spec: MetricSpec, model: str | None, precision: str | None) -> EffectiveMargin | None:
        """The margin for ``spec`` at (``model``, ``precision``); None when the metric declares none."""
        declared = spec.margin
        if declared is None:
            return None
        known = precision if precision in {p.value for p in Precision} else None
        rel = declared.rel
        floor = declared.floor_at(known) if known else max(declared.floor_at(p) for p in Precision)
        exact = known is not None and Precision(known) in declared.exact
        advisory, source = declared.advisory, "default"
        applicable = [r for r in self.rules if r.applies(spec.name, model, precision)]
        for rule in sorted(applicable, key=lambda r: r.specificity):  # stable: later rules win ties
            o = rule.override
            rel = rel if o.rel is None else o.rel
            floor = floor if o.abs is None else o.abs
            exact = exact if o.exact is None else o.exact
            advisory = advisory if o.advisory is None else o.advisory
            source = rule.source or "override"
        return EffectiveMargin(rel, floor, exact, advisory, source)


# -- parsing --------------------------------------------------------------------------------------
def _fraction(raw: Any, where: str) -> float:
    """``0.1``, ``10%`` or ``"10%"`` -> 0.1: a finite fraction >= 0."""
    value: Any = raw
    if isinstance(raw, str):
        text = raw.strip()
        try:
            value = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
        except ValueError:
            raise UsageError(f"{where}: {raw!r} is not a number (e.g. 0.25 or 25%)") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise UsageError(f"{where}: expected a finite number >= 0, got {raw!r}")
    return float(value)


def _flag(raw: Any, where: str) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise UsageError(f"{where}: expected true or false, got {raw!r}")


def override_from_mapping(values: Mapping[str, Any], where: str) -> MarginOverride:
    """``{rel = 0.1, abs = 0.002, exact = true}`` (a TOML inline table) -> an override."""
    if not isinstance(values, Mapping):
        raise UsageError(f"{where}: expected a table like {{ rel = 0.25, abs = 0.001 }}, got {values!r}")
    for key in values:
        if key not in FIELDS:
            raise UsageError(f"{where}.{key}: unknown field{did_you_mean(str(key), FIELDS)}; valid: {', '.join(FIELDS)}")
    if not values:
        raise UsageError(f"{where}: empty margin; set one of {', '.join(FIELDS)}")
    return MarginOverride(
        rel=_fraction(values["rel"], f"{where}.rel") if "rel" in values else None,
        abs=_fraction(values["abs"], f"{where}.abs") if "abs" in values else None,
        exact=_flag(values["exact"], f"{where}.exact") if "exact" in values else None,
        advisory=_flag(values["advisory"], f"{where}.advisory") if "advisory" in values else None,
    )


def margin_metric(name: str, where: str) -> MetricSpec:
    """The declaration of a metric that has a margin, else a one-line UsageError."""
    spec = METRICS.get(name)
    if spec is None or spec.margin is None:
        valid = sorted(s.name for s in METRICS if s.margin is not None)
        raise UsageError(f"{where}: unknown metric {name!r} (or one without an accuracy margin)"
                         f"{did_you_mean(name, valid)}; valid: {', '.join(valid)}")
    return spec


def parse_cli_margin(text: str, where: str = "--accuracy-margin") -> MarginRule:
    """``[MODEL:][PRECISION:]METRIC=VALUES``; VALUES are comma-separated ``rel=25%``, ``abs=0.002``,
    ``exact``, ``advisory`` (or ``exact=false``...), or bare ``REL[,ABS]``: ``int8:cosine=10%,1e-4``."""
    head, sep, tail = text.partition("=")
    if not sep or not head.strip() or not tail.strip():
        raise UsageError(f"{where} {text!r}: expected [MODEL:][PRECISION:]METRIC=REL[,ABS], e.g. int8:cosine=10%,1e-4")
    parts = [p.strip() for p in head.split(":")]
    if len(parts) > 3 or not all(parts):
        raise UsageError(f"{where} {text!r}: expected at most MODEL:PRECISION:METRIC before '='")
    metric = parts[-1]
    model: str | None = None
    precision: str | None = None
    precisions = [p.value for p in Precision]
    if len(parts) == 3:
        model, precision = parts[0], parts[1]
    elif len(parts) == 2:
        if parts[0].lower() in precisions:
            precision = parts[0]
        else:
            model = parts[0]
    if precision is not None:
        precision = precision.lower()
        if precision not in precisions:
            raise UsageError(f"{where} {text!r}: unknown precision {precision!r}"
                             f"{did_you_mean(precision, precisions)}; valid: {', '.join(precisions)}")
    margin_metric(metric, f"{where} {text!r}")
    values: dict[str, Any] = {}
    positional = ["rel", "abs"]
    for item in (i.strip() for i in tail.split(",")):
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if eq:
            values[key] = value.strip()
        elif key in ("exact", "advisory"):
            values[key] = True
        elif positional:
            values[positional.pop(0)] = item
        else:
            raise UsageError(f"{where} {text!r}: too many values; use rel=..., abs=..., exact, advisory")
    override = override_from_mapping(values, f"{where} {text!r}")
    return MarginRule(metric, override, model, precision, source=f"{where} {text}")


def rules_from_config(table: Mapping[str, Any], where: str, model: str | None = None,
                      source: str = "") -> list[MarginRule]:
    """A validated ``[margins]`` table: keys are metrics (every precision) or precisions (a table of
    metrics). ``where`` names the table in errors (``harness.toml: models.x.margins``)."""
    if not isinstance(table, Mapping):
        raise UsageError(f"{where}: expected a table, got {table!r}")
    precisions = {p.value for p in Precision}
    rules: list[MarginRule] = []
    for key, body in table.items():
        if key in precisions:
            if not isinstance(body, Mapping):
                raise UsageError(f"{where}.{key}: expected a table of metrics, got {body!r}")
            for metric, values in body.items():
                margin_metric(metric, f"{where}.{key}.{metric}")
                rules.append(MarginRule(metric, override_from_mapping(values, f"{where}.{key}.{metric}"), model, key,
                                        source or where))
        else:
            margin_metric(key, f"{where}.{key}")
            rules.append(MarginRule(key, override_from_mapping(body, f"{where}.{key}"), model, None, source or where))
    return rules


# -- showing values ---------------------------------------------------------------------------------
def fmt(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.6g}" if value == 0 or 1e-3 <= abs(value) < 1e6 else f"{value:.3g}"


def fmt_value(spec: MetricSpec, value: float) -> str:
    """A metric value; one within 1e-3 of its ideal as ``1 - 1.5e-07`` (``0.999999850`` hides the change)."""
    ideal = spec.margin.ideal if spec.margin is not None else None
    if ideal is not None and math.isfinite(value) and 0 < abs(ideal - value) < 1e-3:
        return f"{ideal:g} {'-' if value < ideal else '+'} {abs(ideal - value):.3g}"
    return fmt(value)
