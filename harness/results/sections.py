"""Typed sections of a record's payload, each with its JSON codec and its one writer.

A record's ``data``, ``memory``, ``perf`` and ``settings`` are JSON objects in the file
(``harness.result/1``), open to additions. What the harness itself writes into them and reads back
is declared here once, as a dataclass per section: ``of(record)`` reads one tolerantly (an older
record lacking the keys, or a value of another shape, reads as the defaults -- nothing raises), and
the section's writer (``write`` / ``to_dict``) is the only code that spells its keys. Readers outside
``harness.results`` use the attributes, never the strings.

- :class:`Evidence`: ``data.failing_batches``, ``data.repro_bundles``, ``data.repro_bundle_error``;
  written by ``Evidence.write`` (the pipeline's record stage, the generation and perf bundles)
- :class:`Judged`: ``data.worst``, ``data.replayed_outputs``, ``data.profile``; by ``Case.record_parity``
- :class:`Generation`: ``data.generation``, ``data.worst_pairs``, ``data.generation_forensics``;
  by ``harness.judge.generation.record``
- :class:`Memory`: ``memory``; by ``harness.core.rss.PeakRss.stop`` (its dict is this codec's shape)
- :class:`PerfHeadlines`: ``perf.cold_start_ms``, ``perf.peak_rss_bytes``, ``perf.artifact_bytes``; by the perf suites
- :class:`LatencyHeadline`: ``perf.latency_ms`` (summary, tail interval, throughput); by ``harness.perf.latency``
- :class:`DecodeSpeed`: ``perf.generation["kv=on"]``; by ``harness.perf.generation``
- :class:`PerfSetup`: ``perf.settings``, ``perf.throughput``; by the perf suites
- :class:`Interrupted`: ``data.interrupted``; by ``harness.results.notrun``
- :class:`Served`: ``data.served``; by ``harness.serving`` (check and its load sweep)
- :class:`SettingsSection`: ``settings.runtime``, ``settings.options`` and the effective sizes; by
  ``Case._settings``
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from harness.results.record import Record


def _map(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _strs(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _rows(value: Any) -> tuple[dict[str, Any], ...]:
    return tuple(dict(v) for v in value if isinstance(v, Mapping)) if isinstance(value, list) else ()


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


@dataclass(frozen=True)
class Evidence:
    """Files a failing case left for reproduction, by graph (or ``generation`` / ``perf``): the worst
    batch as ``.npz`` and the repro bundle directory; ``bundle_error`` when writing a bundle failed."""

    failing_batches: dict[str, str] = field(default_factory=dict)
    repro_bundles: dict[str, str] = field(default_factory=dict)
    bundle_error: str | None = None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Evidence:
        error = data.get("repro_bundle_error")
        return cls(_strs(data.get("failing_batches")), _strs(data.get("repro_bundles")),
                   None if error is None else str(error))

    @classmethod
    def of(cls, record: Record) -> Evidence:
        return cls.from_data(record.data)

    def write(self, data: MutableMapping[str, Any]) -> None:
        """The one writer: merge into a case's ``data`` (empty parts leave the keys absent, as before)."""
        if self.failing_batches:
            data["failing_batches"] = {**_strs(data.get("failing_batches")), **self.failing_batches}
        if self.repro_bundles:
            data["repro_bundles"] = {**_strs(data.get("repro_bundles")), **self.repro_bundles}
        if self.bundle_error is not None:
            data["repro_bundle_error"] = self.bundle_error


