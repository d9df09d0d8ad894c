"""Deprecated import path: the core types live in ``harness.core`` (``harness.core.types``,
``harness.core.errors``). Kept so suites and scripts written against harness 0.1
(``from harness.config import Precision, Variant``) keep working.

``HIGHER_IS_BETTER`` (0.1's set of numeric metrics where higher is better) is derived here, at
the top layer, from the metric registry: ``harness.core`` sits below the registry and must not
read it (tests/test_import_layers.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.core import *  # noqa: F403
from harness.core import __all__ as __all__  # noqa: PLE0605

#: names harness 0.1 read here that now live with the backends that declare them
_RUNNERS = frozenset({"DEFAULT_PROVIDERS", "PROVIDERS", "parse_provider", "provider_table"})

if TYPE_CHECKING:  # pragma: no cover
    HIGHER_IS_BETTER: frozenset[str]


def __getattr__(name: str) -> object:
    if name == "HIGHER_IS_BETTER":
        import warnings

        from harness.metrics.registry import METRICS, Scope

        warnings.warn("harness.config.HIGHER_IS_BETTER is deprecated: read MetricSpec.direction from "
                      "harness.metrics.registry", DeprecationWarning, stacklevel=2)
        return frozenset(s.name for s in METRICS.of(Scope.NUMERIC) if s.higher_is_better)
    import harness.core
    import harness.runners

    return getattr(harness.runners if name in _RUNNERS else harness.core, name)
