"""Sentence-embedding parity: the pooled, normalised vector a search index stores.

INT8 can move token states a lot and the sentence vector little, or the reverse for a
pooling bug, so encoders with a sentence-transformers pooling recipe are also judged on the
vector. One computation serves the embedding suite (``suites/test_embedding_parity.py``)
and ``harness check`` (a foreign encoder file emitting token states): both hand it the
batches they compared on and the variant's outputs for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.core import Precision
from harness.families.pooling import Pooling, pool
from harness.judge.numeric import OutputResult
from harness.zoo.minilm import embedding_metrics, embedding_tolerance

OUTPUT = "sentence_embedding"


@dataclass
class EmbeddingResult:
    """The judged vector as one more gated output of the graph, plus per-sentence cosines
    (so a failure names the sentence that moved most)."""

    output: OutputResult
    cosines: np.ndarray
    pooling: Pooling

    @property
    def worst_row(self) -> int:
        return int(np.argmin(self.cosines))

    def describe_worst(self, texts: Sequence[str]) -> str:
        row = self.worst_row
        return f"sentence {row} (cosine {self.cosines[row]:.6f}): {texts[row][:80]!r}"


def embedding_parity(graph: str, pooling: Pooling,
                     batches: Sequence[tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray], object]],
                     outputs: Sequence[Mapping[str, np.ndarray]], precision: Precision,
                     overrides: Mapping[str, Mapping[str, float]] | None = None,
                     hidden: str = "last_hidden_state") -> EmbeddingResult:
    """Pool the reference's and the variant's token states of each batch (``batches`` are
    (feeds, reference outputs, masks), ``outputs`` the variant's outputs for them) and judge
    the sentence vectors at ``precision`` with the model's overrides."""
    if len(outputs) != len(batches):
        raise ValueError(f"{len(outputs)} variant outputs for {len(batches)} batches")
    ref = np.concatenate([pool(r[hidden], f["attention_mask"], pooling) for f, r, _ in batches])
    got = np.concatenate([pool(g[hidden], f["attention_mask"], pooling) for (f, _, _), g in zip(batches, outputs)])
    metrics = embedding_metrics(ref, got)
    norms = np.linalg.norm(ref, axis=-1) * np.linalg.norm(got, axis=-1)
    cosines = (ref * got).sum(-1) / norms
    result = OutputResult(graph, OUTPUT, metrics, None, ("batch", "index"),
                          embedding_tolerance(precision.value, overrides), int(ref.shape[0]))
    embedded = EmbeddingResult(result, cosines, pooling)
    result.where = f"sentence {embedded.worst_row}"
    return embedded
