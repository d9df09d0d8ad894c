"""Tolerance calibration: tighten the generic envelope to a team's own models.

The default thresholds must fit every model (INT8 norm max abs <= 0.15), so for one model they
are mostly slack: bert-tiny's ORT INT8 sits at 0.0155. From a known-good run, :func:`calibrate`
proposes, per model and precision, the tightest thresholds that run would still pass with room
for noise, and :meth:`Calibration.to_toml` writes them as ``[models.<name>.tolerances.<precision>]``
tables for ``harness.toml`` (the suites read them like any model override).

The rule, per gated metric (one the run applied a threshold to):

* ``observed`` is the worst value over the model's cases at that precision: every provider,
  graph and output (a config tolerance applies to all of them);
* an error bound becomes ``max(observed x headroom, observed + floor)``, a similarity
  ``ideal - max(gap x headroom, gap + floor)`` with ``gap = ideal - observed`` (a metric without
  an ideal: ``min(observed / headroom, observed - floor)``); ``floor`` is the metric's accuracy
  noise floor at that precision (``Margin`` in ``harness.metrics.registry``, measured run to
  run), so a metric observed at 0 gets a bound its noise cannot cross;
* rounded to two significant digits, outward;
* never looser than the threshold the run applied (the defaults or the model's own): a
  proposal that would not tighten anything is left out.

``headroom`` defaults to 2: the largest run-to-run movement measured on an error well above
its floor was +40% (docs/accuracy-gate.md), so x2 leaves the same again for a new machine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from harness.core import UsageError
from harness.metrics.margins import MarginTable, fmt_value
from harness.metrics.registry import METRICS, MetricSpec
from harness.results.record import MetricKey, Record, RecordError

DEFAULT_HEADROOM = 2.0


@dataclass(frozen=True)
class Proposal:
    """One tightened threshold: ``metric`` of ``model`` at ``precision``."""

    model: str
    precision: str
    metric: str
    observed: float
    where: str  # the variant and metric key of the worst value
    current: float  # the threshold the run applied (the loosest, if cases differed)
    proposed: float

    @property
    def spec(self) -> MetricSpec:
        return METRICS[self.metric]

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "precision": self.precision, "metric": self.metric, "observed": self.observed,
                "where": self.where, "current": self.current, "proposed": self.proposed,
                "op": self.spec.symbol}


@dataclass
class Calibration:
    proposals: list[Proposal]
    source: str
    headroom: float
    settings: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # failed/errored cases: not calibrated on
    unchanged: int = 0  # gated metrics already as tight as the rule allows

    def to_toml(self) -> str:
        """A ``harness.toml`` snippet: one table per (model, precision), a comment per bound."""
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        lines = [
            f"# harness calibrate {self.source} ({stamp})",
            f"# bound = observed x {self.headroom:g} (at least observed + the metric's noise floor), worst over "
            "providers, graphs and outputs; never looser than the threshold the run applied",
        ]
        if self.settings:
            shown = ", ".join(f"{k}={v}" for k, v in self.settings.items())
            lines.append(f"# measured with {shown}: run with the same settings to compare like with like")
        for case in self.skipped:
            lines.append(f"# not calibrated on (did not pass): {case}")
        current: tuple[str, str] | None = None
        for p in sorted(self.proposals, key=lambda p: (p.model, _precision_rank(p.precision))):
            if (p.model, p.precision) != current:
                current = (p.model, p.precision)
                lines += ["", f"[models.{_key(p.model)}.tolerances.{p.precision}]"]
            lines.append(f"{_key(p.metric)} = {_number(p.proposed)}  # observed {fmt_value(p.spec, p.observed)} ({p.where}), "
                         f"was {p.spec.symbol} {p.current:g}")
        if not self.proposals:
            lines += ["", "# nothing to tighten: every gated metric is already within its headroom"]
        return "\n".join(lines) + "\n"


def _precision_rank(precision: str) -> int:
    order = ("fp32", "fp16", "int8")
    return order.index(precision) if precision in order else len(order)


def _key(name: str) -> str:
    """A TOML key: bare when it can be, quoted otherwise."""
    if name and all(c.isalnum() or c in "-_" for c in name):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _number(value: float) -> str:
    text = repr(float(value))
    return text if ("e" in text or "." in text) else text + ".0"


def _round_out(value: float, up: bool) -> float:
    """Two significant digits, rounded away from the observed value (``up`` for an upper bound)."""
    if value == 0 or not math.isfinite(value):
        return value
    exponent = math.floor(math.log10(abs(value))) - 1
    scale = 10.0 ** exponent
    scaled = value / scale
    # 1e-9 slack: 0.15 / 1e-2 is 14.999999999999998, which must not round up to 16
    rounded = math.ceil(scaled - 1e-9) if up else math.floor(scaled + 1e-9)
    return float(f"{rounded * scale:.12g}")


def bound(spec: MetricSpec, observed: float, floor: float, headroom: float) -> float:
    """The calibrated threshold for ``observed`` (before clamping to the current one)."""
    ideal = spec.margin.ideal if spec.margin is not None else None
    if not spec.higher_is_better:
        return _round_out(max(observed * headroom, observed + floor), up=True)
    if ideal is not None:
        gap = max(ideal - observed, 0.0)
        allowed = _round_out(max(gap * headroom, gap + floor), up=True)
        # not rounded again: near 1 (FP32 cosine 1 - 1e-13) twelve digits would give exactly 1.0
        return ideal - allowed
    return _round_out(min(observed / headroom, observed - floor), up=False)


def _worse(spec: MetricSpec, a: float, b: float) -> bool:
    return a < b if spec.higher_is_better else a > b


def _typed(records: Iterable[Record | Mapping[str, Any]]) -> Iterable[Record]:
    for rec in records:
        try:
            yield Record.coerce(rec)
        except RecordError:
            continue


def calibrate(records: Iterable[Record | Mapping[str, Any]], *, source: str = "", headroom: float = DEFAULT_HEADROOM,
              margins: MarginTable | None = None) -> Calibration:
    """Proposals from a run's records (see the module doc for the rule)."""
    if not (math.isfinite(headroom) and headroom >= 1.0):
        raise UsageError(f"--headroom: must be a finite number >= 1 (1 = no room for noise), got {headroom!r}")
    table = margins or MarginTable()
    worst: dict[tuple[str, str, str], tuple[float, str]] = {}
    current: dict[tuple[str, str, str], float] = {}
    skipped: list[str] = []
    settings: dict[str, Any] = {}
    for rec in _typed(records):
        if not rec.thresholds or not rec.model or not rec.precision:
            continue
        if rec.verdict != "pass":
            skipped.append(f"{rec.id} ({rec.verdict})")
            continue
        if not settings and rec.settings:
            settings = {k: rec.settings[k] for k in ("num_samples", "batch_size", "opset", "exporter")
                        if k in rec.settings}
        for key, gate in rec.thresholds.items():
            parsed = MetricKey.parse(key)
            spec = METRICS.get(parsed.metric)
            value = rec.metrics.get(key)
            if spec is None or spec.margin is None or not isinstance(gate, Mapping) or value is None:
                continue
            value, threshold = float(value), float(gate.get("threshold", math.nan))
            if not (math.isfinite(value) and math.isfinite(threshold)):
                continue
            slot = (rec.model, rec.precision, spec.name)
            if slot not in worst or _worse(spec, value, worst[slot][0]):
                worst[slot] = (value, f"{rec.variant} {key}")
            if slot not in current or _worse(spec, threshold, current[slot]):  # the loosest applied
                current[slot] = threshold
    proposals: list[Proposal] = []
    unchanged = 0
    for (model, precision, name), (observed, where) in worst.items():
        spec = METRICS[name]
        margin = table.resolve(spec, model, precision)
        floor = margin.floor if margin is not None else 0.0
        proposed = bound(spec, observed, floor, headroom)
        cur = current[(model, precision, name)]
        tighter = proposed > cur if spec.higher_is_better else proposed < cur
        if not tighter:
            unchanged += 1
            continue
        proposals.append(Proposal(model, precision, name, observed, where, cur, proposed))
    return Calibration(proposals, source, headroom, settings, sorted(skipped), unchanged)
