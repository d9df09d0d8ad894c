"""Text scores against hand-derived BLEU/chrF/TER/edit values, plus properties of the distances."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.metrics.text import (
    TEXT_METRICS,
    corpus_scores,
    first_divergence,
    repetition_rate,
    sentence_edit,
    token_agreement,
    worst_pairs,
)

# --- corpus_scores ------------------------------------------------------------------------


def test_bleu_by_hand() -> None:
    # hyp "the cat sat on the mat" vs ref "the cat sat on a mat", 6 tokens each (BP = 1)
    # 1-grams: the(clipped to 1) cat sat on mat -> 5/6
    # 2-grams: the cat, cat sat, sat on | on the, the mat -> 3/5
    # 3-grams: the cat sat, cat sat on | sat on the, on the mat -> 2/4
    # 4-grams: the cat sat on | cat sat on the, sat on the mat -> 1/3
    # BLEU = 100 * (5/6 * 3/5 * 2/4 * 1/3) ** (1/4) = 100 * (1/12) ** (1/4) = 53.7285
    s = corpus_scores(["the cat sat on the mat"], ["the cat sat on a mat"])
    assert s.metrics["bleu"] == pytest.approx(100 * (1 / 12) ** 0.25)


def test_bleu_brevity_penalty_by_hand() -> None:
    # every n-gram of "the cat sat on" matches; BP = exp(1 - 6/4) = exp(-0.5) -> 60.6531
    s = corpus_scores(["the cat sat on"], ["the cat sat on the mat"])
    assert s.metrics["bleu"] == pytest.approx(100 * math.exp(-0.5))
    assert s.metrics["length_ratio"] == pytest.approx(4 / 6)


def test_chrf_by_hand() -> None:
    # "abc" vs "abd", char orders 1..3 have n-grams (4..6 are skipped, effective order):
    # 1: {a,b,c} vs {a,b,d} -> P = R = 2/3; 2: {ab,bc} vs {ab,bd} -> 1/2; 3: {abc} vs {abd} -> 0
    # mean P = mean R = (2/3 + 1/2 + 0) / 3 = 7/18; F2 of equal P and R is P -> 38.889
    s = corpus_scores(["abc"], ["abd"])
    assert s.metrics["chrf"] == pytest.approx(100 * 7 / 18)


def test_ter_by_hand() -> None:
    # "the cat sat on the mat" vs "the cat sat on a mat": one substitution (the -> a) over 6 reference
    # words -> 16.667; "mat the on sat cat the" needs block shifts, so more edits than one
    s = corpus_scores(["the cat sat on the mat"], ["the cat sat on a mat"])
    assert s.metrics["ter"] == pytest.approx(100 / 6)
    # a deletion of two words of six: 2 edits / 6 reference words
    assert corpus_scores(["the cat sat on"], ["the cat sat on the mat"]).metrics["ter"] == pytest.approx(100 * 2 / 6)
    # one block shift ("on the mat" moved) is one edit, where edit distance would count several
    moved = corpus_scores(["on the mat the cat sat"], ["the cat sat on the mat"]).metrics
    assert moved["ter"] == pytest.approx(100 / 6)
    assert "tok:tercom" in s.signatures["ter"] and "asian:no" in s.signatures["ter"]


def test_ter_counts_chinese_by_character() -> None:
    # unnormalised tercom would see each Chinese sentence as one word: one substitution, TER 100
    s = corpus_scores(["今天天气很好"], ["今天天气不好"], lang="zh")
    assert s.metrics["ter"] == pytest.approx(100 / 6)  # one character of six
    assert "norm:yes" in s.signatures["ter"] and "asian:yes" in s.signatures["ter"]


def test_identical_corpus_scores_perfectly() -> None:
    sents = ["the quick brown fox jumps", "over the lazy dog ."]
    s = corpus_scores(sents, list(sents))
    assert s.metrics == pytest.approx(
        {
            "bleu": 100.0,
            "chrf": 100.0,
            "ter": 0.0,
            "exact_match": 1.0,
            "char_edit_distance": 0.0,
            "norm_edit_distance": 0.0,
            "length_ratio": 1.0,
        }
    )
    bleu_signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2."
    assert s.signatures["bleu"].startswith(bleu_signature)
    assert "nc:6|nw:0" in s.signatures["chrf"]


def test_chinese_uses_zh_tokenizer() -> None:
    same = corpus_scores(["我爱北京天安门"], ["我爱北京天安门"], lang="zh")
    assert same.metrics["bleu"] == pytest.approx(100.0)
    assert "tok:zh" in same.signatures["bleu"]
    # 13a does not split Chinese: the sentence is one token and has no 4-gram; standard BLEU would
    # be 0 for identical output, so the effective order applies (eff:yes) and says so
    as_english = corpus_scores(["我爱北京天安门"], ["我爱北京天安门"], lang="en")
    assert as_english.metrics["bleu"] == pytest.approx(100.0)
    assert "eff:yes|tok:13a" in as_english.signatures["bleu"]
    # zh splits per character: 4 of 7 characters, all n-grams match, BP = exp(1 - 7/4)
    short = corpus_scores(["我爱北京"], ["我爱北京天安门"], lang="zh-CN")
    assert short.metrics["bleu"] == pytest.approx(100 * math.exp(-0.75))
    assert short.metrics["length_ratio"] == pytest.approx(4 / 7)  # characters, not tokens


def test_exact_match_and_edit_distances() -> None:
    s = corpus_scores(["kitten", "abc ", "x y"], ["sitting", "abc", "x z"])
    assert s.metrics["exact_match"] == pytest.approx(1 / 3)  # only "abc " == "abc" after strip
    # distances: kitten/sitting 3, "abc "/"abc" 1, "x y"/"x z" 1 -> mean 5/3
    assert s.metrics["char_edit_distance"] == pytest.approx(5 / 3)
    # normalised: 3/7, 1/4, 1/3 -> mean (3/7 + 1/4 + 1/3) / 3
    assert s.metrics["norm_edit_distance"] == pytest.approx((3 / 7 + 1 / 4 + 1 / 3) / 3)
    # whitespace tokens: 1 + 1 + 2 = 4 vs 1 + 1 + 2 = 4
    assert s.metrics["length_ratio"] == 1.0


def test_length_ratio_counts_tokens() -> None:
    s = corpus_scores(["a b c", "d"], ["a b", "c d e f"])
    assert s.metrics["length_ratio"] == pytest.approx(4 / 6)


def test_corpus_errors() -> None:
    with pytest.raises(ValueError, match="2 vs 1"):
        corpus_scores(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="empty"):
        corpus_scores([], [])


# --- sentence-level and token-level helpers -----------------------------------------------


def test_sentence_edit_by_hand() -> None:
    # kitten -> sitten (k/s) -> sittin (e/i) -> sitting (+g): 3 edits, longer length 7
    assert sentence_edit("kitten", "sitting") == (3, pytest.approx(3 / 7))
    assert sentence_edit("", "") == (0, 0.0)
    assert sentence_edit("abc", "") == (3, 1.0)


def test_first_divergence() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 9, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2  # length difference diverges at the end
    assert first_divergence([4], [5]) == 0
    assert first_divergence([], []) is None
    assert first_divergence([], [7]) == 0
    assert first_divergence(np.array([5, 6, 7]), np.array([5, 6, 8])) == 2


def test_repetition_rate_by_hand() -> None:
    # trigrams: abc, bca, cab, abc -> only the last repeats: 1 / 4
    assert repetition_rate("a b c a b c".split(), n=3) == 0.25
    # unigrams: a b c a b c -> the second a, b, c repeat: 3 / 6
    assert repetition_rate("a b c a b c".split(), n=1) == 0.5
    # bigrams of x x x x x: (x x) four times, three repeats
    assert repetition_rate(["x"] * 5, n=2) == 0.75
    # a str is scored per character: ab, ba, ab -> 1 / 3
    assert repetition_rate("abab", n=2) == pytest.approx(1 / 3)
    assert repetition_rate([1, 2], n=3) == 0.0
    assert repetition_rate([1, 2, 3], n=3) == 0.0
    with pytest.raises(ValueError):
        repetition_rate([1, 2, 3], n=0)


def test_token_agreement_by_hand() -> None:
    got = token_agreement([[1, 2, 3], [1, 2, 3, 4]], [[1, 2, 3], [1, 9, 3]])
    assert got["exact_sequence_match"] == 0.5
    assert got["mean_first_divergence"] == 2.0  # (3 (equal: length) + 1) / 2
    # positions: 3 of 3, then 1 and 3 match of max(4, 3) = 4 -> 5 / 7
    assert got["position_match"] == pytest.approx(5 / 7)
    assert token_agreement([[]], [[]])["position_match"] == 1.0
    with pytest.raises(ValueError):
        token_agreement([[1]], [])


def test_worst_pairs_orders_and_skips_identical() -> None:
    sources = ["s0", "s1", "s2", "s3"]
    refs = ["r0", "r1", "r2", "r3"]
    pytorch = ["abcd", "abcd", "same", "ab"]
    variant = ["abcx", "axyd", "same", "xy"]  # norm distances 1/4, 2/4, 0, 2/2
    rows = worst_pairs(sources, refs, pytorch, variant, n=5)
    assert [r["index"] for r in rows] == [3, 1, 0]  # identical row 2 left out
    assert rows[0] == {
        "index": 3,
        "source": "s3",
        "reference": "r3",
        "pytorch": "ab",
        "variant": "xy",
        "edit_distance": 2,
        "norm_edit_distance": 1.0,
    }
    assert [r["index"] for r in worst_pairs(sources, refs, pytorch, variant, n=2)] == [3, 1]
    with pytest.raises(ValueError):
        worst_pairs(sources, refs, pytorch, variant[:3])


def test_registry_directions() -> None:
    for name in ["bleu", "chrf", "exact_match"]:
        assert TEXT_METRICS[name].higher_is_better
    for name in ["ter", "char_edit_distance", "norm_edit_distance", "repetition_rate"]:
        assert not TEXT_METRICS[name].higher_is_better
    assert TEXT_METRICS["length_ratio"].target == 1.0
    keys = set(corpus_scores(["a"], ["a"]).metrics) | set(token_agreement([[1]], [[1]]))
    assert keys <= set(TEXT_METRICS)


# --- properties ----------------------------------------------------------------------------

_text = st.text(alphabet="abc ", max_size=8)
_word = st.text(alphabet="abcdefgh", min_size=1, max_size=6)
_sentence = st.lists(_word, min_size=1, max_size=8).map(" ".join)


@settings(max_examples=100, deadline=None)
@given(a=_text, b=_text, c=_text)
def test_edit_distance_is_a_metric(a: str, b: str, c: str) -> None:
    ab, ba = sentence_edit(a, b), sentence_edit(b, a)
    assert ab == ba
    assert (ab[0] == 0) == (a == b)
    assert 0.0 <= ab[1] <= 1.0
    assert ab[0] <= sentence_edit(a, c)[0] + sentence_edit(c, b)[0]


@settings(max_examples=30, deadline=None)
@given(
    long=st.lists(_word, min_size=4, max_size=8).map(" ".join),
    rest=st.lists(_sentence, max_size=4),
)
def test_identical_corpus_bleu_is_100(long: str, rest: list[str]) -> None:
    # at least one sentence has 4 words, so every n-gram order has something to match
    corpus = [long, *rest]
    assert corpus_scores(corpus, list(corpus)).metrics["bleu"] == pytest.approx(100.0)


@settings(max_examples=30, deadline=None)
@given(pairs=st.lists(st.tuples(_sentence, _sentence), min_size=1, max_size=5))
def test_rates_stay_in_unit_interval(pairs: list[tuple[str, str]]) -> None:
    hyps, refs = [h for h, _ in pairs], [r for _, r in pairs]
    m = corpus_scores(hyps, refs).metrics
    assert 0.0 <= m["exact_match"] <= 1.0
    assert 0.0 <= m["norm_edit_distance"] <= 1.0
    assert 0.0 <= m["bleu"] <= 100.0 + 1e-9
    assert 0.0 <= repetition_rate(" ".join(hyps).split(), n=2) <= 1.0


# --- language from the data (issue 9) ----------------------------------------------------


def test_identical_short_outputs_never_score_bleu_zero() -> None:
    """Numerals and one-word answers have no 4-grams: standard corpus BLEU is 0 for output
    identical to the reference, so a 'may lose at most 2 BLEU' gate could never fire."""
    short = ["七", "三百", "十一"]
    s = corpus_scores(short, list(short), lang="zh")
    assert s.metrics["bleu"] == pytest.approx(100.0) and "eff:yes" in s.signatures["bleu"]
    # the fallback does not hide a real difference: a wrong answer still costs BLEU
    wrong = corpus_scores(["七", "三百", "十二"], short, lang="zh")
    assert 0 < wrong.metrics["bleu"] < 100
    # sentences long enough for 4-grams keep standard BLEU (eff:no), as before
    assert "eff:no" in corpus_scores(["the cat sat on the mat"], ["the cat sat on a mat"]).signatures["bleu"]


@pytest.mark.parametrize(("texts", "lang", "tokenizer"), [
    (["三百二十一", "一千零一"], "zh", "zh"),
    (["こんにちは世界、元気ですか"], "ja", None),
    (["안녕하세요 세계"], "ko", None),
    (["the quick brown fox", "Grüße aus Köln"], None, "13a"),
])
def test_language_detected_from_the_script(texts, lang, tokenizer) -> None:
    from harness.metrics.text import bleu_tokenizer, detect_lang

    assert detect_lang(texts) == lang
    if tokenizer is not None:
        assert bleu_tokenizer(lang) == tokenizer


def test_japanese_and_korean_use_mecab_when_installed_else_characters() -> None:
    """sacrebleu's ja-mecab / ko-mecab need MeCab packages that are not dependencies; without
    them the text is scored per character (tok:char), never as one token per sentence."""
    import importlib.util

    from harness.metrics.text import bleu_tokenizer

    has_ja = all(importlib.util.find_spec(m) for m in ("MeCab", "ipadic"))
    assert bleu_tokenizer("ja") == ("ja-mecab" if has_ja else "char")
    s = corpus_scores(["こんにちは世界"], ["こんにちは世界"], lang="ja")
    assert s.metrics["bleu"] == pytest.approx(100.0)
    assert f"tok:{bleu_tokenizer('ja')}" in s.signatures["bleu"]


def test_target_language_precedence() -> None:
    from harness.metrics.text import target_language

    assert target_language("ja", "zh", ["hello"], ["x"]) == ("ja", "run option target_lang")
    assert target_language(None, "zh", ["hello"], ["x"]) == ("zh", "model's target_lang")
    assert target_language(None, None, ["三百"], ["hello"]) == ("zh", "detected from the references")
    assert target_language(None, None, None, ["三百"]) == ("zh", "detected from the PyTorch outputs")
    assert target_language(None, None, None, ["three hundred"])[0] is None