@dataclass(frozen=True)
class Judged:
    """How a numeric case's numbers came about: the worst element per ``graph.output``, the graphs
    whose outputs were replayed from the output cache, the profiling summary per graph, the seconds
    each graph took to load and run (``<graph>.load`` / ``<graph>.run``) and the input shapes tried
    (one entry per probe: the corpus batches, then a shape sweep's)."""

    worst: dict[str, str] = field(default_factory=dict)
    replayed_outputs: tuple[str, ...] = ()
    profile: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    shapes: tuple[dict[str, Any], ...] = ()

    @classmethod
    def of(cls, record: Record) -> Judged:
        data = record.data
        replayed = data.get("replayed_outputs")
        seconds = {str(k): n for k, v in _map(data.get("seconds")).items() if (n := _number(v)) is not None}
        return cls(_strs(data.get("worst")), tuple(str(g) for g in replayed) if isinstance(replayed, list) else (),
                   {str(k): dict(v) for k, v in _map(data.get("profile")).items() if isinstance(v, Mapping)},
                   seconds, _rows(data.get("shapes")))

    def write(self, data: MutableMapping[str, Any]) -> None:
        """The one writer (``Case.record_parity``): ``worst`` and ``seconds`` always, the others when present."""
        data["worst"] = dict(self.worst)
        if self.replayed_outputs:
            data["replayed_outputs"] = list(self.replayed_outputs)
        if self.profile:
            data["profile"] = dict(self.profile)
        data["seconds"] = {k: round(v, 4) for k, v in self.seconds.items()}
        if self.shapes:
            data["shapes"] = [dict(s) for s in self.shapes]


@dataclass(frozen=True)
class Generation:
    """A generation case's decode: settings (``replayed`` among them), signatures, seconds, the
    decoded text file, the worst sentence pairs and the forensics of the worst divergences."""

    settings: dict[str, Any] = field(default_factory=dict)
    signatures: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, Any] = field(default_factory=dict)
    decoded: str | None = None
    worst_pairs: tuple[dict[str, Any], ...] = ()
    forensics: tuple[dict[str, Any], ...] = ()
    first_divergence: str | None = None

    @classmethod
    def of(cls, record: Record) -> Generation:
        data = record.data
        gen = _map(data.get("generation"))
        decoded = gen.get("decoded")
        return cls(_map(gen.get("settings")), _map(gen.get("signatures")), _map(gen.get("seconds")),
                   str(decoded) if decoded else None, _rows(data.get("worst_pairs")),
                   _rows(data.get("generation_forensics")), gen.get("first_divergence"))

    def write(self, data: MutableMapping[str, Any]) -> None:
        """The one writer (``harness.judge.generation.record``), in the order records always had."""
        data["generation"] = {"settings": self.settings, "signatures": self.signatures, "seconds": self.seconds,
                              "first_divergence": self.first_divergence,
                              **({"decoded": self.decoded} if self.decoded else {})}
        data["worst_pairs"] = [dict(p) for p in self.worst_pairs]
        if self.forensics:
            data["generation_forensics"] = [dict(f) for f in self.forensics]

    @property
    def replayed(self) -> bool:
        return bool(self.settings.get("replayed"))

    @property
    def tokens_per_s(self) -> float | None:
        return _number(self.seconds.get("tokens_per_s"))


@dataclass(frozen=True)
class Memory:
    """The case's resident memory (``harness.core.rss``); None where not recorded."""

    peak_rss_bytes: int | None = None
    start_rss_bytes: int | None = None
    end_rss_bytes: int | None = None
    process_peak_rss_bytes: int | None = None
    source: str | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Memory:
        def count(key: str) -> int | None:
            value = _number(raw.get(key))
            return int(value) if value is not None else None

        source = raw.get("source")
        return cls(count("peak_rss_bytes"), count("start_rss_bytes"), count("end_rss_bytes"),
                   count("process_peak_rss_bytes"), None if source is None else str(source))

    @classmethod
    def of(cls, record: Record) -> Memory:
        return cls.from_dict(record.memory)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in (("peak_rss_bytes", self.peak_rss_bytes), ("start_rss_bytes", self.start_rss_bytes),
                                  ("end_rss_bytes", self.end_rss_bytes),
                                  ("process_peak_rss_bytes", self.process_peak_rss_bytes),
                                  ("source", self.source)) if v is not None}

    @property
    def growth_bytes(self) -> int | None:
        """Resident bytes the case added by its end (negative: it freed more)."""
        if self.start_rss_bytes is None or self.end_rss_bytes is None:
            return None
        return self.end_rss_bytes - self.start_rss_bytes


