"""The vocabulary of a metric declaration: what a metric is, which way is good, where it applies.

A metric used to be described in four places (``MetricInfo``, ``HIGHER_IS_BETTER`` sets, literal
threshold tables, the config validator's name lists) and they drifted: a documented perf budget
errored every perf case. Now each metric is one frozen :class:`MetricSpec` in
``harness.metrics.registry``; gates, validators, CLI parsers, reports and the docs tables are
derived from it. This module holds only the types, so it imports nothing heavy.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from harness.core import Check, Precision, UsageError, did_you_mean, valid_names
from harness.core.direction import Direction
from harness.core.registry import Registry, RegistryError

__all__ = ["TOLERANCE_SCOPES", "Direction", "Margin", "MetricPolicy", "MetricRegistry", "MetricSpec", "Outputs",
           "PerfReading", "Scope", "Thresholds", "percentile"]


class Scope(str, enum.Enum):
    """What a metric judges, which decides who computes it and where a threshold for it is accepted."""

    NUMERIC = "numeric"  # compare_arrays: one output of a graph against the PyTorch FP32 reference
    ARTIFACT_LINT = "artifact lint"  # static checks of an exported file
    EMBEDDING = "embedding"  # pooled sentence embeddings against the reference's
    SPAN = "answer span"  # the answer span an extractive-QA head selects, against the reference's
    TEXT = "text"  # harness.metrics.text scores: the building blocks of the generation metrics
    GENERATION = "generation"  # generation parity (gen_*): decoded text against PyTorch's and references
    PERF_BUDGET = "perf budget"  # an absolute limit on a number the perf suites measure


#: scopes whose metrics take a tolerance (``[tolerances.<precision>]``, ``ModelSpec.tolerances``,
#: ``harness check --tolerance``); budgets have their own table.
TOLERANCE_SCOPES = (Scope.NUMERIC, Scope.ARTIFACT_LINT, Scope.EMBEDDING, Scope.SPAN, Scope.TEXT, Scope.GENERATION)


class Outputs(str, enum.Enum):
    """Which outputs ``compare_arrays`` computes a numeric metric for."""

    ALL = "all"  # float and integer/bool outputs
    FLOAT = "float"  # float outputs, logits included
    LOGITS = "logits"  # logits only (distribution-level metrics over the last axis)
    EXACT = "integer"  # integer/bool outputs only (token ids, masks)

    def applies(self, *, exact: bool, logits: bool) -> bool:
        """Whether an output of that kind gets this metric (``logits`` is False for exact outputs)."""
        if exact:
            return self in (Outputs.ALL, Outputs.EXACT)
        return self in (Outputs.ALL, Outputs.FLOAT) or (self is Outputs.LOGITS and logits)


@dataclass(frozen=True)
class Thresholds:
    """Default thresholds per precision; None: not gated by default at that precision."""

    fp32: float | None = None
    fp16: float | None = None
    int8: float | None = None
    #: None: INT8's (``Precision.default_source``); set where INT4 was measured to need its own
    int4: float | None = None

    @classmethod
    def uniform(cls, value: float) -> Thresholds:
        """The same threshold at every precision (a lint: a count that must be zero)."""
        return cls(value, value, value, value)

    def get(self, precision: Precision | str) -> float | None:
        p = Precision(precision)
        value: float | None = getattr(self, p.tolerance_key)
        if value is None and p.default_source is not None:
            return self.get(p.default_source)
        return value

    def items(self) -> Iterator[tuple[Precision, float]]:
        for precision in Precision:
            value = self.get(precision)
            if value is not None:
                yield precision, value


@dataclass(frozen=True)
class PerfReading:
    """Where a budget's number sits in a record's ``perf`` payload.

    The value is the sum of the numbers at ``paths`` (each a key path into the payload), divided
    by ``divisor`` (bytes -> MiB). None when any path is missing: a test checks only the budgets
    whose numbers it measured.
    """

    paths: tuple[tuple[str, ...], ...]
    divisor: float = 1.0

    def read(self, perf: Mapping[str, Any]) -> float | None:
        total = 0.0
        for path in self.paths:
            node: Any = perf
            for key in path:
                if not isinstance(node, Mapping) or key not in node:
                    return None
                node = node[key]
            if isinstance(node, bool) or not isinstance(node, (int, float)):
                return None
            total += float(node)
        return total / self.divisor

    def describe(self) -> str:
        """``latency_ms.summary.p50``, ``cold_start_ms.load + cold_start_ms.first_inference``, ``x / 2^20``."""
        text = " + ".join(f"`{'.'.join(path)}`" for path in self.paths)
        if self.divisor == 2.0 ** 20:
            return f"{text} / 2^20"
        return text if self.divisor == 1.0 else f"{text} / {self.divisor:g}"


_PERCENTILE_NAME = re.compile(r"p(\d{1,2}(?:\.\d+)?)")


def percentile(name: str) -> float | None:
    """``p75`` -> 75.0 (the percentile a latency statistic's name says), else None."""
    match = _PERCENTILE_NAME.fullmatch(name)
    return float(match.group(1)) if match else None


#: what the perf gate compares: sampled latency, or a single number (memory, size, cold start, the
#: cost per request at a served model's sustainable load), or a stored series with no perf policy
#: of its own (an accuracy metric, throughput: ``harness.gate.trend``)
GATE_KINDS = ("latency", "memory", "size", "cold", "load", "trend")


@dataclass(frozen=True)
class MetricPolicy:
    """How the perf gate (``harness.gate.compare``) judges one measured number against a baseline.

    Declared on the number's budget in the registry (``MetricSpec.perf_gate``), so the budget
    ``p50_ms`` and the gate's ``p50`` are one declaration. ``name`` is what the gate calls it: a
    latency statistic (``p50``, ``mean``), judged on every ``latency_ms*`` series of a record, or
    the record's ``perf`` key path of a single number (``peak_rss_bytes``, ``cold_start_ms.load``).
    ``min_effect`` is the smallest relative increase worth failing a build for;
    ``min_abs`` an absolute floor on the increase (in the record's unit, bytes for memory) so small
    numbers cannot trip a relative threshold; ``max_cv`` the largest block-median
    coefficient of variation (latency only) at which the data are trusted at all.
    ``advisory`` metrics are reported but never change the exit code. Every perf metric is
    lower-is-better (a budget's direction).
    """

    name: str
    kind: str  # "latency" | "memory" | "size" | "cold"
    min_effect: float
    min_abs: float = 0.0
    alpha: float = 0.05
    advisory: bool = False
    max_cv: float = 0.10
    #: an advisory percentile that gates after all where both runs measured it sharply: its
    #: order-statistic interval narrower than ``min_effect`` (harness.perf.tail.precise_enough)
    gate_when_precise: bool = False

    def __post_init__(self) -> None:
        if self.kind not in GATE_KINDS:
            raise UsageError(f"policy {self.name!r}: unknown kind {self.kind!r}")
        if self.kind == "latency" and self.name != "mean" and percentile(self.name) is None:
            raise UsageError(f"latency policy {self.name!r}: name must be 'mean' or a percentile like 'p75'")
        if not 0.0 <= self.min_effect <= 1.0:  # catches "5" meant as 5%
            raise UsageError(f"policy {self.name!r}: min_effect must be a fraction in [0, 1] like 0.05, got {self.min_effect}")
        if not 0.0 < self.alpha < 1.0:
            raise UsageError(f"policy {self.name!r}: alpha must be in (0, 1), got {self.alpha}")

    @property
    def gating(self) -> str:
        """``yes``, ``advisory``, or ``advisory unless sharp`` (``gate_when_precise``)."""
        if not self.advisory:
            return "yes"
        return "advisory unless sharp" if self.gate_when_precise else "advisory"


@dataclass(frozen=True)
class Margin:
    """How far a metric may move against a blessed baseline before the accuracy gate calls it a
    REGRESSION (``harness.gate.accuracy``, docs/accuracy-gate.md has the measurements).

    A metric's *badness* is its distance from ``ideal`` in its own direction: an error's value
    (ideal 0, or the metric's ``target``), a similarity's ``1 - value``, BLEU's ``100 - BLEU``.
    The candidate regresses when its badness grows by more than
    ``max(rel * baseline badness, floor at the precision)``: the relative part scales with how
    wrong the variant already was (a 0.0155 INT8 error may not become 0.14 just because 0.15
    is the envelope), the floor keeps thread-count and batch-size jitter on near-perfect
    numbers from tripping it. A higher-is-better metric without an ideal (a token index) is
    judged on its value: it may drop by ``max(rel * |baseline|, floor)``. At the ``exact``
    precisions a baseline *at* the ideal must stay there (FP32 greedy tokens equal PyTorch's).
    ``advisory`` margins are reported but never fail the gate (metrics whose measured noise
    is as large as the changes worth catching).
    """

    rel: float
    floor: Thresholds
    ideal: float | None = None
    exact: tuple[Precision, ...] = ()
    advisory: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rel) and self.rel >= 0):
            raise ValueError(f"margin: rel must be a finite fraction >= 0, got {self.rel!r}")
        for precision in Precision:
            value = self.floor.get(precision)
            if value is None or not math.isfinite(value) or value < 0:
                raise ValueError(f"margin: the floor at {precision.value} must be a finite number >= 0, got {value!r}")

    def floor_at(self, precision: Precision | str) -> float:
        value = self.floor.get(precision)
        return 0.0 if value is None else value


