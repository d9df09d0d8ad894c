"""How far an exported model's outputs are from the PyTorch reference: numbers and text."""

from harness.metrics.numeric import (
    NUMERIC_METRICS,
    Location,
    MetricInfo,
    NumericComparison,
    compare_arrays,
)
from harness.metrics.text import (
    TEXT_METRICS,
    TextScores,
    corpus_scores,
    first_divergence,
    repetition_rate,
    sentence_edit,
    token_agreement,
    worst_pairs,
)

__all__ = [
    "NUMERIC_METRICS",
    "TEXT_METRICS",
    "Location",
    "MetricInfo",
    "NumericComparison",
    "TextScores",
    "compare_arrays",
    "corpus_scores",
    "first_divergence",
    "repetition_rate",
    "sentence_edit",
    "token_agreement",
    "worst_pairs",
]
