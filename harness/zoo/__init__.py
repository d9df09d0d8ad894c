"""The built-in model zoo. Importing this package registers every zoo module.

Adding a model = one new module here that calls ``register(ModelSpec(...))``.
"""

from __future__ import annotations

import importlib
import pkgutil

from harness.zoo.base import ModelSpec, materialize, register, registered, resolve

__all__ = ["ModelSpec", "materialize", "register", "registered", "resolve"]

for _info in pkgutil.iter_modules(__path__):
    if _info.name not in ("base", "tokenizer", "numbers") and not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
