"""Runtime settings: how a deployed artifact is *run*, declared once as one typed record.

A model ships with runtime settings, and they change numbers and speed: ONNX Runtime's graph
optimisation level decides which fused kernels run (``ORT_ENABLE_ALL`` vs disabled is where a
fused attention or LayerNorm changes the last bits), threads and execution mode change latency,
the memory arena and pattern change peak memory, execution-provider options (CUDA's
``cudnn_conv_algo_search``, ``gpu_mem_limit``; TensorRT's FP16 flag, engine and timing caches)
change both, and a TensorRT engine is only valid inside its optimisation profile (trtexec's
``--minShapes/--optShapes/--maxShapes``). :class:`RuntimeSettings` holds all of it; a run declares
it (CLI / ``[run]``), a model refines it (``[models.<name>.runtime]``), EP options are keyed by
provider, and every record carries the effective value (``settings.runtime``) and a rerun command
that repeats it. Which EP option keys a provider accepts is declared by the backend that owns the
provider (``Backend.provider_option_keys``), never here.

A setting may also be a matrix **axis** (:data:`AXES`): ``graph_optimization = ["disabled", "all"]``
judges the fused and the unfused graph side by side. An axis value other than the default adds a
suffix to the variant id (``marian-tiny-fp32-ort_cpu-opt_disabled``), so the default run's ids are
unchanged and a non-default setting never poses as the default case in a baseline.

Pure values and parsing only (imports nothing else of the harness).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from harness.core.errors import UsageError, did_you_mean

#: ONNX Runtime graph optimisation levels, by the names users write (``ORT_DISABLE_ALL`` ...)
GRAPH_OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")
EXECUTION_MODES = ("sequential", "parallel")


@dataclass(frozen=True)
class Axis:
    """A runtime setting that may take several values in one run (one case per value)."""

    name: str  # the RuntimeSettings field
    tag: str  # the variant-id suffix prefix: ``-<tag>_<value>``
    default: str
    choices: tuple[str, ...]


#: the settings that can be matrix axes
AXES: dict[str, Axis] = {
    "graph_optimization": Axis("graph_optimization", "opt", "all", GRAPH_OPTIMIZATION_LEVELS),
}


def axis_suffix(values: Sequence[tuple[str, str]]) -> str:
    """The variant-id suffix of a case's non-default axis values (``-opt_disabled``)."""
    return "".join(f"-{AXES[name].tag}_{value}" for name, value in values if value != AXES[name].default)


