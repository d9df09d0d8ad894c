"""The number renderers are the ground truth of the numbers-en-zh model, so they are
checked against hand-verified examples and structural properties."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.zoo.numbers import MAX_NUMBER, ZH_CHARS, sample_number, to_chinese, to_english

ENGLISH = {
    0: "zero",
    7: "seven",
    13: "thirteen",
    20: "twenty",
    21: "twenty-one",
    75: "seventy-five",
    99: "ninety-nine",
    100: "one hundred",
    101: "one hundred and one",
    110: "one hundred and ten",
    999: "nine hundred and ninety-nine",
    1000: "one thousand",
    1001: "one thousand and one",
    1011: "one thousand and eleven",
    1100: "one thousand one hundred",
    1234: "one thousand two hundred and thirty-four",
    10010: "ten thousand and ten",
    101000: "one hundred and one thousand",
    675011: "six hundred and seventy-five thousand and eleven",
    1000000: "one million",
    1000001: "one million and one",
    1200000: "one million two hundred thousand",
    2000100: "two million one hundred",
    123456789: "one hundred and twenty-three million four hundred and fifty-six thousand seven hundred and eighty-nine",
    1000000000: "one billion",
    1000000011: "one billion and eleven",
    40000300000: "forty billion three hundred thousand",
    999999999999: "nine hundred and ninety-nine billion nine hundred and ninety-nine million "
    "nine hundred and ninety-nine thousand nine hundred and ninety-nine",
}

CHINESE = {
    0: "零",
    1: "一",
    10: "十",
    11: "十一",
    19: "十九",
    20: "二十",
    100: "一百",
    101: "一百零一",
    110: "一百一十",
    115: "一百一十五",
    1000: "一千",
    1001: "一千零一",
    1010: "一千零一十",
    1100: "一千一百",
    2002: "二千零二",
    10000: "一万",
    10010: "一万零一十",
    10100: "一万零一百",
    100000: "十万",
    100010: "十万零一十",
    101000: "十万一千",
    150000: "十五万",
    675011: "六十七万五千零一十一",
    1000001: "一百万零一",
    1200000: "一百二十万",
    10001000: "一千万一千",
    10010000: "一千零一万",
    100000000: "一亿",
    100001000: "一亿零一千",
    100010000: "一亿零一万",
    110000000: "一亿一千万",
    1000000011: "十亿零一十一",
    1000100000: "十亿零一十万",
    123456789: "一亿二千三百四十五万六千七百八十九",
    100000000000: "一千亿",
    999999999999: "九千九百九十九亿九千九百九十九万九千九百九十九",
}

ENGLISH_WORD = re.compile(
    r"^(zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    r"fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
    r"eighty|ninety|hundred|thousand|million|billion|and)$"
)
numbers = st.integers(min_value=0, max_value=MAX_NUMBER - 1)


@pytest.mark.parametrize(("n", "words"), sorted(ENGLISH.items()))
def test_english_examples(n: int, words: str) -> None:
    assert to_english(n) == words


@pytest.mark.parametrize(("n", "numeral"), sorted(CHINESE.items()))
def test_chinese_examples(n: int, numeral: str) -> None:
    assert to_chinese(n) == numeral


@pytest.mark.parametrize("bad", [-1, MAX_NUMBER, 10**15])
def test_out_of_range_raises(bad: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        to_english(bad)
    with pytest.raises(ValueError, match="outside"):
        to_chinese(bad)


@pytest.mark.parametrize("bad", [1.0, "5", True])
def test_non_int_raises(bad: object) -> None:
    with pytest.raises(TypeError):
        to_english(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        to_chinese(bad)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(numbers)
def test_english_structure(n: int) -> None:
    text = to_english(n)
    assert text == text.strip() and "  " not in text
    for token in text.replace("-", " ").split():
        assert ENGLISH_WORD.match(token), token
    words = text.split()
    assert words[0] != "and" and words[-1] != "and"
    assert all(a != b for a, b in zip(words, words[1:]))  # no doubled word
    assert ("zero" in text) == (n == 0)


@settings(max_examples=300, deadline=None)
@given(numbers)
def test_chinese_structure(n: int) -> None:
    text = to_chinese(n)
    assert text and set(text) <= ZH_CHARS
    assert "零零" not in text
    assert n == 0 or not (text.startswith("零") or text.endswith("零"))
    assert not text.startswith("一十")
    # Each unit appears at most once per 万-group; 亿 and 万 at most once overall.
    assert text.count("亿") <= 1 and text.count("万") <= 1


@settings(max_examples=300, deadline=None)
@given(numbers)
def test_chinese_digit_sum_matches(n: int) -> None:
    """The non-zero digits, in order, survive the rendering (units aside)."""
    digits = "".join(d for d in str(n) if d != "0")
    rendered = "".join(str("零一二三四五六七八九".index(c)) for c in to_chinese(n) if c in "一二三四五六七八九")
    if to_chinese(n).startswith("十"):
        rendered = "1" + rendered
    assert rendered == digits


def test_injective_on_dense_and_sparse_ranges() -> None:
    sample = list(range(0, 20000)) + [k * 10**j + r for k in range(1, 100) for j in (6, 8, 9, 10) for r in (0, 1, 10)]
    sample = sorted(set(sample))
    assert len({to_english(n) for n in sample}) == len(sample)
    assert len({to_chinese(n) for n in sample}) == len(sample)


def test_sample_number_spreads_magnitudes_and_is_seeded() -> None:
    rng = random.Random(7)
    drawn = [sample_number(rng) for _ in range(2400)]
    lengths = {len(str(n)) for n in drawn}
    assert lengths == set(range(1, 13))
    assert all(0 <= n < MAX_NUMBER for n in drawn)
    assert drawn[:50] == [sample_number(r) for r in [random.Random(7)] for _ in range(50)]
    assert all(len(str(sample_number(rng, length=9))) == 9 for _ in range(50))
    with pytest.raises(ValueError):
        sample_number(rng, length=13)
