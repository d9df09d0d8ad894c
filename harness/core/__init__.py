"""Core: the value types and errors every layer may import. Imports nothing else of the
harness at import time (the provider table is ``harness.runners.PROVIDERS``, declared by the backends).

``types``: Precision, Provider, Variant, Check, Tolerance, RunOptions and their parsers.
``values``: Settings, every run option's typed value (generated from the option table).
``errors``: UsageError (one line, exit 2) and the helpers that word such lines.
"""

from __future__ import annotations

from harness.core.errors import UsageError, describe_error, did_you_mean, split_csv, valid_names
from harness.core.types import (
    DEFAULT_PRECISIONS,
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

__all__ = ["DEFAULT_PRECISIONS", "Check", "Precision", "Provider", "RunOptions",
           "Settings", "Tolerance", "UsageError", "Variant", "describe_error", "did_you_mean", "parse_precision",
           "precision_overrides", "split_csv", "valid_names"]
