"""Backends, one module each, registered by ``@register_backend``.

Adding a backend = one new module here with a ``Backend`` subclass decorated by
``@register_backend``; variants name it through ``Provider.backend``.

The modules are imported on first use of :func:`backends`, not with the package: a
fresh-process measurement that only needs ``OrtGraphRunner`` must not pay for torch
(the PyTorch backend's module), which would distort cold start and peak memory.
"""

from __future__ import annotations

import importlib
import pkgutil

from harness.runners.base import Backend, GraphRunner

_REGISTRY: dict[str, type[Backend]] = {}
_HELPERS = frozenset({"base", "trt_profile"})  # modules here that are not backends


def register_backend(cls: type[Backend]) -> type[Backend]:
    _REGISTRY[cls.name] = cls
    return cls


def backends() -> dict[str, type[Backend]]:
    """Every backend module imported and registered: name -> Backend class."""
    for info in pkgutil.iter_modules(__path__):
        if info.name not in _HELPERS:
            importlib.import_module(f"{__name__}.{info.name}")
    return dict(_REGISTRY)


__all__ = ["Backend", "GraphRunner", "backends", "register_backend"]
