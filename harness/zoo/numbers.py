"""Exact number-word renderers: English (British) words and Chinese numerals.

They give the zoo a translation task whose correct answer is known for every input,
so a small model trained on it has *real*, checkable output quality, and a deployment
regression (FP16, INT8, a broken export) shows up as wrong numerals, not just drift.

Conventions (both chosen to be unambiguous, so the mapping is a bijection):

* English: British style with "and" before the last two digits of a hundreds group
  ("one hundred and five") and before a final group below 100 that follows a larger
  group ("one thousand and eleven", "one million and five"); tens are hyphenated
  ("seventy-five"); no commas.
* Chinese: groups of four digits joined with 万 and 亿. Inside a group, a run of zeros
  between non-zero digits is read as one 零; zeros at the end of a group are silent; a
  group below 1000 that follows a non-zero group, or any group that follows an
  all-zero group, gets a leading 零 (100010000 -> 一亿零一万, 100001000 -> 一亿零一千).
  二 is used everywhere (never 两). "一十" is shortened to "十" only at the very start
  of the numeral (10 -> 十, 15 -> 十五, 150000 -> 十五万); elsewhere it stays
  "一十" (110 -> 一百一十, 100010 -> 十万零一十).
"""

from __future__ import annotations

import random

MAX_NUMBER = 10**12  # exclusive: up to nine hundred and ninety-nine billion ...

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((10**9, "billion"), (10**6, "million"), (10**3, "thousand"))

_ZH_DIGITS = "零一二三四五六七八九"
_ZH_SMALL_UNITS = ("千", "百", "十", "")  # for the four digits of a group, high to low
_ZH_GROUP_UNITS = ("亿", "万", "")
ZH_CHARS = frozenset(_ZH_DIGITS + "十百千万亿")


def _check(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"expected int, got {type(n).__name__}")
    if not 0 <= n < MAX_NUMBER:
        raise ValueError(f"{n} is outside the supported range 0 <= n < 10**12")


def _english_below_100(n: int) -> str:
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] if ones == 0 else f"{_TENS[tens]}-{_ONES[ones]}"


def _english_below_1000(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    if hundreds == 0:
        return _english_below_100(rest)
    head = f"{_ONES[hundreds]} hundred"
    return head if rest == 0 else f"{head} and {_english_below_100(rest)}"


def to_english(n: int) -> str:
    """British English words for ``n`` (0 <= n < 10**12), e.g. 1011 -> "one thousand and eleven"."""
    _check(n)
    if n == 0:
        return "zero"
    parts: list[str] = []
    rest = n
    for scale, word in _SCALES:
        group, rest = divmod(rest, scale)
        if group:
            parts.append(f"{_english_below_1000(group)} {word}")
    if rest:
        # British "and" links a trailing 1..99 to the larger groups before it.
        joiner = "and " if parts and rest < 100 else ""
        parts.append(joiner + _english_below_1000(rest))
    return " ".join(parts)


def _chinese_group(n: int) -> str:
    """A 1..9999 group without leading 零; inner zero runs collapse to one 零."""
    digits = f"{n:04d}"
    out: list[str] = []
    pending_zero = False
    for digit, unit in zip(digits, _ZH_SMALL_UNITS):
        if digit == "0":
            pending_zero = bool(out)
            continue
        if pending_zero:
            out.append("零")
            pending_zero = False
        out.append(_ZH_DIGITS[int(digit)] + unit)
    return "".join(out)


def to_chinese(n: int) -> str:
    """Chinese numerals for ``n`` (0 <= n < 10**12), e.g. 675011 -> "六十七万五千零一十一"."""
    _check(n)
    if n == 0:
        return "零"
    groups = (n // 10**8, n // 10**4 % 10**4, n % 10**4)
    out: list[str] = []
    skipped_zero_group = False
    for group, unit in zip(groups, _ZH_GROUP_UNITS):
        if group == 0:
            skipped_zero_group = bool(out)
            continue
        if out and (group < 1000 or skipped_zero_group):
            out.append("零")
        out.append(_chinese_group(group) + unit)
        skipped_zero_group = False
    text = "".join(out)
    return text[1:] if text.startswith("一十") else text


def sample_number(rng: random.Random, length: int | None = None, zero_rate: float = 0.35) -> int:
    """Draw a number with ``length`` digits (default: uniform 1..12) and extra zero digits.

    Uniform numbers below 10**12 are almost all 12 digits long with few zeros, which
    would starve a model of the short numbers and zero rules it must also get right.
    """
    if length is None:
        length = rng.randint(1, 12)
    if not 1 <= length <= 12:
        raise ValueError(f"length must be 1..12, got {length}")
    if length == 1:
        return rng.randint(0, 9)
    digits = [rng.randint(1, 9)]
    for _ in range(length - 1):
        digits.append(0 if rng.random() < zero_rate else rng.randint(0, 9))
    return int("".join(map(str, digits)))
