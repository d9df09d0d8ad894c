"""The ``harness.result/1`` record as one type.

A record is what a case leaves behind: identity (case id, variant, model), verdict and reason, the
numbers (``metrics`` with their ``thresholds``, ``perf``), what ran (``artifacts``, ``settings``,
``env``) and details (``data``). Writers compose a ``Record``; readers get one back from any file
this schema version ever produced: ``Record.from_dict`` fills missing fields with defaults and keeps
fields it does not know in ``extra``, so reading and rewriting a newer file loses nothing.
``to_dict`` writes exactly the keys and order of the format (docs/results-schema.md).

Metric keys are dotted strings in the file (``decoder.logits.max_abs``, ``perf.p50_ms``);
``MetricKey`` is the one place that builds and parses them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Union, get_args

from harness.results.checks import CheckResult
from harness.results.jsonsafe import decode_float, decode_numbers

SCHEMA = "harness.result/1"
#: ``not-run``: a variant the run asked for explicitly (CLI or config) could not run here (its
#: provider is missing...); unlike ``skip`` it fails the run unless the run allows skips
Verdict = Literal["pass", "fail", "skip", "error", "not-run"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
#: verdicts that make a run fail
FAILING: frozenset[str] = frozenset({"fail", "error", "not-run"})


def judged_nothing(verdicts: Iterable[str]) -> bool:
    """Whether a run of these verdicts judged nothing (every case skipped): a gate that
    checked nothing must not read as green."""
    seen = list(verdicts)
    return bool(seen) and all(v == "skip" for v in seen)


def run_green(verdicts: Iterable[str]) -> bool:
    """Whether a run of these verdicts passed: no failing verdict (``fail``, ``error``,
    ``not-run``) and something judged. The one rule ``harness run``, the pytest plugin and
    ``harness check`` exit by (each decided it itself before)."""
    seen = list(verdicts)
    return not any(v in FAILING for v in seen) and not judged_nothing(seen)

PERF_SCOPE = "perf"


class RecordError(ValueError):
    """A record that no version of the schema could have written (e.g. an unknown verdict)."""


def as_verdict(value: object) -> Verdict:
    """``value`` as a ``Verdict``, or ``RecordError``."""
    if value not in VERDICTS:
        raise RecordError(f"unknown verdict {value!r} (known: {', '.join(VERDICTS)})")
    return value  # narrowed to Verdict by the membership test


@dataclass(frozen=True, order=True)
class MetricKey:
    """``<scope>.<output>.<metric>``: the key of one number in ``metrics`` and ``thresholds``.

    ``scope`` is a graph name (``decoder``) or ``perf``; ``output`` an output of that graph (may
    itself hold dots: ``present.0.key``), or the pseudo-outputs ``artifact`` and
    ``sentence_embedding``. A generation metric is a bare name (``bleu``): no scope, no output.
    """

    metric: str
    scope: str = ""
    output: str = ""

    def __str__(self) -> str:
        return ".".join(p for p in (self.scope, self.output, self.metric) if p)

    @classmethod
    def parse(cls, key: str) -> MetricKey:
        """The inverse of ``str()``: the metric is after the last dot, the scope before the first."""
        head, _, metric = key.rpartition(".")
        scope, _, output = head.partition(".")
        return cls(metric, scope, output)

    @classmethod
    def perf(cls, budget: str) -> MetricKey:
        """The key a perf budget's measured number is recorded under (``perf.p50_ms``)."""
        return cls(budget, PERF_SCOPE)

    @property
    def is_perf(self) -> bool:
        return self.scope == PERF_SCOPE and not self.output

    @property
    def subject(self) -> str:
        """``graph/output`` as failure messages name it (empty for a case-level metric)."""
        return "/".join(p for p in (self.scope, self.output) if p)


def _str(value: Any, default: str = "") -> str:
    return default if value is None else str(value)


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _float(value: Any) -> float:
    decoded = decode_float(value)
    try:
        return float(decoded)
    except (TypeError, ValueError):
        return math.nan