@dataclass(frozen=True)
class PerfHeadlines:
    """The fresh-process numbers of a perf case: cold start (load, first inference, ms) and peak RSS."""

    cold_load_ms: float | None = None
    cold_first_inference_ms: float | None = None
    peak_rss_bytes: float | None = None
    #: bytes on disk of what the variant ships (``perf.artifact_bytes``)
    artifact_bytes: float | None = None

    @classmethod
    def of(cls, record: Record) -> PerfHeadlines:
        cold = _map(record.perf.get("cold_start_ms"))
        return cls(_number(cold.get("load")), _number(cold.get("first_inference")),
                   _number(record.perf.get("peak_rss_bytes")), _number(record.perf.get("artifact_bytes")))

    @property
    def cold_start_ms(self) -> float | None:
        """Load plus first inference: how long a fresh process takes to its first answer."""
        if self.cold_load_ms is None or self.cold_first_inference_ms is None:
            return None
        return self.cold_load_ms + self.cold_first_inference_ms


@dataclass(frozen=True)
class LatencyHeadline:
    """A latency case's primary measurement (``perf.latency_ms``): p50 and p99 (ms), the p99's 95 %
    order-statistic interval when the calls sufficed to bound it (``harness.perf.tail``), the calls
    timed, and the throughput in the unit one call serves (``calls/s``, or ``items/s`` for a batch)."""

    p50_ms: float | None = None
    p99_ms: float | None = None
    p99_interval: tuple[float, float] | None = None
    calls: int | None = None
    p99_low_confidence: bool = False
    throughput: float | None = None
    throughput_unit: str = "calls/s"
    #: the summary's other statistics (n, p90, mean, cv ...) for the details tables
    summary: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, record: Record, key: str = "latency_ms") -> LatencyHeadline:
        entry = _map(record.perf.get(key))
        summary = _map(entry.get("summary"))
        interval = _map(entry.get("tail")).get("interval")
        lo, hi = (_number(interval[0]), _number(interval[1])) if isinstance(interval, list) and len(interval) == 2 \
            else (None, None)
        calls = _number(summary.get("n"))
        batch = _number(entry.get("items_per_call"))
        return cls(_number(summary.get("p50")), _number(summary.get("p99")),
                   (lo, hi) if lo is not None and hi is not None else None,
                   int(calls) if calls is not None else None,
                   bool(_map(summary.get("low_confidence")).get("p99")), _number(entry.get("throughput")),
                   "calls/s" if batch in (None, 1.0) else "items/s", summary)

    @property
    def measured(self) -> bool:
        return self.p50_ms is not None


@dataclass(frozen=True)
class DecodeSpeed:
    """A generation perf case's decode with the KV cache (``perf.generation["kv=on"]``): time to
    first token, time per output token (p50, ms) and tokens/s."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    tokens_per_s: float | None = None

    @classmethod
    def of(cls, record: Record) -> DecodeSpeed:
        on = _map(_map(record.perf.get("generation")).get("kv=on"))
        return cls(_number(on.get("ttft_ms_p50")), _number(on.get("tpot_ms_p50")), _number(on.get("tokens_per_s")))


@dataclass(frozen=True)
class PerfSetup:
    """``perf.settings``: how a perf case measured (samples, warmup, shapes, threads, the fresh
    child's arguments, skipped buckets) and ``perf.throughput``, the primary latency's headline."""

    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, record: Record) -> PerfSetup:
        return cls(_map(record.perf.get("settings")))

    def write(self, perf: MutableMapping[str, Any]) -> None:
        """The one writer (the perf suites): the settings, and the primary latency's throughput
        promoted to ``perf.throughput`` where the case timed one."""
        primary = perf.get("latency_ms")
        if isinstance(primary, Mapping) and "throughput" in primary:
            perf["throughput"] = primary["throughput"]
        perf["settings"] = dict(self.settings)

    @property
    def ort_intra_op_threads(self) -> int | None:
        """ONNX Runtime's intra-op threads the case ran with (None: unrecorded or not positive)."""
        value = _map(self.settings.get("threads")).get("ort_intra_op_threads")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True)
