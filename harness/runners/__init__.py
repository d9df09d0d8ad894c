"""Backends, one module each. Importing this package registers every module in it.

Adding a backend = one new module here with a ``Backend`` subclass decorated by
``@register_backend``; variants name it through ``Provider.backend``.
"""

from __future__ import annotations

import importlib
import pkgutil

from harness.runners.base import Backend, GraphRunner

BACKENDS: dict[str, type[Backend]] = {}


def register_backend(cls: type[Backend]) -> type[Backend]:
    BACKENDS[cls.name] = cls
    return cls


for _info in pkgutil.iter_modules(__path__):
    if _info.name != "base":
        importlib.import_module(f"{__name__}.{_info.name}")

__all__ = ["BACKENDS", "Backend", "GraphRunner", "register_backend"]
