"""Core: the value types and errors every layer may import. Imports nothing else of the
harness at import time (the deprecated ``HIGHER_IS_BETTER`` is read from the metric registry on
first use; the provider table is ``harness.runners.PROVIDERS``, declared by the backends).

``types``: Precision, Provider, Variant, Check, Tolerance, RunOptions and their parsers.
``values``: Settings, every run option's typed value (generated from the option table).
``errors``: UsageError (one line, exit 2) and the helpers that word such lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.core import types as _types
from harness.core.errors import UsageError, describe_error, did_you_mean, split_csv
from harness.core.types import (
    DEFAULT_PRECISIONS,
    DEFAULT_PROVIDERS,
    Check,
    Precision,
    Provider,
    RunOptions,
    Tolerance,
    Variant,
    parse_precision,
    precision_overrides,
)
from harness.core.values import Settings

__all__ = ["DEFAULT_PRECISIONS", "DEFAULT_PROVIDERS", "Check", "Precision", "Provider", "RunOptions",
           "Settings", "Tolerance", "UsageError", "Variant", "describe_error", "did_you_mean", "parse_precision",
           "precision_overrides", "split_csv"]

if TYPE_CHECKING:  # pragma: no cover
    #: the derived attribute's type, for type checkers (the value comes from ``__getattr__``)
    HIGHER_IS_BETTER: frozenset[str]


def __getattr__(name: str) -> object:
    """Derived names of ``types`` (the deprecated ``HIGHER_IS_BETTER``)."""
    return getattr(_types, name)
