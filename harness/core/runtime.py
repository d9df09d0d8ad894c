"""Runtime settings: how a deployed artifact is *run*, as one typed record made of the backends' own parts.

A model ships with runtime settings, and they change numbers and speed: threads change latency,
execution-provider options (CUDA's ``cudnn_conv_algo_search``; TensorRT's FP16 flag) change both,
and each runtime has settings of its own -- ONNX Runtime's graph optimisation level and
execution mode, a TensorRT engine's optimisation profile and limits. :class:`RuntimeSettings`
holds the settings every runtime shares (threads, EP options keyed by provider, profiling) and
one typed **section** per backend family of settings (:class:`BackendSettings`). A section is
declared in the backend's own module (``harness/runners/ort_runner.py: OrtSessionSettings``,
``harness/runners/trt_profile.py: TensorRTSettings``), with its fields' option names, parsing,
validation, record codec and the text of its part of the settings line; nothing here names a
backend. Which EP option keys a provider accepts is declared by the backend that owns the
provider (``Backend.provider_option_keys``), never here.

A run declares the settings (CLI / ``[run]``), a model refines them (``[models.<name>.runtime]``),
and every record carries the effective value (``settings.runtime``: one flat object, the
sections' fields beside the shared ones, as before sections existed) and a rerun command that
repeats it.

A section field may also be a matrix **axis** (:class:`Axis`, declared with the field):
``graph_optimization = ["disabled", "all"]`` judges the fused and the unfused graph side by side.
An axis value other than the default adds a suffix to the variant id
(``marian-tiny-fp32-ort_cpu-opt_disabled``), so the default run's ids are unchanged and a
non-default setting never poses as the default case in a baseline.

Pure values and parsing only (imports nothing else of the harness). Sections register themselves
when their class is defined, like every other declaration registry: a process reads them once the
backends' modules are imported (``harness.runners.backends()``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar, Mapping, Sequence, TypeVar

from harness.core.errors import UsageError, did_you_mean


@dataclass(frozen=True)
class Axis:
    """A runtime setting that may take several values in one run (one case per value)."""

    name: str  # the section field (and option) it is
    tag: str  # the variant-id suffix prefix: ``-<tag>_<value>``
    default: str
    choices: tuple[str, ...]


#: the settings that can be matrix axes, as the sections declare them (field name -> Axis)
AXES: dict[str, Axis] = {}


def axis_suffix(values: Sequence[tuple[str, str]]) -> str:
    """The variant-id suffix of a case's non-default axis values (``-opt_disabled``)."""
    out = []
    for name, value in values:
        axis = AXES.get(name)
        if axis is None:
            raise RuntimeError(f"runtime axis {name!r} is declared by no loaded settings section "
                               f"(harness.runners.backends() imports them)")
        if value != axis.default:
            out.append(f"-{axis.tag}_{value}")
    return "".join(out)


# -- a section field ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class FieldInfo:
    """How one section field is set, recorded and shown (``dataclasses.field`` metadata, made by
    :func:`setting`)."""

    option: str  # the option-table row (and ``[models.<name>.runtime]`` key) that sets it
    #: option value (as parsed by the table, or a TOML value) -> the field's value; ``where`` names it
    parse: Callable[[Any, str], Any]
    #: the field's value -> plain JSON (the record) and back
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]
    #: the field's value -> its part of the settings line (``opt=disabled``); None when nothing to say
    describe: Callable[[Any], str | None]
    #: kept in the record's ``settings.runtime`` (a limit that only sizes a build is not)
    recorded: bool = True
    axis: Axis | None = None
    #: where its text stands in the settings line: ``first`` (before the threads: what tells two
    #: cases apart), ``middle`` (after them), ``last`` (after the EP options)
    place: str = "middle"


def _same(value: Any) -> Any:
    return value


def _as_is(value: Any, where: str) -> Any:
    return value


