"""Run options from pytest/CLI arguments, validated with one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from harness.config import (DEFAULT_PRECISIONS, DEFAULT_PROVIDERS, PROVIDERS, Precision, Provider, RunOptions,
                            UsageError, parse_precision, parse_provider, split_csv)


def default_models() -> list[str]:
    from harness.zoo import registered

    return [name for name, spec in registered().items() if spec.default]


def build_options(*, models: Iterable[str] | None = None, precisions: Iterable[str] | None = None,
                  providers: Iterable[str] | None = None, exporter: str | None = None, opset: int | None = None,
                  batch_size: int | None = None, num_samples: int | None = None,
                  intra_op_threads: int | None = None, inter_op_threads: int | None = None,
                  config_path: str | Path | None = None, rootdir: Path | None = None) -> RunOptions:
    """Options from explicit arguments; a suite config file (``config_path``, or a
    ``harness.toml`` in ``rootdir``) supplies what the arguments leave unset."""
    from harness.zoo import resolve

    names = split_csv(list(models)) if models else default_models()
    for name in names:
        resolve(name)  # raises UsageError with did-you-mean
    precs: list[Precision] = ([parse_precision(p) for p in split_csv(list(precisions))]
                              if precisions else list(DEFAULT_PRECISIONS))
    provs: list[Provider] = ([parse_provider(p) for p in split_csv(list(providers))]
                             if providers else [PROVIDERS[p] for p in DEFAULT_PROVIDERS])
    if exporter is not None and exporter not in ("torchscript", "dynamo"):
        raise UsageError(f"--exporter: unknown exporter {exporter!r}; valid: torchscript, dynamo")
    for option, value, low in (("--opset", opset, 11), ("--batch-size", batch_size, 1), ("--samples", num_samples, 1)):
        if value is not None and value < low:
            raise UsageError(f"{option}: must be >= {low}, got {value}")
    options = RunOptions(models=list(dict.fromkeys(names)), precisions=list(dict.fromkeys(precs)),
                         providers=list(dict.fromkeys(provs)))
    if exporter:
        options.exporter = exporter
    if opset:
        options.opset = opset
    if batch_size:
        options.batch_size = batch_size
    if num_samples:
        options.num_samples = num_samples
    options.intra_op_threads = intra_op_threads
    options.inter_op_threads = inter_op_threads
    return options
