"""Option values -> :class:`~harness.core.runtime.RuntimeSettings`, validated.

The run's options (CLI, pytest, ``[run]``) and a model's ``[models.<name>.runtime]`` table use the
same keys (the option names of the issue-10 block of the option table); this module turns either
into RuntimeSettings field values and checks every EP option against the backend that owns the
provider (``Backend.validate_provider_options``), so a typo is one exit-2 line before anything runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from harness.core import UsageError, did_you_mean
from harness.core.runtime import (
    AXES,
    GRAPH_OPTIMIZATION_LEVELS,
    RuntimeSettings,
    parse_provider_options,
    parse_trt_profile,
)
from harness.runners import provider_table

#: option name -> RuntimeSettings field (the keys a ``[models.<name>.runtime]`` table takes)
RUNTIME_KEYS: dict[str, str] = {
    "graph_optimization": "graph_optimization", "threads": "intra_op_threads", "inter_threads": "inter_op_threads",
    "execution_mode": "execution_mode", "mem_pattern": "mem_pattern", "cpu_arena": "cpu_arena",
    "provider_options": "provider_options", "trt_profile": "trt_profile", "trt_engine_cache": "trt_engine_cache",
    "trt_timing_cache": "trt_timing_cache", "profile": "profile",
}


def graph_levels(raw: Any, where: str) -> list[str]:
    items = [raw] if isinstance(raw, str) else list(raw)
    out = []
    for item in items:
        level = str(item).strip().lower()
        if level == "disable":
            level = "disabled"
        if level not in GRAPH_OPTIMIZATION_LEVELS:
            raise UsageError(f"{where}: unknown level {item!r}{did_you_mean(level, GRAPH_OPTIMIZATION_LEVELS)}; "
                             f"valid: {', '.join(GRAPH_OPTIMIZATION_LEVELS)}")
        out.append(level)
    return list(dict.fromkeys(out))


def runtime_fields(values: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """RuntimeSettings field values and matrix axes from option values (option name -> parsed
    value). ``where`` prefixes errors (``--trt-profile``, ``harness.toml: models.x.runtime``)."""
    fields: dict[str, Any] = {}
    axes: dict[str, list[str]] = {}
    for name, value in values.items():
        if name not in RUNTIME_KEYS or value is None:
            continue
        loc = f"{where}.{name}" if where else f"--{name.replace('_', '-')}"
        field = RUNTIME_KEYS[name]
        if name == "graph_optimization":
            levels = graph_levels(value, loc)
            axes[field] = levels
            fields[field] = levels[0]
        elif name == "provider_options":
            fields[field] = parse_provider_options(value, loc)
        elif name == "trt_profile":
            fields[field] = parse_trt_profile(value, loc)
        elif name in ("mem_pattern", "cpu_arena"):
            fields[field] = value if isinstance(value, bool) else str(value).lower() == "on"
        elif name in ("trt_engine_cache", "trt_timing_cache"):
            fields[field] = str(Path(str(value)).expanduser().resolve())
        else:
            fields[field] = value
    return fields, axes


def validate_provider_options(options: Mapping[str, Mapping[str, str]], where: str) -> None:
    """Every provider named exists, and its backend accepts every key (and value)."""
    from harness.runners import backends

    table = provider_table()
    classes = backends()
    for short, given in options.items():
        provider = table.get(short)
        if provider is None:
            raise UsageError(f"{where}: unknown provider {short!r}{did_you_mean(short, table)}; "
                             f"valid: {', '.join(table)}")
        classes[provider.backend].validate_provider_options(provider, given, f"{where} {short}")


def build_runtime(values: Mapping[str, Any], where: str = "") -> tuple[RuntimeSettings, dict[str, list[str]]]:
    """The run's RuntimeSettings and axes from its option values, validated."""
    fields, axes = runtime_fields(values, where)
    if "provider_options" in fields:
        validate_provider_options(fields["provider_options"], where or "--provider-option")
    return RuntimeSettings().merged(fields), axes


def axis_values(name: str, run_axes: Mapping[str, list[str]], model_runtime: Mapping[str, Any] | None) -> list[str]:
    """The values of axis ``name`` for one model: the model's own setting wins over the run's."""
    if model_runtime and name in model_runtime:
        return [str(model_runtime[name])]
    return list(run_axes.get(name) or [])


__all__ = ["AXES", "RUNTIME_KEYS", "axis_values", "build_runtime", "graph_levels", "runtime_fields",
           "validate_provider_options"]
