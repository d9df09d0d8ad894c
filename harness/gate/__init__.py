"""The performance gate: named baselines and the noise-aware comparison against them.

Names are imported from their modules on first use (PEP 562): ``harness.gate.compare`` needs
scipy, and every ``harness`` command that only reads a baseline's location must not pay for it.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    **dict.fromkeys(("DEFAULT_STORE", "Baseline", "BaselineError", "BaselineInfo", "list_baselines", "load_baseline",
                     "load_run", "save_baseline"), "harness.gate.baseline"),
    "read_results": "harness.results.rundir",  # the one run-directory reader, in the results layer
    **dict.fromkeys(("DEFAULT_POLICIES", "Comparison", "EnvironmentMismatch", "MetricPolicy", "Row", "Verdict",
                     "compare_runs"), "harness.gate.compare"),
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
