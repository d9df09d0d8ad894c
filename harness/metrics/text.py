"""Scores for generated text: the exported model against PyTorch and against references.

BLEU and chrF come from sacrebleu and edit distances from rapidfuzz, so numbers match
what others report and carry a sacrebleu signature that says how they were computed.
Token-level helpers (``first_divergence``, ``token_agreement``) explain *where* greedy
decoding of a variant left the PyTorch path, which a corpus score alone cannot.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Hashable, Sequence

from rapidfuzz.distance import Levenshtein
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.chrf import CHRF

from harness.metrics.registry import METRICS, MetricSpec, Scope


@dataclass(frozen=True)
class TextScores:
    """Corpus metrics plus the sacrebleu signatures needed to reproduce them."""

    metrics: dict[str, float]
    signatures: dict[str, str]


#: name -> declaration of every text metric (declared in ``harness.metrics.registry``)
TEXT_METRICS: dict[str, MetricSpec] = METRICS.as_dict(Scope.TEXT)


def _is_zh(lang: str) -> bool:
    """``zh``, ``zh-CN``, ``zh_Hans`` all mean Chinese."""
    return lang.replace("_", "-").split("-")[0].lower() == "zh"


def _check_pairs(a: Sequence[object], b: Sequence[object], what: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"{what}: {len(a)} vs {len(b)} items; they must pair up")
    if len(a) == 0:
        raise ValueError(f"{what}: empty corpus; nothing to score")


def _length(text: str, zh: bool) -> int:
    """Chinese has no spaces between words, so count its non-space characters instead."""
    return sum(not c.isspace() for c in text) if zh else len(text.split())


def corpus_scores(hyps: Sequence[str], refs: Sequence[str], *, lang: str = "en") -> TextScores:
    """Score hypotheses against one reference each (memoised per process: every variant of a
    model scores PyTorch's decode against the corpus references, and equal decodes are common).

    BLEU tokenizes with ``zh`` for Chinese (``zh``, ``zh-CN``...), else ``13a``; the
    default 13a keeps a Chinese sentence as one token and scores it 0. Corpus BLEU is
    standard (no effective order), so a corpus without any 4-gram scores 0 even when
    identical: score real sentences, not fragments.
    """
    _check_pairs(hyps, refs, "hyps/refs")
    scores = _corpus_scores(tuple(hyps), tuple(refs), lang)
    return TextScores(dict(scores.metrics), dict(scores.signatures))


@lru_cache(maxsize=256)
def _corpus_scores(hyps: tuple[str, ...], refs: tuple[str, ...], lang: str) -> TextScores:
    zh = _is_zh(lang)
    bleu, chrf = BLEU(tokenize="zh" if zh else "13a"), CHRF()
    edits = [sentence_edit(h, r) for h, r in zip(hyps, refs)]
    hyp_len = sum(_length(h, zh) for h in hyps)
    ref_len = sum(_length(r, zh) for r in refs)
    n = len(hyps)
    metrics = {
        "bleu": float(bleu.corpus_score(hyps, [refs]).score),
        "chrf": float(chrf.corpus_score(hyps, [refs]).score),
        "exact_match": sum(h.strip() == r.strip() for h, r in zip(hyps, refs)) / n,
        "char_edit_distance": sum(d for d, _ in edits) / n,
        "norm_edit_distance": sum(nd for _, nd in edits) / n,
        "length_ratio": hyp_len / ref_len if ref_len else (1.0 if hyp_len == 0 else float("inf")),
    }
    signatures = {"bleu": str(bleu.get_signature()), "chrf": str(chrf.get_signature())}
    return TextScores(metrics, signatures)


def sentence_edit(hyp: str, ref: str) -> tuple[int, float]:
    """Character Levenshtein distance: absolute, and over the longer length (0 if both empty)."""
    return int(Levenshtein.distance(hyp, ref)), float(Levenshtein.normalized_distance(hyp, ref))


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first differing token; a length difference diverges at the shorter length."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def repetition_rate(tokens: Sequence[Hashable], n: int = 3) -> float:
    """Fraction of the sequence's n-grams that already occurred earlier in it.

    Catches the looping that broken low-precision decoders fall into. A ``str`` is
    scored per character (useful for Chinese); pass ``text.split()`` for words.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    items = list(tokens)
    total = len(items) - n + 1
    if total <= 0:
        return 0.0
    seen: set[tuple[Hashable, ...]] = set()
    repeats = 0
    for i in range(total):
        gram = tuple(items[i : i + n])
        repeats += gram in seen
        seen.add(gram)
    return repeats / total


def token_agreement(
    a_seqs: Sequence[Sequence[int]], b_seqs: Sequence[Sequence[int]]
) -> dict[str, float]:
    """How closely token sequences ``b`` (variant) follow ``a`` (PyTorch), position by position."""
    _check_pairs(a_seqs, b_seqs, "token sequences")
    exact = divergence = matched = positions = 0
    for a, b in zip(a_seqs, b_seqs):
        a, b = list(a), list(b)
        first = first_divergence(a, b)
        exact += first is None
        divergence += len(a) if first is None else first
        matched += sum(x == y for x, y in zip(a, b))
        positions += max(len(a), len(b))
    n = len(a_seqs)
    return {
        "exact_sequence_match": exact / n,
        "mean_first_divergence": divergence / n,
        "position_match": matched / positions if positions else 1.0,
    }


def worst_pairs(
    sources: Sequence[str],
    refs: Sequence[str],
    hyps_ref_model: Sequence[str],
    hyps_variant: Sequence[str],
    n: int = 5,
) -> list[dict[str, Any]]:
    """The ``n`` sentences where the variant departs most from PyTorch, for the report.

    Ordered by normalised then absolute edit distance (largest first), ties by corpus
    order. Sentences the variant reproduces exactly are left out: they explain nothing.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    _check_pairs(sources, refs, "sources/refs")
    _check_pairs(sources, hyps_ref_model, "sources/pytorch hyps")
    _check_pairs(sources, hyps_variant, "sources/variant hyps")
    rows: list[dict[str, Any]] = []
    for i, (src, ref, pt, var) in enumerate(zip(sources, refs, hyps_ref_model, hyps_variant)):
        dist, norm = sentence_edit(var, pt)
        if dist:
            rows.append(
                {
                    "index": i,
                    "source": src,
                    "reference": ref,
                    "pytorch": pt,
                    "variant": var,
                    "edit_distance": dist,
                    "norm_edit_distance": norm,
                }
            )
    rows.sort(key=lambda row: (-row["norm_edit_distance"], -row["edit_distance"], row["index"]))
    return rows[:n]
