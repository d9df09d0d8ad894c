"""Inputs of a chosen shape (batch x sequence length) made of real corpus tokens.

Latency depends on shape far more than on content, so a perf metric is named by its
shape (``latency_ms[bs=8,seq=64]``) and fed exactly that shape, every row full of real
subword ids (no padding: padded positions would make "seq=64" mean less work).
Only graphs fed by token ids alone take a chosen shape: encoders, a seq2seq model's
encoder, and a decoder-only model's prefill (empty past). Graphs fed by other graphs'
outputs (decoder steps) use the family's own feeds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from harness.families.limits import learned_positions

if TYPE_CHECKING:  # pragma: no cover
    from harness.families import Family, GraphSpec
    from harness.zoo.loading import LoadedModel

_TOKEN_INPUTS = {"input_ids", "attention_mask", "position_ids"}


def max_positions(model: "LoadedModel") -> int | None:
    """The longest sequence the model's position table holds (None: unknown)."""
    return learned_positions(model.config)


def shapeable(graph: "GraphSpec") -> bool:
    """True when a graph is fed by token ids alone (plus an empty past for prefill)."""
    rest = [n for n in graph.input_names if n not in _TOKEN_INPUTS]
    return "input_ids" in graph.input_names and all(n.startswith("past_key_values.") for n in rest)


def _long_text(texts: Sequence[str], start: int, min_chars: int) -> str:
    out: list[str] = []
    i, size = start, 0
    while size < min_chars:
        text = texts[i % len(texts)]
        out.append(text)
        size += len(text) + 1
        i += 1
    return " ".join(out)


def shaped_feeds(model: "LoadedModel", family: "Family", graph: "GraphSpec", texts: Sequence[str],
                 batch_size: int, seq_len: int) -> dict[str, np.ndarray]:
    """Feeds of exactly ``batch_size`` x ``seq_len`` real tokens for a :func:`shapeable` graph.

    Row ``i`` is the corpus read from sentence ``i`` on, truncated to ``seq_len`` tokens
    (special tokens included), so rows differ but all are full.
    """
    if not shapeable(graph):
        raise ValueError(f"{graph.name}: fed by other graphs' outputs, not by token ids; no chosen shape")
    if not texts:
        raise ValueError("no corpus texts to build feeds from")
    limit = max_positions(model)
    if limit is not None and seq_len > limit:
        raise ValueError(f"seq={seq_len} exceeds the model's {limit} positions")
    tokenizer = model.tokenizer
    min_chars = 8 * seq_len
    while True:
        rows = [_long_text(texts, i, min_chars) for i in range(batch_size)]
        enc = tokenizer(rows, truncation=True, max_length=seq_len, padding="max_length", return_tensors="np")
        mask = np.asarray(enc["attention_mask"], dtype=np.int64)
        if mask.shape[1] == seq_len and mask.all():
            break
        min_chars *= 2  # a tokenizer packing more characters per token: read further
    feeds: dict[str, np.ndarray] = {"input_ids": np.asarray(enc["input_ids"], dtype=np.int64), "attention_mask": mask}
    if "position_ids" in graph.input_names:
        feeds["position_ids"] = np.broadcast_to(np.arange(seq_len, dtype=np.int64), (batch_size, seq_len)).copy()
    past = [n for n in graph.input_names if n.startswith("past_key_values.")]
    if past:
        empty = family.empty_past(model, batch_size)  # type: ignore[attr-defined]
        feeds.update({n: empty[n] for n in past})
    return {n: feeds[n] for n in graph.input_names}


def family_feeds(model: "LoadedModel", family: "Family", graph: "GraphSpec", texts: Sequence[str],
                 batch_size: int) -> dict[str, np.ndarray]:
    """The family's own feeds for the first ``batch_size`` corpus sentences (decoder steps)."""
    return family.feeds(model, graph, list(texts[:batch_size]))
