"""What a synthetic perf record needs to stand for a real `--perf` run before the gate.

A real run's cold-start measurement times a few steady calls in each of ``--perf-repeats`` fresh
processes (``perf.cold_start_runs[].steady_ms``): the two-runs rule reads the processes' spread
from them (``harness.gate.processes``). A record without them is judged with the assumed spread of
an unmeasured pair of processes, which no longer shows a 25 % change.
"""

from __future__ import annotations

from typing import Any

#: three fresh processes within 0.2 % of each other: the process spread adds next to nothing, so the
#: tests using them judge the other rules (the spread itself: tests/test_gate.py)
LEVELS = (1.0, 1.002, 0.998)


def measured_processes(level: float = 1.0) -> list[dict[str, Any]]:
    """``cold_start_runs`` of three fresh processes whose steady calls sit at ``LEVELS`` x ``level``."""
    return [{"steady_ms": [level * f] * 5} for f in LEVELS]