class Interrupted:
    """``data.interrupted``: the signal that stopped the run before this (not-run) case finished."""

    signal: str | None = None

    @classmethod
    def of(cls, record: Record) -> Interrupted:
        value = record.data.get("interrupted")
        return cls(str(value) if value else None)

    def write(self, data: MutableMapping[str, Any]) -> None:
        """The one writer (``harness.results.notrun``)."""
        if self.signal:
            data["interrupted"] = self.signal

    def __bool__(self) -> bool:
        return self.signal is not None


@dataclass(frozen=True)
class Served:
    """``data.served``: what a served endpoint said about each model it served (name, version,
    platform, inputs/outputs), by role (``model``, ``encoder``, ...); written by ``harness.serving``."""

    models: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, record: Record) -> Served:
        return cls({str(k): dict(v) for k, v in _map(record.data.get("served")).items() if isinstance(v, Mapping)})

    def write(self, data: MutableMapping[str, Any]) -> None:
        data["served"] = {role: dict(meta) for role, meta in self.models.items()}


@dataclass(frozen=True)
class Protocols:
    """``data.protocol``: the I/O protocol each judged file was fed in (``harness.check.protocol``),
    by job key, on the records that do not list the jobs themselves."""

    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, record: Record) -> Protocols:
        return cls({str(k): dict(v) for k, v in _map(record.data.get("protocol")).items() if isinstance(v, Mapping)})

    def write(self, data: MutableMapping[str, Any]) -> None:
        data["protocol"] = {key: dict(protocol) for key, protocol in self.jobs.items()}


@dataclass(frozen=True)
class ServedLoad:
    """A served model's load sweeps: ``perf.serving`` (closed loop, per concurrency level) and
    ``perf.serving_rate`` (open loop, per offered request rate); None where not swept."""

    steps: dict[str, Any] | None = None
    rate: dict[str, Any] | None = None

    @classmethod
    def of(cls, record: Record) -> ServedLoad:
        steps, rate = record.perf.get("serving"), record.perf.get("serving_rate")
        return cls(dict(steps) if isinstance(steps, Mapping) else None, dict(rate) if isinstance(rate, Mapping) else None)


#: record ``settings`` fields holding a results-changing option's effective value when the session
#: did not set it (``settings.options`` keeps only what was set explicitly), by option name
_EFFECTIVE_SETTINGS = {"samples": "samples_requested", "batch_size": "batch_size", "opset": "opset"}


@dataclass(frozen=True)
class SettingsSection:
    """The settings a record says it ran with that readers outside ``results`` show."""

    runtime: dict[str, Any] | None = None
    #: ``settings.options``: the options the session set explicitly, by option name
    options: dict[str, Any] = field(default_factory=dict)
    #: effective values of the options recorded even when unset (samples, batch size, opset)
    effective: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, record: Record) -> SettingsSection:
        raw = record.settings
        runtime = raw.get("runtime")
        effective = {name: raw[key] for name, key in _EFFECTIVE_SETTINGS.items() if raw.get(key) is not None}
        return cls(dict(runtime) if isinstance(runtime, Mapping) else None, _map(raw.get("options")), effective)

    def option(self, name: str) -> Any:
        """An option's value for this case: as set, else its recorded effective value, else None."""
        value = self.options.get(name)
        return self.effective.get(name) if value is None else value


__all__ = ["DecodeSpeed", "Evidence", "Generation", "Interrupted", "Judged", "LatencyHeadline", "Memory",
           "PerfHeadlines", "PerfSetup", "Protocols", "Served", "ServedLoad", "SettingsSection"]