def setting(default: Any = None, *, option: str = "", parse: Callable[[Any, str], Any] = _as_is,
            encode: Callable[[Any], Any] = _same, decode: Callable[[Any], Any] = _same,
            describe: Callable[[Any], str | None] = lambda value: None, recorded: bool = True,
            axis: Axis | None = None, place: str = "", factory: Callable[[], Any] | None = None) -> Any:
    """A section field: its default (or ``factory``), the option that sets it (default: the field's
    name), how its value is parsed, recorded and shown (an axis stands first in the line)."""
    if place not in ("", "first", "middle", "last"):
        raise ValueError(f"place: first, middle or last, got {place!r}")
    info = {"option": option, "parse": parse, "encode": encode, "decode": decode, "describe": describe,
            "recorded": recorded, "axis": axis, "place": place or ("first" if axis is not None else "middle")}
    if factory is not None:
        return field(default_factory=factory, metadata={"harness": info})
    return field(default=default, metadata={"harness": info})


S = TypeVar("S", bound="BackendSettings")

#: every declared section, by its name, in declaration order
SECTIONS: dict[str, type["BackendSettings"]] = {}
#: field name -> the section declaring it (a field name is unique across sections: records are flat)
_FIELD_SECTION: dict[str, str] = {}


@dataclass(frozen=True)
class BackendSettings:
    """One backend's own typed settings: a frozen dataclass whose fields are made by
    :func:`setting`. ``section`` names it; defaults are what the backend did before the setting
    existed, so a run that sets nothing is unchanged. Subclasses register on definition."""

    section: ClassVar[str] = ""
    #: one line for docs/runtime.md: what these settings are and which backend reads them
    doc: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.section:
            raise TypeError(f"{cls.__qualname__}: a settings section needs a name (section = ...)")

    @staticmethod
    def declare(cls: type[S]) -> type[S]:
        """Register a (dataclass-decorated) section, as a class decorator: its name and field names
        must be new."""
        if cls.section in SECTIONS and SECTIONS[cls.section] is not cls:
            raise RuntimeError(f"settings section {cls.section!r} declared twice")
        for f in dataclasses.fields(cls):
            owner = _FIELD_SECTION.get(f.name)
            if owner is not None and owner != cls.section:
                raise RuntimeError(f"runtime setting {f.name!r} declared by sections {owner!r} and {cls.section!r}")
        SECTIONS[cls.section] = cls
        for f in dataclasses.fields(cls):
            _FIELD_SECTION[f.name] = cls.section
            axis = cls.info(f.name).axis
            if axis is not None:
                AXES[f.name] = axis
        return cls

    @classmethod
    def info(cls, name: str) -> FieldInfo:
        f = next(f for f in dataclasses.fields(cls) if f.name == name)
        raw = dict(f.metadata.get("harness") or {})
        return FieldInfo(**{**raw, "option": raw.get("option") or f.name}) if raw else \
            FieldInfo(f.name, _as_is, _same, _same, lambda value: None)

    @classmethod
    def names(cls) -> frozenset[str]:
        """The section's field names (what ``Backend.runtime_settings`` lists when it honours them)."""
        return frozenset(f.name for f in dataclasses.fields(cls))

    @classmethod
    def options(cls) -> dict[str, str]:
        """Option name -> field name: the keys that set this section."""
        return {cls.info(f.name).option: f.name for f in dataclasses.fields(cls)}

    def record(self) -> dict[str, Any]:
        """The recorded fields as plain JSON (the section's part of ``settings.runtime``)."""
        return {f.name: self.info(f.name).encode(getattr(self, f.name)) for f in dataclasses.fields(self)
                if self.info(f.name).recorded}

    @classmethod
    def from_record(cls: type[S], raw: Mapping[str, Any]) -> S:
        """The inverse of :meth:`record` (missing keys: the defaults)."""
        values = {f.name: cls.info(f.name).decode(raw[f.name]) for f in dataclasses.fields(cls)
                  if f.name in raw and raw[f.name] is not None}
        return cls(**values)

    def describe(self) -> list[str]:
        """This section's part of the settings line: each non-default field's text."""
        return [text for f in dataclasses.fields(self) if (text := self.info(f.name).describe(getattr(self, f.name)))]


def section_of(name: str) -> type[BackendSettings] | None:
    """The section declaring field ``name`` (None: a shared field, or unknown)."""
    owner = _FIELD_SECTION.get(name)
    return SECTIONS[owner] if owner else None


