"""Plain value types shared by every part of the harness.

This module imports nothing else from the harness, so any module may depend on it. The
provider *table* (which short names exist) is declared by the backends and read from
``harness.runners`` (``PROVIDERS``, ``parse_provider``); a ``Provider`` here is a plain record.
A *variant* is one cell of the matrix: model x precision x provider. Its ``id`` is the
stable, readable test id (``marian-tiny-int8-ort_cpu``) that appears in pytest ids,
results records and baselines; never change how it is spelled.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from harness.core.direction import Direction
from harness.core.errors import UsageError, did_you_mean
from harness.core.runtime import RuntimeSettings, axis_suffix
from harness.core.values import Settings

if TYPE_CHECKING:  # pragma: no cover
    from harness.core.runtime import RuntimeSettings
    from harness.zoo.base import ModelCatalog


class Precision(str, enum.Enum):
    """A numeric precision of a variant, declared from the most to the least accurate: every list
    of precisions (the CLI's choices, the config validator, detection's "loosest" order) is this
    enum's order."""

    FP32 = "fp32"
    FP16 = "fp16"
    INT8 = "int8"
    #: static (calibrated, QDQ) INT8: ``onnxruntime.quantization.quantize_static`` on corpus
    #: sentences disjoint from the judged ones; judged with INT8's thresholds unless a model or
    #: config sets its own
    INT8_STATIC = "int8-static"
    #: INT4 weight-only (block-wise, activations stay float): ``MatMulNBits`` with ``bits=4`` as
    #: onnxruntime's ``MatMulNBitsQuantizer`` and onnxruntime-genai's model builder write it, or
    #: block-quantized int4 ``DequantizeLinear``; how LLMs ship on ONNX Runtime. It has its own
    #: thresholds where INT4 was measured to differ from INT8 (``harness.metrics.registry``) and
    #: INT8's elsewhere (``default_source``)
    INT4 = "int4"

    @property
    def tolerance_key(self) -> str:
        """The precision whose default thresholds apply (static INT8 starts from INT8's)."""
        return "int8" if self is Precision.INT8_STATIC else self.value

    @property
    def default_source(self) -> Precision | None:
        """The precision whose default threshold stands in where this one declares none: INT4's
        missing defaults are INT8's (a weaker precision is never gated tighter than a stronger
        one by omission). A model's or config's own INT8 overrides do not carry over."""
        return Precision.INT8 if self is Precision.INT4 else None

    @property
    def accuracy_rank(self) -> int:
        """Position from the most accurate (0, FP32): "the loosest of several" is the highest."""
        return list(Precision).index(self)

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


@dataclass(frozen=True)
class Provider:
    """Where a variant runs: a backend and, for ONNX Runtime, an execution provider.

    ``short`` is the name users type (``--providers ort_cpu``) and that ends test ids.
    Each backend declares the providers it serves (``Backend.providers`` in its module
    under ``harness/runners/``); ``PROVIDERS`` is derived from them.
    """

    short: str
    backend: str  # a registered backend's name: "pytorch", "onnxruntime", ...
    device: str  # torch device or ORT execution provider name
    needs_gpu: bool = False


DEFAULT_PRECISIONS = (Precision.FP32, Precision.FP16, Precision.INT8)


def precision_overrides(overrides: "Mapping[str, Mapping[str, float]] | None",
                        precision: "Precision | str") -> dict[str, float]:
    """A model's per-precision threshold overrides for ``precision``: those of the precision whose
    defaults it shares (``int8`` for ``int8-static``), then its own on top."""
    p = Precision(precision)
    out = dict((overrides or {}).get(p.tolerance_key, {}) or {})
    if p.value != p.tolerance_key:
        out.update((overrides or {}).get(p.value, {}) or {})
    return out


def parse_precision(name: str, *, option: str = "--precisions") -> Precision:
    try:
        return Precision(name.strip().lower())
    except ValueError:
        valid = [p.value for p in Precision]
        raise UsageError(
            f"{option}: unknown precision {name!r}{did_you_mean(name, valid)}; valid: {', '.join(valid)}"
        ) from None


