"""Deprecated import path: the core types live in ``harness.core`` (``harness.core.types``,
``harness.core.errors``). Kept so suites and scripts written against harness 0.1
(``from harness.config import Precision, Variant``) keep working."""

from __future__ import annotations

from harness.core import *  # noqa: F403
from harness.core import __all__ as __all__  # noqa: PLE0605

#: names harness 0.1 read here that now live with the backends that declare them
_RUNNERS = frozenset({"PROVIDERS", "parse_provider", "provider_table"})


def __getattr__(name: str) -> object:
    import harness.core
    import harness.runners

    return getattr(harness.runners if name in _RUNNERS else harness.core, name)
