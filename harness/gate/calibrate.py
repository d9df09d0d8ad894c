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

Calibration is an estimate of noise, so it needs several runs of the same build
(``min_runs``, default :data:`DEFAULT_MIN_RUNS`): across them each metric's worst value moves,
and that spread joins the registry's floor (the distance a bound keeps from the worst observed
value is at least ``max(floor, spread)``), so no proposal is tighter than the measured noise
allows. With fewer runs nothing is proposed: the snippet reports the interval each metric was
observed in, and ``harness calibrate`` exits 1 (a single 32-sample run once proposed
``cosine = 0.99999999999989``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from harness.core import Precision, UsageError
from harness.metrics.margins import MarginTable, fmt_value
from harness.metrics.registry import METRICS, MetricSpec
from harness.results.record import MetricKey, RecordLike, readable_records
from harness.settings.commands import default_for

DEFAULT_HEADROOM: float = default_for("headroom", "calibrate")
#: runs of one build a calibration needs before it proposes anything (the spread across them is
#: the measured noise; one run has none to measure)
DEFAULT_MIN_RUNS: int = default_for("min_runs", "calibrate")


@dataclass(frozen=True)
class Interval:
    """Where one gated metric of one model and precision was observed: each run's worst value."""

    model: str
    precision: str
    metric: str
    worst_per_run: tuple[float, ...]

    @property
    def low(self) -> float:
        return min(self.worst_per_run)

    @property
    def high(self) -> float:
        return max(self.worst_per_run)

    @property
    def spread(self) -> float:
        """The measured run-to-run noise of the worst value (0 with a single run: unmeasured)."""
        return self.high - self.low


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
    runs: int = 1
    min_runs: int = 1
    intervals: list[Interval] = field(default_factory=list)

    @property
    def enough_runs(self) -> bool:
        return self.runs >= self.min_runs

    @property
    def exit_code(self) -> int:
        """1 when nothing could be calibrated: too few runs, or no passing gated case."""
        return 0 if self.enough_runs and self.intervals else 1

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
        if not self.intervals:
            lines += ["", "# nothing calibrated: no passing case with a gated metric"]
            return "\n".join(lines) + "\n"
        if not self.enough_runs:
            lines += ["", f"# NOT proposed: {self.runs} run(s) < --min-runs {self.min_runs}: the run-to-run noise a "
                          "tolerance must clear cannot be measured; the intervals observed:"]
            for i in sorted(self.intervals, key=lambda i: (i.model, _precision_rank(i.precision), i.metric)):
                spec = METRICS[i.metric]
                lines.append(f"# {i.model} {i.precision} {i.metric}: worst {fmt_value(spec, i.low)} .. "
                             f"{fmt_value(spec, i.high)} over {len(i.worst_per_run)} run(s)")
            return "\n".join(lines) + "\n"
        lines.append(f"# {self.runs} runs: each bound keeps at least max(noise floor, the worst value's spread "
                     "across runs) from the worst value")
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
    known = {p.value: p.accuracy_rank for p in Precision}
    return known.get(precision, len(known))


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



def calibrate(records: Iterable[RecordLike], *, source: str = "", headroom: float = DEFAULT_HEADROOM,
              margins: MarginTable | None = None) -> Calibration:
    """Proposals from one run's records, the caller vouching for its noise (``min_runs=1``;
    the registry floors stand in for the unmeasured spread). See :func:`calibrate_runs`."""
    return calibrate_runs([records], source=source, headroom=headroom, margins=margins, min_runs=1)


def calibrate_runs(runs: Iterable[Iterable[RecordLike]], *, source: str = "",
                   headroom: float = DEFAULT_HEADROOM, margins: MarginTable | None = None,
                   min_runs: int = DEFAULT_MIN_RUNS) -> Calibration:
    """Proposals from several runs of one build (see the module doc for the rule)."""
    if not (math.isfinite(headroom) and headroom >= 1.0):
        raise UsageError(f"--headroom: must be a finite number >= 1 (1 = no room for noise), got {headroom!r}")
    if min_runs < 1:
        raise UsageError(f"--min-runs: must be >= 1, got {min_runs}")
    table = margins or MarginTable()
    worst: dict[tuple[str, str, str], tuple[float, str]] = {}
    per_run: dict[tuple[str, str, str], list[float]] = {}
    current: dict[tuple[str, str, str], float] = {}
    skipped: list[str] = []
    settings: dict[str, Any] = {}
    count = 0
    for records in runs:
        count += 1
        run_worst: dict[tuple[str, str, str], float] = {}
        _scan(records, worst, run_worst, current, skipped, settings)
        for slot, value in run_worst.items():
            per_run.setdefault(slot, []).append(value)
    intervals = [Interval(m, p, n, tuple(v)) for (m, p, n), v in per_run.items()]
    spreads = {(i.model, i.precision, i.metric): i.spread for i in intervals}
    proposals: list[Proposal] = []
    unchanged = 0
    for (model, precision, name), (observed, where) in (worst.items() if count >= min_runs else ()):
        spec = METRICS[name]
        margin = table.resolve(spec, model, precision)
        floor = max(margin.floor if margin is not None else 0.0, spreads[(model, precision, name)])
        proposed = bound(spec, observed, floor, headroom)
        cur = current[(model, precision, name)]
        if not spec.direction.worse(cur, proposed):  # not tighter than the current threshold
            unchanged += 1
            continue
        proposals.append(Proposal(model, precision, name, observed, where, cur, proposed))
    return Calibration(proposals, source, headroom, settings, sorted(set(skipped)), unchanged, count, min_runs,
                       intervals)


def _scan(records: Iterable[RecordLike], worst: dict[tuple[str, str, str], tuple[float, str]],
          run_worst: dict[tuple[str, str, str], float], current: dict[tuple[str, str, str], float],
          skipped: list[str], settings: dict[str, Any]) -> None:
    """One run's gated values into the running worst (overall and this run's) and thresholds."""
    for rec in readable_records(records):
        if not rec.thresholds or not rec.model or not rec.precision:
            continue
        if rec.verdict != "pass":
            skipped.append(f"{rec.id} ({rec.verdict})")
            continue
        if not settings and rec.settings:
            settings.update({k: rec.settings[k] for k in ("num_samples", "batch_size", "opset", "exporter")
                             if k in rec.settings})
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
            if slot not in worst or spec.direction.worse(value, worst[slot][0]):
                worst[slot] = (value, f"{rec.variant} {key}")
            if slot not in run_worst or spec.direction.worse(value, run_worst[slot]):
                run_worst[slot] = value
            if slot not in current or spec.direction.worse(threshold, current[slot]):  # the loosest applied
                current[slot] = threshold
