"""Run options from pytest/CLI arguments and the suite config, validated with one-line errors.

Precedence, per setting: an explicit argument, then the config file (``harness.toml`` or
``[tool.harness]``), then the built-in default. The config's models are registered here, so
``resolve(name)`` finds them in every process of the run (pytest-xdist workers included).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Iterable, Mapping

from harness.config import (DEFAULT_PRECISIONS, DEFAULT_PROVIDERS, PROVIDERS, Precision, Provider, RunOptions,
                            UsageError, did_you_mean, parse_precision, parse_provider, split_csv)


def default_models() -> list[str]:
    from harness.zoo import registered

    return [name for name, spec in registered().items() if spec.default]


def build_options(*, models: Iterable[str] | None = None, precisions: Iterable[str] | None = None,
                  providers: Iterable[str] | None = None, exporter: str | None = None, opset: int | None = None,
                  batch_size: int | None = None, num_samples: int | None = None,
                  intra_op_threads: int | None = None, inter_op_threads: int | None = None,
                  config_path: str | Path | None = None, rootdir: Path | None = None) -> RunOptions:
    """Options from explicit arguments; a suite config file (``config_path``, or a
    ``harness.toml`` / ``[tool.harness]`` in ``rootdir`` or the working directory)
    supplies what the arguments leave unset."""
    from harness.config_file import find_config, load_config
    from harness.zoo import resolve
    from harness.zoo.base import reset_overrides

    reset_overrides()  # a previous config in this process must not leak into this one
    found = find_config(config_path, rootdir)
    cfg = load_config(found) if found else None
    config_models = register_config_models(cfg) if cfg else []

    if models:
        names = split_csv(list(models))
    elif cfg and cfg.models:
        names = list(cfg.models)
    elif config_models:
        names = config_models
    else:
        names = default_models()
    for name in names:
        try:
            resolve(name)  # raises UsageError with did-you-mean
        except UsageError as exc:
            if models or not cfg:
                raise
            raise UsageError(f"{cfg.path}: run.models: {str(exc).removeprefix('--models: ')}") from None
    if cfg and (cfg.tolerances or cfg.budgets):
        _apply_run_defaults(names, cfg.tolerances, cfg.budgets, cfg.entries)

    precs: list[Precision] = ([parse_precision(p) for p in split_csv(list(precisions))] if precisions
                              else [parse_precision(p) for p in cfg.precisions] if cfg and cfg.precisions
                              else list(DEFAULT_PRECISIONS))
    provs: list[Provider] = ([parse_provider(p) for p in split_csv(list(providers))] if providers
                             else [PROVIDERS[p] for p in cfg.providers] if cfg and cfg.providers
                             else [PROVIDERS[p] for p in DEFAULT_PROVIDERS])
    if exporter is not None and exporter not in ("torchscript", "dynamo"):
        raise UsageError(f"--exporter: unknown exporter {exporter!r}; valid: torchscript, dynamo")
    for option, value, low in (("--opset", opset, 11), ("--batch-size", batch_size, 1), ("--samples", num_samples, 1)):
        if value is not None and value < low:
            raise UsageError(f"{option}: must be >= {low}, got {value}")
    options = RunOptions(models=list(dict.fromkeys(names)), precisions=list(dict.fromkeys(precs)),
                         providers=list(dict.fromkeys(provs)))
    exporter = exporter or (cfg.exporter if cfg else None)
    opset = opset or (cfg.opset if cfg else None)
    batch_size = batch_size or (cfg.batch_size if cfg else None)
    num_samples = num_samples or (cfg.samples if cfg else None)
    if exporter:
        options.exporter = exporter
    if opset:
        options.opset = opset
    if batch_size:
        options.batch_size = batch_size
    if num_samples:
        options.num_samples = num_samples
    options.intra_op_threads = intra_op_threads if intra_op_threads is not None else (cfg.threads if cfg else None)
    options.inter_op_threads = inter_op_threads
    return options


def register_config_models(cfg) -> list[str]:
    """Register every ``[models.<name>]`` of ``cfg``; return the names of the *new* models
    (those with a ``path``), which a config without ``run.models`` runs."""
    from harness.zoo import registered
    from harness.zoo.base import builtin, register, spec_for_directory

    new: list[str] = []
    for name, entry in cfg.entries.items():
        base = builtin(name)
        if entry.path is None:
            if base is None:
                zoo = sorted(registered())
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
        )
        register(spec, replace=True)
    return new


def _apply_run_defaults(names: list[str], tolerances: Mapping, budgets: Mapping, entries: Mapping) -> None:
    """Config-wide tolerances/budgets for every registered model of the run; a model's own
    ``[models.<name>]`` values still win over them."""
    from harness.zoo import registered
    from harness.zoo.base import register

    specs = registered()
    for name in names:
        spec = specs.get(name)
        if spec is None:  # a directory given on the command line: not registered, not ours to change
            continue
        own = entries.get(name)
        tol = merge_tolerances(merge_tolerances(spec.tolerances, tolerances), own.tolerances if own else {})
        bud = {**spec.budgets, **budgets, **(own.budgets if own else {})}
        register(replace(spec, tolerances=tol, budgets=bud), replace=True)


def merge_tolerances(*layers: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per-precision merge: later layers win metric by metric."""
    out: dict[str, dict[str, float]] = {}
    for layer in layers:
        for precision, checks in (layer or {}).items():
            out.setdefault(precision, {}).update(checks)
    return out
