"""Performance statistics: summaries of latency samples and noise-aware comparisons."""

from harness.perf.stats import (
    DEFAULT_BLOCKS,
    PERCENTILES,
    LatencySummary,
    block_cv,
    block_medians,
    bootstrap_ratio_ci,
    bootstrap_ratio_cis,
    mann_whitney,
    min_samples_for,
    summarize,
)

__all__ = [
    "DEFAULT_BLOCKS",
    "PERCENTILES",
    "LatencySummary",
    "block_cv",
    "block_medians",
    "bootstrap_ratio_ci",
    "bootstrap_ratio_cis",
    "mann_whitney",
    "min_samples_for",
    "summarize",
]