@dataclass(frozen=True)
class MetricSpec:
    """Everything the harness knows about one metric, declared once.

    ``thresholds`` are the default gate per precision (None: advisory, recorded and gated only
    when a model, the config file or ``--tolerance`` sets a threshold). ``context`` marks numbers
    recorded to explain others (sentence counts, the reference's own quality). Scope-specific:
    ``outputs`` (numeric: which outputs get it), ``needs_references`` (generation: exists only for
    corpora with references), ``reading``/``measured_by`` (perf budgets: where the number is read).
    ``label`` names the measured quantity in messages (``latency p50``); it defaults to the name.
    ``headline`` metrics are shown in compact report tables even when not gated.
    """

    name: str
    direction: Direction
    scope: Scope
    description: str
    unit: str = ""
    thresholds: Thresholds | None = None
    outputs: Outputs | None = None
    needs_references: bool = False
    context: bool = False
    headline: bool = False
    target: float | None = None
    reading: PerfReading | None = None
    measured_by: str = ""
    label: str = ""
    #: how far it may move against a blessed baseline (accuracy gate); None: not compared
    margin: Margin | None = None
    #: the interval a threshold of this metric must lie in (None: derived from the unit and the
    #: direction, :attr:`value_range`); declared where the unit does not say it (a cosine)
    bounds: tuple[float, float] | None = None
    #: how the perf gate judges the number against a baseline (budgets only); None: not compared
    perf_gate: MetricPolicy | None = None

    def __post_init__(self) -> None:
        def bad(why: str) -> ValueError:
            return ValueError(f"metric {self.name!r}: {why}")

        if not self.name or not self.name.replace("_", "").isalnum() or self.name != self.name.lower():
            raise bad("a name is lower-case letters, digits and underscores")
        if not self.description.strip():
            raise bad("needs a description (it is the docs and the help text)")
        if (self.outputs is not None) != (self.scope is Scope.NUMERIC):
            raise bad("'outputs' is declared for numeric metrics, and only for them")
        if (self.reading is not None) != (self.scope is Scope.PERF_BUDGET):
            raise bad("a perf budget declares its 'reading', and only a budget does")
        if self.scope is Scope.PERF_BUDGET and (self.thresholds is not None or self.direction is not Direction.LOWER):
            raise bad("a budget is an upper limit that exists only when a model declares it")
        if self.needs_references and self.scope is not Scope.GENERATION:
            raise bad("only generation metrics depend on a corpus's references")
        if self.context and self.thresholds is not None:
            raise bad("a context metric has no default gate")
        if self.bounds is not None and not self.bounds[0] < self.bounds[1]:
            raise bad(f"bounds {self.bounds!r} are not an interval")
        for precision, value in (self.thresholds.items() if self.thresholds else ()):
            if self.threshold_problem(value) is not None:
                raise bad(f"default threshold {value!r} at {precision.value} is not a valid bound")
        problem = self._perf_gate_problem()
        if problem:
            raise bad(problem)

    def _perf_gate_problem(self) -> str | None:
        """Why ``perf_gate`` cannot judge what this metric reads, None when it can."""
        if self.perf_gate is None:
            return None
        if self.reading is None or len(self.reading.paths) != 1:
            return "the perf gate compares one recorded number: a budget read from one path"
        if (self.perf_gate.kind == "latency") != self.latency_summary:
            return "a latency policy judges a latency summary's statistic, a scalar policy anything else"
        if self.perf_gate.name != self.gate_name:
            return f"its perf-gate policy is named {self.perf_gate.name!r}; the gate reads it as {self.gate_name!r}"
        return None

    @property
    def latency_summary(self) -> bool:
        """Whether the budget reads a statistic of the entry graph's ``latency_ms`` summary."""
        paths = self.reading.paths if self.reading is not None else ()
        return len(paths) == 1 and paths[0][:2] == ("latency_ms", "summary") and len(paths[0]) == 3

    @property
    def gate_name(self) -> str:
        """What the perf gate calls this budget's number: the statistic of a latency summary
        (``p50``: judged on every ``latency_ms*`` series), else the recorded key path
        (``peak_rss_bytes``, ``cold_start_ms.load``); empty for a metric the gate cannot read."""
        if self.reading is None or len(self.reading.paths) != 1:
            return ""
        path = self.reading.paths[0]
        return path[-1] if self.latency_summary else ".".join(path)

    @property
    def value_range(self) -> tuple[float, float]:
        """The interval the metric's values, and so its thresholds, lie in: declared
        (``bounds``), else read from the unit (a fraction is [0, 1], BLEU and chrF [0, 100],
        counts are >= 0), else an error's [0, inf) (an error bound below 0 can never pass)."""
        if self.bounds is not None:
            return self.bounds
        unit = self.unit.lower()
        if unit == "fraction":
            return (0.0, 1.0)
        if "(0-100)" in unit:
            return (0.0, 100.0)
        if self.direction is Direction.LOWER or unit in _COUNT_UNITS:
            return (0.0, math.inf)
        return (-math.inf, math.inf)

    def badness(self, value: float) -> float:
        """How far ``value`` is from perfect in this metric's direction (the accuracy gate's
        yardstick, see :class:`Margin`); for a higher-is-better metric without an ideal, minus
        the value (worse is still larger)."""
        ideal = self.margin.ideal if self.margin is not None else None
        if self.higher_is_better:
            return ideal - value if ideal is not None else -value
        center = ideal if ideal is not None else self.target
        return value if center is None else abs(value - center)  # a ratio is as wrong above its target as below

    def margin_scale(self, value: float) -> float:
        """What ``Margin.rel`` is a fraction of: the baseline's badness, or |value| without an ideal."""
        if self.higher_is_better and (self.margin is None or self.margin.ideal is None):
            return abs(value)
        return abs(self.badness(value))

    @property
    def higher_is_better(self) -> bool:
        return self.direction.higher_is_better

    @property
    def logits_only(self) -> bool:
        return self.outputs is Outputs.LOGITS

    @property
    def symbol(self) -> str:
        return self.direction.symbol

    @property
    def role(self) -> str:
        """``gate`` (a default threshold, or a budget: gated whenever declared), ``context``
        (recorded to explain other numbers) or ``advisory`` (recorded; gated on request)."""
        if self.thresholds is not None or self.scope is Scope.PERF_BUDGET:
            return "gate"
        return "context" if self.context else "advisory"

    @property
    def title(self) -> str:
        return self.label or self.name

    def threshold(self, precision: Precision | str) -> float | None:
        """The default threshold at ``precision``, None where it is not gated by default."""
        return None if self.thresholds is None else self.thresholds.get(precision)

    def threshold_problem(self, value: Any) -> str | None:
        """Why ``value`` cannot be a threshold of this metric, None when it can. The one rule for
        every place a threshold is given (the config file, ``harness check``/``bisect --tolerance``):
        a finite number inside the metric's :attr:`value_range` (an error bound >= 0, a cosine or
        an agreement in [0, 1], BLEU in [0, 100]): outside it the gate can never pass (an error
        below 0, a cosine above 1) or can never fail (an agreement below 0)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"expected a finite number, got {value!r}"
        lo, hi = self.value_range
        if lo <= value <= hi:
            return None
        if not self.higher_is_better and lo == 0.0 and value < 0:
            return f"an error bound must be >= 0, got {value:g}"
        return f"{value:g} is outside {self.name}'s range {_interval(lo, hi)}"

    def check(self, threshold: float, *, within: str = "") -> Check:
        """A gate on this metric: the direction always comes from the declaration. The one
        place a ``Check`` is built (``tests/test_metric_declaration.py`` holds it so); ``within``
        qualifies the name for a gate on one part of a case (``cached_decoding.logits`` ->
        ``cached_decoding.logits.cosine``)."""
        name = f"{within}.{self.name}" if within else self.name
        return Check(name, float(threshold), self.higher_is_better)

    def default_check(self, precision: Precision | str) -> Check | None:
        value = self.threshold(precision)
        return None if value is None else self.check(value)


#: units whose values are counts (never negative whichever way is good)
_COUNT_UNITS = ("tokens", "sentences", "nodes", "axes", "probes", "characters")


def _interval(lo: float, hi: float) -> str:
    return f"[{lo:g}, inf)" if hi == math.inf else f"[{lo:g}, {hi:g}]"


class MetricRegistry:
    """An ordered, read-only set of declarations; lookups fail with a did-you-mean.

    Order is declaration order: derived tables (default gates, report columns, docs) keep it.
    """

    def __init__(self, specs: Iterable[MetricSpec]) -> None:
        registry: Registry[MetricSpec] = Registry("metric", lambda spec: spec.name)
        for spec in specs:
            if spec.name in registry:  # the same spec listed twice is a mistake too, not a re-import
                raise RegistryError(f"metric {spec.name!r} declared twice")
            registry.register(spec)
        self._specs: dict[str, MetricSpec] = registry.items()

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[MetricSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def __getitem__(self, name: str) -> MetricSpec:
        return self.lookup(name)

    def get(self, name: str) -> MetricSpec | None:
        return self._specs.get(name)

    def lookup(self, name: str, *scopes: Scope, what: str = "metric") -> MetricSpec:
        """The declaration of ``name`` (within ``scopes`` if given), else a one-line UsageError."""
        spec = self._specs.get(name)
        if spec is None or (scopes and spec.scope not in scopes):
            valid = self.names(*scopes)
            raise UsageError(f"unknown {what} {name!r}{did_you_mean(name, valid)}; {valid_names(name, sorted(valid))}")
        return spec

    def of(self, *scopes: Scope) -> tuple[MetricSpec, ...]:
        """Declarations in ``scopes`` (every one when none is given), in declaration order."""
        return tuple(s for s in self._specs.values() if not scopes or s.scope in scopes)

    def names(self, *scopes: Scope) -> tuple[str, ...]:
        return tuple(s.name for s in self.of(*scopes))

    def as_dict(self, *scopes: Scope) -> dict[str, MetricSpec]:
        return {s.name: s for s in self.of(*scopes)}

    def defaults(self, precision: Precision | str, *scopes: Scope) -> dict[str, float]:
        """metric -> default threshold at ``precision``, for the metrics gated by default there."""
        out: dict[str, float] = {}
        for spec in self.of(*scopes):
            value = spec.threshold(precision)
            if value is not None:
                out[spec.name] = value
        return out
