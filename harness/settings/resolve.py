"""Run options from explicit arguments and the suite config, validated with one-line errors.

Precedence, per setting: an explicit argument, then the config file (``harness.toml`` or
``[tool.harness]``), then the built-in default. Which settings exist, their types, limits and
config keys come from the option table (``harness.settings.options``); this module only
resolves values. The config's models and overrides go into the run's own
:class:`~harness.zoo.base.ModelCatalog` (``RunOptions.catalog``), never into the zoo's
module-level registry: two runs in one process (nested pytest, a test suite) cannot leak into
each other, and every pytest-xdist worker resolves the same catalog from the same inputs.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from harness.core import Precision, Provider, RunOptions, UsageError, did_you_mean, parse_precision
from harness.core.admission import limits_from, set_limits
from harness.core.values import Settings
from harness.data.corpus import CorpusError, corpus_by_name
from harness.runners import parse_provider
from harness.settings.config_file import find_config, load_config
from harness.settings.intake import checked_intake
from harness.settings.options import BY_NAME, OPTIONS, option, typed
from harness.settings.runtime import build_runtime, runtime_keys
from harness.zoo.base import ModelCatalog, ModelSpec, shadowed_directory, spec_for_directory
from harness.zoo.cachecheck import check_cache


def default_models(catalog: ModelCatalog | None = None) -> list[str]:
    catalog = catalog or ModelCatalog()
    return [name for name, spec in catalog.registered().items() if spec.default]


def build_options(given: Mapping[str, Any] | None = None, *, rootdir: Path | None = None,
                  **keywords: Any) -> RunOptions:
    """Options from explicit values (``given``: option name -> value, as parsed from the CLI or
    pytest; keyword arguments by option name are accepted too, e.g. ``models=[...]``,
    ``samples=4``); a suite config file (``config``, or a ``harness.toml`` / ``[tool.harness]``
    in ``rootdir`` or the working directory) supplies what they leave unset, the option table's
    defaults the rest. ``RunOptions.settings`` is built by iterating the table: no option is
    named, renamed or defaulted here."""
    values: dict[str, Any] = dict(given or {})
    for name, value in keywords.items():
        if name not in BY_NAME:
            raise TypeError(f"build_options: unknown option {name!r}{did_you_mean(name, BY_NAME)}")
        if value is not None:
            values[name] = option(name).parse(value)
    values = {k: v for k, v in values.items() if v is not None and v is not False}

    found = find_config(values.get("config"), rootdir)
    cfg = load_config(found) if found else None
    catalog = ModelCatalog()
    config_models = register_config_models(cfg, catalog) if cfg else []

    if "models" in values:
        names = list(values["models"])
    elif cfg and cfg.models:
        names = list(cfg.models)
    elif config_models:
        names = config_models
    else:
        names = default_models(catalog)
    for name in names:
        try:
            catalog.resolve(name)  # raises UsageError with did-you-mean
        except UsageError as exc:
            if "models" in values or not cfg:
                raise
            raise UsageError(f"{cfg.path}: run.models: {str(exc).removeprefix('--models: ')}") from None
    if cfg and (cfg.tolerances or cfg.budgets):
        _apply_run_defaults(names, cfg, catalog)

    def setting(name: str) -> Any:
        """explicit > config > table default"""
        if name in values:
            return values[name]
        from_config = cfg.value(name) if cfg is not None and option(name).in_config else None
        return from_config if from_config is not None else option(name).default

    precisions: list[Precision] = [parse_precision(p) for p in setting("precisions")]
    providers: list[Provider] = [parse_provider(p) for p in setting("providers")]
    explicit = {name for name in ("precisions", "providers", "samples")
                if name in values or (cfg is not None and cfg.value(name) is not None)}
    if "samples" in explicit:
        check_samples(names, catalog, setting("samples"), "--samples" if "samples" in values else
                      f"{cfg.path if cfg else ''}: run.samples")
    if found is not None and "config" not in values:  # found by itself: the rerun must name it
        values["config"] = found

    keys = runtime_keys()
    runtime, axes = build_runtime({name: setting(name) for name in keys
                                   if name in values or (cfg is not None and cfg.value(name) is not None)},
                                  f"{cfg.path}: run" if cfg is not None and not any(n in values for n in keys)
                                  else "")
    settings = Settings(**{o.name: typed(o, setting(o.name)) for o in OPTIONS})
    return RunOptions(
        models=list(dict.fromkeys(names)), precisions=list(dict.fromkeys(precisions)),
        providers=list(dict.fromkeys(providers)), settings=settings, given=values, catalog=catalog,
        explicit_variants=bool(explicit & {"precisions", "providers"}),
        notes=tuple(shadow_notes(names, catalog)), runtime=runtime, runtime_axes=axes,
    )


def shadow_notes(names: Iterable[str], catalog: ModelCatalog) -> list[str]:
    """One line per zoo name that a local directory of the same name shadows in the working
    directory: the name means the zoo model (names are names, paths are paths), and the user
    should know the directory was not judged."""
    notes = []
    for name in names:
        local = shadowed_directory(name)
        if local is not None and name in catalog.registered():
            notes.append(f"--models {name}: the zoo model {name!r} is judged, not the local directory "
                         f"{str(local.resolve())!r} (write --models ./{name} for the directory)")
    return notes


def check_samples(names: Iterable[str], catalog: ModelCatalog, samples: int, where: str) -> None:
    """An explicit sample count larger than a model's corpus is a usage error: the run would
    otherwise judge fewer sentences than it claims."""
    for name in names:
        spec = catalog.resolve(name)
        try:
            size = len(corpus_by_name(spec.corpus))
        except CorpusError:
            continue  # reported where the corpus is loaded, with its own message
        if samples > size:
            raise UsageError(f"{where} {samples}: the corpus {spec.corpus!r} of model {name!r} has only {size} "
                             f"sentences (use --samples {size} or fewer, or a larger corpus)")


def register_config_models(cfg: Any, catalog: ModelCatalog) -> list[str]:
    """Add every ``[models.<name>]`` of ``cfg`` to ``catalog``; return the names of the *new*
    models (those with a ``path``), which a config without ``run.models`` runs."""
    new: list[str] = []
    for name, entry in cfg.entries.items():
        base = catalog.builtin(name)
        if entry.path is None:
            if base is None:
                zoo = sorted(catalog.registered())
                raise UsageError(f"{cfg.path}: models.{name}: no zoo model of that name{did_you_mean(name, zoo)}; "
                                 "give 'path' to define a new model")
            spec = base
        else:
            if base is not None:
                raise UsageError(f"{cfg.path}: models.{name}: the name is taken by a built-in zoo model; "
                                 "choose another name")
            spec = spec_for_directory(entry.path, name=name, family=entry.family)
            spec = replace(spec, default=False, corpus=cfg.corpus or spec.corpus,
                           description=entry.description or f"{spec.description} (from {cfg.path.name})")
            new.append(name)
        artifacts = {p: str(a) for p, a in entry.artifacts.items()}
        extra = {**spec.extra, "config": str(cfg.path)}
        if entry.path is not None:
            extra.update(trust_remote_code=entry.trust_remote_code, allow_pickle=entry.allow_pickle)
        if artifacts:
            extra["artifacts"] = artifacts
        if entry.endpoint is not None:
            extra["endpoint"] = dict(entry.endpoint)
        if entry.io_protocol is not None:
            extra["io_protocol"] = dict(entry.io_protocol)
        if entry.runtime:
            extra["runtime"] = dict(entry.runtime)
        spec = replace(
            spec,
            corpus=entry.corpus or spec.corpus,
            target_lang=entry.target_lang or spec.target_lang,
            exporter=entry.exporter or spec.exporter,
            description=entry.description or spec.description,
            tolerances=merge_tolerances(spec.tolerances, entry.tolerances),
            budgets={**spec.budgets, **entry.budgets},
            extra=extra,
            int8_per_channel=spec.int8_per_channel if entry.int8_per_channel is None else entry.int8_per_channel,
            fp16_op_block_list=tuple(dict.fromkeys((*spec.fp16_op_block_list, *entry.fp16_op_block_list))),
            fp16_node_block_list=tuple(dict.fromkeys((*spec.fp16_node_block_list, *entry.fp16_node_block_list))),
            int8_nodes_to_exclude=tuple(dict.fromkeys((*spec.int8_nodes_to_exclude, *entry.int8_nodes_to_exclude))),
        )
        catalog.add(spec)
    return new


def _apply_run_defaults(names: Iterable[str], cfg: Any, catalog: ModelCatalog) -> None:
    """Config-wide tolerances/budgets for every named model of the run; a model's own
    ``[models.<name>]`` values still win over them."""
    for name in names:
        spec: ModelSpec | None = catalog.registered().get(name)
        if spec is None:  # a directory given on the command line: not in the catalog, not ours to change
            continue
        own = cfg.entries.get(name)
        tol = merge_tolerances(merge_tolerances(spec.tolerances, cfg.tolerances), own.tolerances if own else {})
        bud = {**spec.budgets, **cfg.budgets, **(own.budgets if own else {})}
        catalog.add(replace(spec, tolerances=tol, budgets=bud))


def merge_tolerances(*layers: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per-precision merge: later layers win metric by metric."""
    out: dict[str, dict[str, float]] = {}
    for layer in layers:
        for precision, checks in (layer or {}).items():
            out.setdefault(precision, {}).update(checks)
    return out


def preflight(options: RunOptions, spell: Callable[[str], str] | None = None) -> None:
    """Users' model directories held to every refusal of the loader that needs no weights
    (``harness.zoo.loading.check_intake``), before any case starts: a directory without a
    tokenizer, with pickle weights or its own code is one ``UsageError`` line, exactly as
    ``harness check`` reports it, instead of an error record with a traceback per case."""
    limits = limits_from(options.settings)
    set_limits(limits)
    catalog = options.catalog or ModelCatalog()
    specs = [catalog.resolve(name) for name in options.models]
    for spec in specs:
        if spec.path is not None:
            checked_intake(spec, limits)  # once per directory content: a cached pass is not redone
    check_run_cache(options, specs, spell or (lambda name: option(name).flag))


def check_run_cache(options: RunOptions, specs: list[ModelSpec], spell: Callable[[str], str]) -> None:
    """The run's cache (``--cache``, else ``$HARNESS_CACHE``, else the default) is usable, named as
    the user gave it (``spell``: an option name -> the flag of this front end)."""

    given = options.given.get("cache")
    where = spell("cache") if given else "HARNESS_CACHE" if os.environ.get("HARNESS_CACHE") else "cache directory"
    check_cache(specs, len(options.precisions), where, Path(given) if given else None)