# -- provider options (every runtime with execution providers) ----------------------------------------
def parse_provider_options(raw: Sequence[str] | Mapping[str, Any], where: str) -> dict[str, dict[str, str]]:
    """``["ort_cuda:cudnn_conv_algo_search=HEURISTIC", ...]`` (CLI) or ``{ort_cuda = {key = value}}``
    (TOML) -> provider short name -> {key: value as text} (ONNX Runtime takes strings)."""
    out: dict[str, dict[str, str]] = {}
    if isinstance(raw, Mapping):
        for provider, table in raw.items():
            if not isinstance(table, Mapping):
                raise UsageError(f"{where}.{provider}: expected a table of EP options")
            out.setdefault(str(provider), {}).update({str(k): _text(v) for k, v in table.items()})
        return out
    for entry in raw:
        provider, sep, pair = str(entry).partition(":")
        key, eq, value = pair.partition("=")
        if not sep or not eq or not provider.strip() or not key.strip():
            raise UsageError(f"{where}: expected PROVIDER:KEY=VALUE like ort_cuda:cudnn_conv_algo_search=HEURISTIC, "
                             f"got {entry!r}")
        out.setdefault(provider.strip(), {})[key.strip()] = value.strip()
    return out


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def check_option_keys(given: Mapping[str, str], accepted: Mapping[str, Sequence[str] | None] | Sequence[str],
                      where: str, owner: str) -> None:
    """One clear line for the first key ``owner`` does not accept, or a value outside its choices.
    ``accepted``: key -> allowed values (None: any value), or just the keys."""
    table: Mapping[str, Sequence[str] | None] = accepted if isinstance(accepted, Mapping) else \
        {k: None for k in accepted}
    for key, value in given.items():
        if key not in table:
            valid = ", ".join(sorted(table)) or "none"
            raise UsageError(f"{where}: {key!r} is not an option of {owner}{did_you_mean(key, list(table))}; "
                             f"valid: {valid}")
        allowed = table[key]
        if allowed is not None and value not in allowed:
            raise UsageError(f"{where}: {key}={value!r} is not valid for {owner}; valid: {', '.join(allowed)}")


# -- the record ------------------------------------------------------------------------------------------
#: the shared fields' option names (threads and EP options are every runtime's words)
SHARED_OPTIONS: dict[str, str] = {"threads": "intra_op_threads", "inter_threads": "inter_op_threads",
                                  "provider_options": "provider_options", "profile": "profile"}