@dataclass(frozen=True)
class Variant:
    """One cell of the matrix. ``id`` is the stable public name of the case."""

    model: str
    precision: Precision
    provider: Provider
    #: the case's non-default runtime axis values (``(("graph_optimization", "disabled"),)``);
    #: empty for every default case, so the default run's ids never change
    runtime: tuple[tuple[str, str], ...] = ()

    @property
    def id(self) -> str:
        return f"{self.model}-{self.precision.value}-{self.provider.short}{axis_suffix(self.runtime)}"

    @property
    def backend(self) -> str:
        return self.provider.backend


@dataclass(frozen=True)
class Check:
    """One gate: ``metric`` compared with ``threshold``.

    ``higher_is_better`` decides the direction: errors must stay <= threshold,
    agreements and similarities must stay >= threshold. The harness builds every check with
    ``harness.metrics.registry.metric(name).check(threshold)`` (``MetricSpec.check``) so the
    direction is the metric's declared one, never a caller's guess (or this field's default);
    ``tests/test_metric_declaration.py`` fails on a ``Check(...)`` built anywhere else.
    """

    metric: str
    threshold: float
    higher_is_better: bool = False

    @property
    def direction(self) -> Direction:
        return Direction.of(self.higher_is_better)

    def passes(self, value: float) -> bool:
        """``value`` within the threshold; NaN never passes."""
        return self.direction.holds(value, self.threshold)

    @property
    def symbol(self) -> str:
        return self.direction.symbol


@dataclass(frozen=True)
class Tolerance:
    """The checks applied to one output of one graph at one precision."""

    checks: tuple[Check, ...]

    def as_dict(self) -> dict[str, dict[str, float | str]]:
        return {c.metric: {"threshold": c.threshold, "op": c.symbol} for c in self.checks}


@dataclass
class RunOptions:
    """What one run covers: every option's value (``settings``, typed, named as the option table
    names them) and what the run resolved from them (the models, parsed variants, the catalog,
    runtime settings). Built by ``harness.settings.resolve.build_options``."""

    models: list[str] = field(default_factory=list)
    precisions: list[Precision] = field(default_factory=lambda: list(DEFAULT_PRECISIONS))
    #: the providers the matrix covers (``build_options`` resolves them, default ``harness.runners.DEFAULT_PROVIDERS``);
    #: empty for a RunOptions built directly, whose caller names each Variant's provider itself
    providers: list[Provider] = field(default_factory=list)
    #: every option's value: explicit > config file > the table's default
    settings: Settings = field(default_factory=Settings)
    #: the options this run set explicitly (option name -> value): what a record's rerun repeats
    given: dict[str, Any] = field(default_factory=dict)
    #: the models this run can name (the zoo plus the suite config's models and overrides)
    catalog: "ModelCatalog | None" = None
    #: precisions or providers were chosen explicitly (CLI or config): a variant of this run that
    #: cannot run here was asked for, so it is 'not-run' (failing) rather than a skip unless
    #: ``settings.allow_skip``
    explicit_variants: bool = False
    #: one-line notes for the user about how the run's inputs resolved (a shadowed local directory...)
    notes: tuple[str, ...] = ()
    #: how artifacts are run (session options, EP options, TensorRT profile), run-wide; a model's
    #: ``[models.<name>.runtime]`` refines it (``harness.judge.workspace.Workspace.runtime_for``)
    runtime: "RuntimeSettings" = field(default_factory=lambda: _runtime_default())
    #: runtime axes of the matrix: setting -> values (one case per value where the backend honours it)
    runtime_axes: dict[str, list[str]] = field(default_factory=dict)
    #: the command whose flags the user typed (``run``: ``harness run``; '' a plain pytest session):
    #: a message from inside the session names an option as that command spells it
    #: (``harness.settings.spelling.user_flag``: ``--perf``, not pytest's ``--harness-perf``)
    command: str = ""

    @property
    def exporter(self) -> str:
        """The exporter of the run (a model's own default applies unless ``explicit_exporter``)."""
        return self.settings.exporter or "torchscript"

    @property
    def explicit_exporter(self) -> bool:
        """The exporter was given for this run (not only by the config file): it then overrides a
        model's own default exporter."""
        return "exporter" in self.given


def _runtime_default() -> "RuntimeSettings":
    return RuntimeSettings()
