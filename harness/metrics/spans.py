"""The answer span an extractive-QA model returns, and how two models' spans agree.

An extractive-QA head emits a start and an end logit per token; what a deployment returns is
the span those logits select, not the logits. transformers' ``QuestionAnsweringPipeline`` picks
the pair ``start <= end`` that maximises ``p_start(start) * p_end(end)`` (softmax over the
tokens) among the *context* tokens -- never the question, a special token or padding -- with at
most ``max_answer_len`` tokens (15 by default). The softmax normalisers are the same for every
pair of a row, so that is the pair with the largest ``start_logit + end_logit``; ties go to the
first pair in (start, end) order, as ``np.argmax`` of the pipeline's score matrix does.

Two logit tensors can be 0.999 cosine-similar and still select different spans where the best
and the second-best pair are close -- which is the case for QA models on hard questions -- so the
span is judged as such (``span_agreement``, ``span_token_f1`` in ``harness.metrics.registry``).
Pure functions over arrays; the family says which tokens are the context
(``harness.families.heads``), the judge gathers the rows (``harness.judge.numeric``).
"""

from __future__ import annotations

import numpy as np

#: the longest answer a span may have, in tokens: transformers' pipeline default (``max_answer_len``)
MAX_ANSWER_TOKENS = 15
#: the span of a row without a single context token (nothing can be extracted)
NO_SPAN = (-1, -1)


def best_spans(start_logits: np.ndarray, end_logits: np.ndarray, context: np.ndarray,
               max_answer_len: int = MAX_ANSWER_TOKENS) -> np.ndarray:
    """(rows, 2) int64: per row the (start, end) token positions of the best span inside
    ``context`` (bool, rows x positions), ``NO_SPAN`` for a row without context tokens.

    Non-finite logits never win (a NaN pair is not a span); a row whose every candidate is
    non-finite gets ``NO_SPAN``, so a broken variant disagrees instead of matching by accident."""
    if max_answer_len < 1:
        raise ValueError(f"max_answer_len must be >= 1, got {max_answer_len}")
    s = np.asarray(start_logits, np.float64)
    e = np.asarray(end_logits, np.float64)
    ctx = np.asarray(context, bool)
    if not (s.shape == e.shape == ctx.shape) or s.ndim != 2:
        raise ValueError(f"start {s.shape}, end {e.shape} and context {ctx.shape} must be one (rows, positions) shape")
    n = s.shape[1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    allowed = (j >= i) & (j - i < max_answer_len)  # start <= end, at most max_answer_len tokens
    score = s[:, :, None] + e[:, None, :]
    valid = allowed[None] & ctx[:, :, None] & ctx[:, None, :] & np.isfinite(score)
    score = np.where(valid, score, -np.inf)
    flat = score.reshape(len(s), -1).argmax(axis=1)
    out = np.stack([flat // n, flat % n], axis=1).astype(np.int64)
    out[~valid.reshape(len(s), -1).any(axis=1)] = NO_SPAN
    return out


def span_f1(ref: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Per row: the token-overlap F1 of two (start, end) spans (SQuAD's F1, over token positions
    rather than normalised words): 1 when equal, 0 when disjoint or either is ``NO_SPAN``."""
    ref, got = np.asarray(ref, np.int64), np.asarray(got, np.int64)
    overlap = np.minimum(ref[:, 1], got[:, 1]) - np.maximum(ref[:, 0], got[:, 0]) + 1
    overlap = np.maximum(overlap, 0).astype(np.float64)
    len_ref = (ref[:, 1] - ref[:, 0] + 1).astype(np.float64)
    len_got = (got[:, 1] - got[:, 0] + 1).astype(np.float64)
    none = (ref[:, 0] < 0) | (got[:, 0] < 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = np.where(overlap > 0, 2 * overlap / (len_ref + len_got), 0.0)
    return np.where(none, 0.0, f1)


def span_metrics(ref: np.ndarray, got: np.ndarray) -> tuple[dict[str, float], int]:
    """``span_agreement`` and ``span_token_f1`` over the rows where the reference has a span
    (a row without context tokens asks nothing), and how many rows that is. No row: NaN, which
    never passes a gate."""
    ref, got = np.asarray(ref, np.int64), np.asarray(got, np.int64)
    asked = ref[:, 0] >= 0
    if not asked.any():
        return {"span_agreement": float("nan"), "span_token_f1": float("nan")}, 0
    r, g = ref[asked], got[asked]
    same = np.all(r == g, axis=1)
    return {"span_agreement": float(same.mean()), "span_token_f1": float(span_f1(r, g).mean())}, int(asked.sum())


def worst_row(ref: np.ndarray, got: np.ndarray) -> int | None:
    """The row whose spans overlap least (the first such row), None when every span agrees."""
    ref, got = np.asarray(ref, np.int64), np.asarray(got, np.int64)
    asked = ref[:, 0] >= 0
    f1 = np.where(asked, span_f1(ref, got), np.inf)
    f1 = np.where(asked & np.all(ref == got, axis=1), np.inf, f1)
    if not np.isfinite(f1).any():
        return None
    return int(np.argmin(f1))