@dataclass(frozen=True)
class RuntimeSettings:
    """How an artifact runs: the shared settings, then one typed section per declared
    :class:`BackendSettings` (a missing section is that section's defaults). Defaults are what the
    harness did before these settings existed, so a run that sets nothing is unchanged."""

    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    #: provider short name -> EP options (validated by the backend that owns the provider)
    provider_options: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: profiling of the judged session (a runner that profiles keeps its trace in the case directory)
    profile: bool = False
    #: section name -> that backend's own settings (only sections set away from their defaults)
    sections: Mapping[str, BackendSettings] = field(default_factory=dict)

    #: the shared fields (named once, with their options, in SHARED_OPTIONS)
    _SHARED: ClassVar[tuple[str, ...]] = tuple(SHARED_OPTIONS.values())

    def of(self, cls: type[S]) -> S:
        """This run's settings of one section (its defaults when nothing set it)."""
        found = self.sections.get(cls.section)
        return found if isinstance(found, cls) else cls()

    def options_for(self, provider: str) -> dict[str, str]:
        """The EP options declared for ``provider`` (a short name such as ``ort_cuda``)."""
        return dict(self.provider_options.get(provider, {}))

    def value(self, name: str) -> Any:
        """A shared field's or any section field's value, by name (axes, generic readers)."""
        if name in self._SHARED:
            return getattr(self, name)
        cls = section_of(name)
        if cls is None:
            raise KeyError(f"no runtime setting {name!r}")
        return getattr(self.of(cls), name)

    def axis_values(self) -> tuple[tuple[str, str], ...]:
        """This setting's axis values that differ from the defaults (what the variant id shows)."""
        return tuple((name, str(self.value(name))) for name, axis in AXES.items()
                     if str(self.value(name)) != axis.default)

    def merged(self, overrides: Mapping[str, Any]) -> "RuntimeSettings":
        """A copy with ``overrides`` (field name -> value, already parsed) applied, each to its
        section; provider options and TensorRT-like mapping fields are merged key by key, the
        override winning."""
        shared: dict[str, Any] = {}
        by_section: dict[str, dict[str, Any]] = {}
        for name, value in overrides.items():
            if name in self._SHARED:
                shared[name] = value
                continue
            cls = section_of(name)
            if cls is None:
                raise KeyError(f"no runtime setting {name!r} (no loaded section declares it)")
            by_section.setdefault(cls.section, {})[name] = value
        if "provider_options" in shared:
            merged = {p: dict(o) for p, o in self.provider_options.items()}
            for provider, options in dict(shared["provider_options"]).items():
                merged.setdefault(provider, {}).update(options)
            shared["provider_options"] = merged
        sections = dict(self.sections)
        for name, values in by_section.items():
            current = self.of(SECTIONS[name])
            for key, value in list(values.items()):
                old = getattr(current, key)
                if isinstance(old, Mapping) and isinstance(value, Mapping):
                    values[key] = {**old, **dict(value)}
            sections[name] = replace(current, **values)
        return replace(self, **shared, sections=sections)

    def only(self, honoured: frozenset[str]) -> "RuntimeSettings":
        """A copy with every field outside ``honoured`` (a backend's ``runtime_settings``) at its
        default: a record then never claims a setting its backend did not apply."""
        shared = {name: getattr(RuntimeSettings(), name) for name in self._SHARED if name not in honoured}
        sections = {}
        for name, section in self.sections.items():
            kept = {f.name: getattr(section, f.name) for f in dataclasses.fields(section) if f.name in honoured}
            if kept:
                sections[name] = type(section)(**kept)
        return replace(self, **shared, sections=sections)

    def as_dict(self, provider: str | None = None) -> dict[str, Any]:
        """JSON-ready, one flat object (the shared fields and every declared section's recorded
        fields); with ``provider``, only that provider's EP options (what a case used)."""
        options = ({provider: self.options_for(provider)} if provider and self.options_for(provider) else {}) \
            if provider else {p: dict(o) for p, o in self.provider_options.items()}
        out: dict[str, Any] = {name: getattr(self, name) for name in self._SHARED}
        out["provider_options"] = options
        for cls in SECTIONS.values():
            out.update(self.of(cls).record())
        return out

    def fields_dict(self) -> dict[str, Any]:
        """Every recorded field by name, values as the fields hold them (``dataclasses.asdict`` of
        each part, flattened): what a repro manifest keeps."""
        out: dict[str, Any] = {name: getattr(self, name) for name in self._SHARED}
        for cls in SECTIONS.values():
            section = self.of(cls)
            values = dataclasses.asdict(section)
            out.update({k: v for k, v in values.items() if section.info(k).recorded})
        return out

    def describe(self) -> str:
        """A short line of the non-default settings (report tables): ``opt=disabled threads=1``:
        the sections' leading fields, the threads, their other fields, EP options, their last ones."""
        placed: dict[str, list[str]] = {"first": [], "middle": [], "last": []}
        for cls in SECTIONS.values():
            section = self.of(cls)
            for f in dataclasses.fields(section):
                info = section.info(f.name)
                text = info.describe(getattr(section, f.name))
                if text:
                    placed[info.place].append(text)
        threads = [f"threads={self.intra_op_threads}"] if self.intra_op_threads else []
        threads += [f"inter={self.inter_op_threads}"] if self.inter_op_threads else []
        options = [f"{p}:{k}={v}" for p, o in self.provider_options.items() for k, v in o.items()]
        return " ".join(placed["first"] + threads + placed["middle"] + options + placed["last"])


def runtime_from_dict(raw: Mapping[str, Any]) -> RuntimeSettings:
    """The inverse of :meth:`RuntimeSettings.as_dict` (a fresh child's spec, a record)."""
    sections = {}
    for name, cls in SECTIONS.items():
        section = cls.from_record(raw)
        if section != cls():
            sections[name] = section
    return RuntimeSettings(
        intra_op_threads=raw.get("intra_op_threads"), inter_op_threads=raw.get("inter_op_threads"),
        provider_options={str(p): {str(k): str(v) for k, v in dict(o).items()}
                          for p, o in dict(raw.get("provider_options") or {}).items()},
        profile=bool(raw.get("profile", False)), sections=sections)


def describe_runtime(settings: Mapping[str, Any] | None) -> str:
    """:meth:`RuntimeSettings.describe` from a record's ``settings.runtime`` dict (reports)."""
    if not settings:
        return ""
    return runtime_from_dict(settings).describe()
