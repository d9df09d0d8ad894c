"""How far an exported model's outputs are from the PyTorch reference: numbers and text.

``harness.metrics.registry`` declares every metric; ``numeric`` and ``text`` compute them. The
names below are loaded on first use (PEP 562), so importing the registry (the config validator,
the CLI parsers) does not pay for numpy, sacrebleu and rapidfuzz.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "NUMERIC_METRICS": "numeric", "Location": "numeric", "NumericComparison": "numeric", "compare_arrays": "numeric",
    "TEXT_METRICS": "text", "TextScores": "text", "corpus_scores": "text", "first_divergence": "text",
    "repetition_rate": "text", "sentence_edit": "text", "token_agreement": "text", "worst_pairs": "text",
}

__all__ = [
    "NUMERIC_METRICS", "TEXT_METRICS", "Location", "NumericComparison", "TextScores", "compare_arrays",
    "corpus_scores", "first_divergence", "repetition_rate", "sentence_edit", "token_agreement", "worst_pairs",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'harness.metrics' has no attribute {name!r}")
    return getattr(importlib.import_module(f"harness.metrics.{module}"), name)
