"""A run's cases: the variants of a suite from the run's options (models x precisions x providers x
runtime axes), filtered as the suite asks. Below both front ends that list them: the pytest plugin
parametrizes its suites with it, ``harness doctor`` prints it.
"""

from __future__ import annotations

from itertools import product
from typing import TYPE_CHECKING, Callable

from harness.core import Provider, RunOptions, Variant

if TYPE_CHECKING:  # pragma: no cover
    from harness.zoo.base import ModelSpec


def matrix(options: RunOptions, *, families: set[str] | None = None, generates: bool = False,
           where: Callable[[ModelSpec], bool] | None = None,
           accepts: Callable[[ModelSpec, Variant], bool] | None = None) -> list[Variant]:
    """The variants of a suite: models filtered by family, generation head and ``where(spec)``;
    variants filtered by ``accepts(spec, variant)``."""
    from harness.zoo.base import ModelCatalog, is_path

    catalog = options.catalog or ModelCatalog()
    variants = []
    for model in options.models:
        spec = catalog.resolve(model)
        if families and spec.family not in families:
            continue
        if generates and not spec.generates:
            continue
        if where is not None and not where(spec):
            continue
        for precision in options.precisions:
            for provider in options.providers:
                for axes in _runtime_axes(options, spec, provider):
                    variant = Variant(model if is_path(model) else spec.name, precision, provider, axes)
                    if accepts is None or accepts(spec, variant):
                        variants.append(variant)
    return variants


def _runtime_axes(options: RunOptions, spec: ModelSpec, provider: Provider) -> list[tuple[tuple[str, str], ...]]:
    """The runtime axis values of one model x provider: one tuple per case. Only axes the
    provider's backend honours multiply its cases; no axis in the run: one case, ``()``."""
    from harness.runners import backends
    from harness.settings.runtime import AXES, axis_values

    backend = backends().get(provider.backend)
    honoured = backend.runtime_settings if backend is not None else frozenset()
    own = dict(spec.extra.get("runtime") or {})
    named = [(name, axis_values(name, options.runtime_axes, own)) for name in AXES if name in honoured]
    named = [(name, values) for name, values in named if values]
    if not named:
        return [()]
    return [tuple(zip([n for n, _ in named], combo)) for combo in product(*[v for _, v in named])]


__all__ = ["matrix"]
