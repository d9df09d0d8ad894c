"""Option values -> :class:`~harness.core.runtime.RuntimeSettings`, validated.

The run's options (CLI, pytest, ``[run]``) and a model's ``[models.<name>.runtime]`` table use the
same keys: the shared settings' options (``threads``, ``inter_threads``, ``provider_options``,
``profile``) and the options each backend's settings section declares in the backend's own module
(``OrtSessionSettings``, ``TensorRTSettings``: :func:`runtime_keys` reads them, nothing here lists
them). This module turns either into RuntimeSettings field values, each parsed by the field that
declares it, and checks every EP option against the backend that owns the provider
(``Backend.validate_provider_options``), so a typo is one exit-2 line before anything runs.
"""

from __future__ import annotations

from typing import Any, Mapping

from harness.core import UsageError, did_you_mean
from harness.core.markdown import table
from harness.core.runtime import (
    AXES,
    SECTIONS,
    SHARED_OPTIONS,
    BackendSettings,
    RuntimeSettings,
    parse_provider_options,
)
from harness.runners import backends, provider_table
from harness.settings.options import option


def runtime_keys() -> dict[str, str]:
    """Option name -> RuntimeSettings field: the shared settings', then every declared section's
    (the keys a ``[models.<name>.runtime]`` table takes)."""
    backends()  # the sections are declared by the backends' modules
    out = dict(SHARED_OPTIONS)
    for cls in SECTIONS.values():
        out.update(cls.options())
    return out


def _section(field: str) -> type[BackendSettings] | None:
    return next((cls for cls in SECTIONS.values() if field in cls.names()), None)


def axis_levels(name: str, raw: Any, where: str) -> list[str]:
    """An axis option's values (one or several), each parsed by its field, duplicates dropped."""
    field = runtime_keys()[name]
    cls = _section(field)
    if cls is None or field not in AXES:
        raise KeyError(f"{name!r} is not a runtime axis")
    items = [raw] if isinstance(raw, str) else list(raw)
    return list(dict.fromkeys(str(cls.info(field).parse(item, where)) for item in items))


def is_axis(name: str) -> bool:
    """Whether option ``name`` is a runtime axis (a list of values makes it a matrix axis)."""
    field = runtime_keys().get(name)
    return field is not None and field in AXES


def runtime_fields(values: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """RuntimeSettings field values and matrix axes from option values (option name -> parsed
    value). ``where`` prefixes errors (``--trt-profile``, ``harness.toml: models.x.runtime``)."""
    keys = runtime_keys()
    fields: dict[str, Any] = {}
    axes: dict[str, list[str]] = {}
    for name, value in values.items():
        if name not in keys or value is None:
            continue
        loc = f"{where}.{name}" if where else f"--{name.replace('_', '-')}"
        field = keys[name]
        cls = _section(field)
        if cls is not None and field in AXES:
            levels = axis_levels(name, value, loc)
            axes[field] = levels
            fields[field] = levels[0]
        elif cls is not None:
            fields[field] = cls.info(field).parse(value, loc)
        elif name == "provider_options":
            fields[field] = parse_provider_options(value, loc)
        else:
            fields[field] = value
    return fields, axes


def validate_provider_options(options: Mapping[str, Mapping[str, str]], where: str) -> None:
    """Every provider named exists, and its backend accepts every key (and value)."""
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


__all__ = ["AXES", "axis_levels", "axis_values", "build_runtime", "is_axis", "runtime_fields",
           "runtime_keys", "validate_provider_options"]


def docs_table() -> str:
    """docs/runtime.md: every runtime setting -- the shared ones, then each backend's section as its
    module declares it -- with its option, flag, default and whether the record keeps it (generated)."""
    keys = runtime_keys()
    lines: list[list[str]] = []

    def row(owner: str, name: str, field: str, recorded: bool) -> list[str]:
        o = option(name)
        default = o.describe_default() or "–"
        record = f"yes (`{field}`)" if recorded else "no (the rerun repeats it)"
        return [owner, f"`{name}`", f"`{o.flag}`", f"`{default}`", record, o.help.replace("%%", "%").replace("|", "/")]

    for i, (name, field) in enumerate(SHARED_OPTIONS.items()):
        lines.append(row("shared (`core/runtime.py`)" if i == 0 else "", name, field, True))
    for cls in SECTIONS.values():
        owner = f"`{cls.section}`: {cls.doc} (`{cls.__module__.removeprefix('harness.')}.{cls.__qualname__}`)"
        for i, (name, field) in enumerate((n, f) for n, f in cls.options().items() if n in keys):
            lines.append(row(owner if i == 0 else "", name, field, cls.info(field).recorded))
    return "\n".join(table(["section (declared in)", "key (`[run]`, `[models.<name>.runtime]`)", "`harness run`", "default",
                            "in `settings.runtime`", "what"], lines))