@dataclass(frozen=True)
class Record:
    """One case of one run (``harness.result/1``). Frozen: derive a changed copy with
    ``dataclasses.replace``; the mapping fields are plain dicts for JSON's sake, not to be mutated."""

    id: str
    verdict: Verdict
    schema: str = SCHEMA
    nodeid: str = ""
    run_id: str = ""
    suite: str | None = None
    variant: str | None = None
    model: str | None = None
    model_sha256: str | None = None
    precision: str | None = None
    backend: str | None = None
    provider: str | None = None
    execution_provider: str | None = None
    reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    rerun: str | None = None  # suites' cases only (``harness check`` writes none)
    duration_s: float = 0.0
    finished: str = ""
    harness_version: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    perf: dict[str, Any] = field(default_factory=dict)  # performance cases only (omitted when empty)
    #: seconds per phase of the case (build, export, reference, variant, metrics, perf); omitted when empty
    phases: dict[str, float] = field(default_factory=dict)
    #: resident memory of the case (``harness.core.rss``): ``peak_rss_bytes``, ``start_rss_bytes``,
    #: ``end_rss_bytes``, ``process_peak_rss_bytes``, ``source``; omitted when empty
    memory: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # fields this version does not know, kept as read

    # -- derived ----------------------------------------------------------------------------------------
    @property
    def failed(self) -> bool:
        """A ``fail`` or an ``error``: the case makes the run fail."""
        return self.verdict in FAILING

    @property
    def fingerprint(self) -> str | None:
        """The environment fingerprint (``env.fingerprint``), if recorded."""
        value = self.env.get("fingerprint")
        return str(value) if value else None

    @property
    def first_reason_line(self) -> str:
        lines = self.reason.strip().splitlines()
        return lines[0] if lines else ""

    def checks(self) -> list[CheckResult]:
        """Every gated metric (one with a threshold and a value) judged again from the record; a
        NaN value fails. ``subject`` is the key's ``graph/output``, ``metric`` its metric name."""
        out = []
        for key, gate in self.thresholds.items():
            if self.metrics.get(key) is None or not isinstance(gate, Mapping):
                continue
            parsed = MetricKey.parse(key)
            out.append(CheckResult(parsed.metric, _float(self.metrics[key]), str(gate.get("op", "<=")),
                                    _float(gate.get("threshold", 0.0)), parsed.subject))
        return out

    # -- the file format ----------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Record:
        """Tolerant: missing fields get defaults, unknown fields go to ``extra``, the canonical
        non-finite strings in numeric fields become floats. ``RecordError`` for a record no
        version wrote (not a JSON object, no id, an unknown verdict)."""
        if not isinstance(raw, Mapping):
            raise RecordError(f"a record is a JSON object, got {type(raw).__name__}")
        if "id" not in raw:
            raise RecordError("record has no 'id'")
        _check_shape(raw)
        known = {f.name for f in fields(cls)} - {"extra"}
        decoded = decode_record(raw)
        perf = decoded.get("perf")
        return cls(
            id=_str(decoded.get("id")),
            verdict=as_verdict(decoded.get("verdict")),
            schema=_str(decoded.get("schema"), SCHEMA),
            nodeid=_str(decoded.get("nodeid")),
            run_id=_str(decoded.get("run_id")),
            suite=_opt(decoded.get("suite")),
            variant=_opt(decoded.get("variant")),
            model=_opt(decoded.get("model")),
            model_sha256=_opt(decoded.get("model_sha256")),
            precision=_opt(decoded.get("precision")),
            backend=_opt(decoded.get("backend")),
            provider=_opt(decoded.get("provider")),
            execution_provider=_opt(decoded.get("execution_provider")),
            reason=_str(decoded.get("reason")),
            metrics=_dict(decoded.get("metrics")),
            thresholds=_dict(decoded.get("thresholds")),
            artifacts=_dict(decoded.get("artifacts")),
            settings=_dict(decoded.get("settings")),
            env=_dict(decoded.get("env")),
            rerun=_opt(decoded.get("rerun")),
            duration_s=_float(decoded.get("duration_s", 0.0)),
            finished=_str(decoded.get("finished")),
            harness_version=_str(decoded.get("harness_version")),
            data=_dict(decoded.get("data")),
            perf=dict(perf) if isinstance(perf, Mapping) else {},
            phases={str(k): _float(v) for k, v in _dict(decoded.get("phases")).items()},
            memory=_dict(decoded.get("memory")),
            extra={k: v for k, v in decoded.items() if k not in known},
        )

    @classmethod
    def coerce(cls, record: RecordLike) -> Record:
        """A ``Record`` from either a record or its dict (callers that still hold dicts)."""
        return record if isinstance(record, Record) else cls.from_dict(record)

    def to_dict(self) -> dict[str, Any]:
        """The record as the file holds it (floats still floats: the store encodes non-finite ones)."""
        out: dict[str, Any] = {
            "schema": self.schema, "id": self.id, "nodeid": self.nodeid, "run_id": self.run_id,
            "suite": self.suite, "variant": self.variant, "model": self.model, "model_sha256": self.model_sha256,
            "precision": self.precision, "backend": self.backend, "provider": self.provider,
            "execution_provider": self.execution_provider, "verdict": self.verdict, "reason": self.reason,
            "metrics": self.metrics, "thresholds": self.thresholds, "artifacts": self.artifacts,
            "settings": self.settings, "env": self.env,
        }
        if self.rerun is not None:
            out["rerun"] = self.rerun
        out.update({"duration_s": self.duration_s, "finished": self.finished,
                    "harness_version": self.harness_version, "data": self.data})
        if self.perf:
            out["perf"] = self.perf
        if self.phases:
            out["phases"] = self.phases
        if self.memory:
            out["memory"] = self.memory
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out