# -- TensorRT optimisation profiles (trtexec-like) ----------------------------------------------------
@dataclass(frozen=True)
class ShapeRange:
    """One input's explicit min / opt / max shape (``1x16,8x64,16x256``)."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    def text(self) -> str:
        return ",".join("x".join(str(d) for d in dims) for dims in (self.min, self.opt, self.max))


def _dims(text: str, where: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.strip().lower().split("x"))
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not a shape like 8x64") from None
    if not dims or any(d < 0 for d in dims):
        raise UsageError(f"{where}: {text!r} is not a shape like 8x64")
    return dims


def parse_shape_range(text: str | Sequence[str], where: str) -> ShapeRange:
    """``"1x16,8x64,16x256"`` or ``["1x16", "8x64", "16x256"]`` -> ShapeRange, checked:
    the same rank three times and min <= opt <= max on every axis (what TensorRT demands)."""
    parts = [p for p in text.split(",")] if isinstance(text, str) else [str(p) for p in text]
    if len(parts) != 3:
        raise UsageError(f"{where}: expected min,opt,max shapes like 1x16,8x64,16x256, got {text!r}")
    low, opt, high = (_dims(p, where) for p in parts)
    if not len(low) == len(opt) == len(high):
        raise UsageError(f"{where}: min, opt and max must have the same rank, got {text!r}")
    for axis, (a, b, c) in enumerate(zip(low, opt, high)):
        if not a <= b <= c:
            raise UsageError(f"{where}: axis {axis} needs min <= opt <= max, got {a}, {b}, {c}")
    return ShapeRange(low, opt, high)


def parse_trt_profile(raw: Sequence[str] | Mapping[str, Any], where: str) -> dict[str, ShapeRange]:
    """``["input_ids:1x16,8x64,16x256", ...]`` (CLI) or ``{input_ids = "1x16,8x64,16x256"}`` /
    ``{input_ids = ["1x16", "8x64", "16x256"]}`` (TOML) -> input name -> ShapeRange."""
    out: dict[str, ShapeRange] = {}
    if isinstance(raw, Mapping):
        items = [(str(k), v) for k, v in raw.items()]
    else:
        items = []
        for entry in raw:
            name, sep, shapes = str(entry).partition(":")
            if not sep or not name.strip():
                raise UsageError(f"{where}: expected INPUT:MIN,OPT,MAX like input_ids:1x16,8x64,16x256, "
                                 f"got {entry!r}")
            items.append((name.strip(), shapes))
    for name, shapes in items:
        if not isinstance(shapes, (str, list, tuple)):
            raise UsageError(f"{where}.{name}: expected \"MIN,OPT,MAX\" or a list of three shapes")
        out[name] = parse_shape_range(shapes, f"{where} {name}")
    return out


# -- provider options ------------------------------------------------------------------------------
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
@dataclass(frozen=True)
class RuntimeSettings:
    """How an artifact runs. Defaults are what the harness did before these settings existed
    (ORT_ENABLE_ALL, runtime-chosen threads, sequential execution, arena and memory pattern on,
    no EP options, the derived TensorRT profile), so a run that sets nothing is unchanged."""

    graph_optimization: str = "all"
    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    execution_mode: str = "sequential"
    mem_pattern: bool = True
    cpu_arena: bool = True
    #: provider short name -> EP options (validated by the backend that owns the provider)
    provider_options: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: input name -> explicit TensorRT min/opt/max (inputs not named keep the derived profile)
    trt_profile: Mapping[str, ShapeRange] = field(default_factory=dict)
    trt_engine_cache: str | None = None
    trt_timing_cache: str | None = None
    #: ONNX Runtime profiling of the judged session (trace kept in the case directory)
    profile: bool = False

    def options_for(self, provider: str) -> dict[str, str]:
        """The EP options declared for ``provider`` (a short name such as ``ort_cuda``)."""
        return dict(self.provider_options.get(provider, {}))

    def axis_values(self) -> tuple[tuple[str, str], ...]:
        """This setting's axis values that differ from the defaults (what the variant id shows)."""
        return tuple((name, str(getattr(self, name))) for name, axis in AXES.items()
                     if str(getattr(self, name)) != axis.default)

    def merged(self, overrides: Mapping[str, Any]) -> "RuntimeSettings":
        """A copy with ``overrides`` (field -> value, already validated) applied; provider options
        and TensorRT profile entries are merged key by key, the override winning."""
        values = dict(overrides)
        if "provider_options" in values:
            merged = {p: dict(o) for p, o in self.provider_options.items()}
            for provider, options in dict(values["provider_options"]).items():
                merged.setdefault(provider, {}).update(options)
            values["provider_options"] = merged
        if "trt_profile" in values:
            values["trt_profile"] = {**self.trt_profile, **dict(values["trt_profile"])}
        return replace(self, **values)

    def as_dict(self, provider: str | None = None) -> dict[str, Any]:
        """JSON-ready; with ``provider``, only that provider's EP options (what a case used)."""
        options = ({provider: self.options_for(provider)} if provider and self.options_for(provider) else {}) \
            if provider else {p: dict(o) for p, o in self.provider_options.items()}
        return {
            "graph_optimization": self.graph_optimization, "intra_op_threads": self.intra_op_threads,
            "inter_op_threads": self.inter_op_threads, "execution_mode": self.execution_mode,
            "mem_pattern": self.mem_pattern, "cpu_arena": self.cpu_arena, "provider_options": options,
            "trt_profile": {name: r.text() for name, r in self.trt_profile.items()},
            "trt_engine_cache": self.trt_engine_cache, "trt_timing_cache": self.trt_timing_cache,
            "profile": self.profile,
        }

    def describe(self) -> str:
        """A short line of the non-default settings (report tables): ``opt=disabled threads=1``."""
        parts = []
        if self.graph_optimization != "all":
            parts.append(f"opt={self.graph_optimization}")
        if self.intra_op_threads:
            parts.append(f"threads={self.intra_op_threads}")
        if self.inter_op_threads:
            parts.append(f"inter={self.inter_op_threads}")
        if self.execution_mode != "sequential":
            parts.append(f"exec={self.execution_mode}")
        if not self.mem_pattern:
            parts.append("mem_pattern=off")
        if not self.cpu_arena:
            parts.append("arena=off")
        parts += [f"{p}:{k}={v}" for p, o in self.provider_options.items() for k, v in o.items()]
        parts += [f"trt:{n}={r.text()}" for n, r in self.trt_profile.items()]
        return " ".join(parts)


def describe_runtime(settings: Mapping[str, Any] | None) -> str:
    """:meth:`RuntimeSettings.describe` from a record's ``settings.runtime`` dict (reports)."""
    if not settings:
        return ""
    parts = []
    if settings.get("graph_optimization", "all") != "all":
        parts.append(f"opt={settings['graph_optimization']}")
    for key, label in (("intra_op_threads", "threads"), ("inter_op_threads", "inter")):
        if settings.get(key):
            parts.append(f"{label}={settings[key]}")
    if settings.get("execution_mode", "sequential") != "sequential":
        parts.append(f"exec={settings['execution_mode']}")
    if settings.get("mem_pattern") is False:
        parts.append("mem_pattern=off")
    if settings.get("cpu_arena") is False:
        parts.append("arena=off")
    for provider, options in (settings.get("provider_options") or {}).items():
        parts += [f"{provider}:{k}={v}" for k, v in dict(options).items()]
    parts += [f"trt:{n}={r}" for n, r in (settings.get("trt_profile") or {}).items()]
    return " ".join(parts)


def runtime_from_dict(raw: Mapping[str, Any]) -> RuntimeSettings:
    """The inverse of :meth:`RuntimeSettings.as_dict` (a fresh child's spec, a record)."""
    defaults = RuntimeSettings()
    profile = {name: parse_shape_range(str(text), f"trt_profile {name}")
               for name, text in dict(raw.get("trt_profile") or {}).items()}
    return RuntimeSettings(
        graph_optimization=str(raw.get("graph_optimization") or defaults.graph_optimization),
        intra_op_threads=raw.get("intra_op_threads"), inter_op_threads=raw.get("inter_op_threads"),
        execution_mode=str(raw.get("execution_mode") or defaults.execution_mode),
        mem_pattern=bool(raw.get("mem_pattern", True)), cpu_arena=bool(raw.get("cpu_arena", True)),
        provider_options={str(p): {str(k): str(v) for k, v in dict(o).items()}
                          for p, o in dict(raw.get("provider_options") or {}).items()},
        trt_profile=profile, trt_engine_cache=raw.get("trt_engine_cache"),
        trt_timing_cache=raw.get("trt_timing_cache"), profile=bool(raw.get("profile", False)))
