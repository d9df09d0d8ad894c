"""Backends, one module each, registered by ``@register_backend``.

Adding a backend = one new module here with a ``Backend`` subclass decorated by
``@register_backend``; variants name it through ``Provider.backend``. The class owns
everything that differs between runtimes (loading, what one timed call is, device
synchronisation, the files a deployment ships, loading in a fresh child process), so no
other module asks which backend it holds.

The modules are imported on first use of :func:`backends`, not with the package, and each
imports its runtime only where it uses it: a fresh-process measurement that only needs
``OrtGraphRunner`` must not pay for torch, which would distort cold start and peak memory,
and reading the provider table (:func:`providers`, ``PROVIDERS``, :func:`parse_provider`) must
not import any runtime. The table lives here, with the backends that declare it, not in
``harness.core``: the value types stay below every backend (``Provider`` is a plain record).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, TypeVar

from harness.core.errors import UsageError, did_you_mean, valid_names
from harness.core.registry import Registry
from harness.runners.base import Backend, GraphRunner

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Provider

B = TypeVar("B", bound=type[Backend])

#: every backend: the modules of this package, then the ``model_harness.backends`` entry points
#: (out-of-tree runtimes: a package declaring ``[project.entry-points."model_harness.backends"]``)
BACKENDS: Registry[type[Backend]] = Registry("backend", lambda cls: cls.name, entry_points="model_harness.backends")
_HELPERS = frozenset({"base", "trt_profile", "prebuilt", "trt_engine", "gpu_memory"})  # modules here that are not backends


def register_backend(cls: B) -> B:
    """Register a backend under ``cls.name``; another backend of the same name is an error."""
    BACKENDS.register(cls)
    return cls


def unregister_backend(name: str) -> None:
    """Forget a backend (tests that register their own)."""
    BACKENDS.unregister(name)


def backends() -> dict[str, type[Backend]]:
    """Every backend module imported and registered: name -> Backend class."""
    for info in pkgutil.iter_modules(__path__):
        if info.name not in _HELPERS:
            importlib.import_module(f"{__name__}.{info.name}")
    return BACKENDS.items()


def providers() -> dict[str, "Provider"]:
    """Every provider users can name, short name -> Provider, as the backends declare them
    (``Backend.providers``). A short name declared twice is a programming error."""
    table: dict[str, Provider] = {}
    for backend in backends().values():
        for provider in backend.providers:
            if provider.short in table:
                raise RuntimeError(f"provider {provider.short!r} declared by two backends")
            if provider.backend != backend.name:
                raise RuntimeError(
                    f"provider {provider.short!r} of backend {backend.name!r} names {provider.backend!r}")
            table[provider.short] = provider
    return table


#: the providers a run covers when none are named (the ``providers`` option's default)
DEFAULT_PROVIDERS = ("torch_cpu", "ort_cpu")

#: the older name of :func:`providers` (it lived in ``harness.core``)
provider_table = providers


def parse_provider(name: str, *, option: str = "--providers") -> "Provider":
    """A provider short name users typed -> its Provider, or one did-you-mean line (exit 2)."""
    key = name.strip().lower()
    table = providers()
    if key not in table:
        raise UsageError(f"{option}: unknown provider {name!r}{did_you_mean(key, table)}; {valid_names(key, table)}")
    return table[key]


if TYPE_CHECKING:  # pragma: no cover
    PROVIDERS: dict[str, Provider]


def __getattr__(name: str) -> object:
    """``PROVIDERS``: the provider table, derived from the backends when read (PEP 562)."""
    if name == "PROVIDERS":
        return providers()
    raise AttributeError(f"module 'harness.runners' has no attribute {name!r}")


__all__ = ["DEFAULT_PROVIDERS", "PROVIDERS", "Backend", "GraphRunner", "backends", "parse_provider", "provider_table",
           "providers", "register_backend", "unregister_backend"]