#: the sections that are JSON objects when present
_OBJECT_FIELDS = ("metrics", "thresholds", "artifacts", "settings", "env", "data", "perf", "memory")


def _check_shape(raw: Mapping[str, Any]) -> None:
    """``RecordError`` for a JSON object that no harness wrote: another schema, an id that is not a
    string, a section that is not an object, a metric value that is not a number. Missing fields
    and fields this version does not know stay welcome (older and newer files)."""
    schema = raw.get("schema", SCHEMA)
    if not isinstance(schema, str) or not schema.startswith(SCHEMA.split("/")[0] + "/"):
        raise RecordError(f"not a harness record (schema {schema!r}, expected {SCHEMA!r})")
    if not isinstance(raw["id"], str) or not raw["id"]:
        raise RecordError(f"record 'id' must be a non-empty string, got {raw['id']!r}")
    for name in _OBJECT_FIELDS:
        if raw.get(name) is not None and not isinstance(raw[name], Mapping):
            raise RecordError(f"record {name!r} must be an object, got {type(raw[name]).__name__}")
    for key, value in (raw.get("metrics") or {}).items():
        if not _is_number(value):
            raise RecordError(f"metric {key!r} is not a number: {value!r}")
    if "duration_s" in raw and not _is_number(raw["duration_s"]):
        raise RecordError(f"'duration_s' is not a number: {raw['duration_s']!r}")


def _is_number(value: Any) -> bool:
    """A number as a record holds it: a JSON number or boolean, null, or a canonical non-finite string."""
    if value is None or (isinstance(value, str) and decode_float(value) is not value):
        return True
    return isinstance(value, numbers.Real)  # booleans too: a flag metric (true/false) is 1/0


def decode_record(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A record dict with the canonical non-finite strings of its numeric fields turned back into
    floats: ``metrics`` values, ``thresholds.*.threshold``, ``duration_s`` and all of ``perf``
    (measurements only). ``data``, ``env`` and ``settings`` are free text and stay as written."""
    out = dict(raw)
    metrics = raw.get("metrics")
    if isinstance(metrics, Mapping):
        out["metrics"] = {k: decode_float(v) for k, v in metrics.items()}
    thresholds = raw.get("thresholds")
    if isinstance(thresholds, Mapping):
        out["thresholds"] = {k: ({**g, "threshold": decode_float(g["threshold"])}
                                 if isinstance(g, Mapping) and "threshold" in g else g)
                             for k, g in thresholds.items()}
    if "duration_s" in raw:
        out["duration_s"] = decode_float(raw["duration_s"])
    if isinstance(raw.get("perf"), Mapping):
        out["perf"] = decode_numbers(dict(raw["perf"]))
    return out


#: what the readers of records accept: a ``Record``, or the dict a caller still holds (a line of
#: ``results.jsonl`` read with ``read_records``, a test's literal); named once so the union is not
#: re-spelled at every reader
RecordLike = Union[Record, Mapping[str, Any]]


def readable_records(records: Iterable[RecordLike]) -> Iterator[Record]:
    """Each as a ``Record``; what is not a record of any schema version (no id, an unknown verdict)
    is skipped: it says nothing about speed or accuracy (the gates' and calibration's readers)."""
    for rec in records:
        try:
            yield Record.coerce(rec)
        except RecordError:
            continue
