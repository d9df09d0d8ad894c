"""Core: the value types and errors every layer may import. Imports nothing else of the
harness at import time (the provider table is read from the backend registry on first use).

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
    parse_provider,
    precision_overrides,
    provider_table,
)
from harness.core.values import Settings

__all__ = ["DEFAULT_PRECISIONS", "DEFAULT_PROVIDERS", "PROVIDERS", "Check", "Precision", "Provider", "RunOptions",
           "Settings", "Tolerance", "UsageError", "Variant", "describe_error", "did_you_mean", "parse_precision",
           "parse_provider", "precision_overrides", "provider_table", "split_csv"]

if TYPE_CHECKING:  # pragma: no cover
    #: the derived attributes' types, for type checkers (the values come from ``__getattr__``)
    PROVIDERS: dict[str, Provider]


def __getattr__(name: str) -> object:
    """``PROVIDERS`` (derived from the backends when read) and other derived names of ``types``."""
    return getattr(_types, name)
