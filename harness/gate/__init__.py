"""The performance gate: named baselines and the noise-aware comparison against them."""

from harness.gate.baseline import (
    DEFAULT_STORE,
    Baseline,
    BaselineError,
    BaselineInfo,
    list_baselines,
    load_baseline,
    load_run,
    read_results,
    save_baseline,
)
from harness.gate.compare import (
    DEFAULT_POLICIES,
    Comparison,
    EnvironmentMismatch,
    MetricPolicy,
    Row,
    Verdict,
    compare_runs,
)

__all__ = [
    "DEFAULT_POLICIES",
    "DEFAULT_STORE",
    "Baseline",
    "BaselineError",
    "BaselineInfo",
    "Comparison",
    "EnvironmentMismatch",
    "MetricPolicy",
    "Row",
    "Verdict",
    "compare_runs",
    "list_baselines",
    "load_baseline",
    "load_run",
    "read_results",
    "save_baseline",
]
