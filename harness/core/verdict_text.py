"""A compared value and its threshold, written so the text cannot contradict the verdict.

A value printed with a fixed number of digits can round onto its threshold: ``0.99989996``
at 6 significant digits is ``0.9999``, and ``cosine = 0.9999 (must be >= 0.9999)`` reads as a
pass while the case failed. Here the threshold is written exactly as configured (the shortest
text that reads back as the same float, ``0.9999``, in its unit's scale: ``5 s``) and the value
with as many digits as it takes for the printed number to (1) fall on the same side of the
threshold as the value does and (2) differ from the threshold unless the value equals it:
``0.99989996 (must be >= 0.9999)``. Everything else keeps the usual look of
:func:`harness.core.units.value_text` (6 significant digits for a unitless number, the unit's
formatter for a time, size or rate).

Every surface that prints a value beside its threshold -- the failure text of a case (terminal,
JUnit, ``summary.md``), the HTML checks table, the overview grid, the compare page -- calls
:func:`compared_text`. It is a pure function of (value, threshold, direction, unit): escaping
for a given output format is the caller's job, after formatting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.core.direction import Direction
from harness.core.units import scaled, value_text

#: significant digits of a compared value before any more are needed (docs/report.md)
COMPARED_DIGITS = 6
#: a float64 reads back exactly from 17 significant digits: no value ever needs more
_MAX_DIGITS = 17


@dataclass(frozen=True)
class ComparedText:
    """The printed value and threshold of one check, and the gate between them."""

    value: str
    threshold: str
    op: str

    @property
    def gate(self) -> str:
        """``<= 0.15``: the threshold with its operator."""
        return f"{self.op} {self.threshold}"

    def must_be(self) -> str:
        """``0.99989996 (must be >= 0.9999)``: the form of a failure line."""
        return f"{self.value} (must be {self.gate})"


def exact_text(number: float, unit: str = "") -> str:
    """``number`` as configured: the shortest decimal that reads back as the same float, in the
    unit's display scale (``5000`` ms -> ``5 s``, ``0.9999`` -> ``0.9999``, ``1e-05``)."""
    if not math.isfinite(number):
        return value_text(number, unit)
    shown, suffix, _ = scaled(number, unit)
    text = repr(float(f"{shown:.15g}"))  # .15g drops the noise a scale division adds (0.3 / 1000)
    text = text.removesuffix(".0")
    return f"{text} {suffix}".rstrip() if suffix else text


def significant(number: float, digits: int) -> str:
    """``number`` rounded to ``digits`` significant digits without an exponent where a person reads
    it easily (1e-4 <= |x| < 1e15), trailing zeros dropped as ``%g`` drops them."""
    if number == 0 or not math.isfinite(number):
        return f"{number:g}"
    exponent = math.floor(math.log10(abs(number)))
    if not -5 <= exponent < 15:
        return f"{number:.{digits}g}"
    text = f"{number:.{max(digits - 1 - exponent, 0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _agrees(shown: float, value: float, threshold: float, direction: Direction) -> bool:
    """Whether a reader of ``shown`` draws the verdict ``value`` has, and sees it differ from the
    threshold whenever it does."""
    if direction.holds(shown, threshold) != direction.holds(value, threshold):
        return False
    return shown != threshold or value == threshold


def compared_text(value: float, threshold: float, direction: Direction, unit: str = "",
                  digits: int = COMPARED_DIGITS) -> ComparedText:
    """The value and threshold of one check as every report prints them (module docstring)."""
    op = direction.symbol
    if not math.isfinite(value) or not math.isfinite(threshold):
        return ComparedText(value_text(value, unit, digits=digits), exact_text(threshold, unit), op)
    usual = value_text(value, unit, digits=digits)
    number, suffix, factor = scaled(value, unit)
    candidates = [usual] + [f"{significant(number, d)} {suffix}".rstrip() if suffix else significant(number, d)
                            for d in range(digits, _MAX_DIGITS + 1)]
    for text in candidates:
        shown = _read_back(text, suffix, factor)
        if shown is not None and _agrees(shown, value, threshold, direction):
            return ComparedText(text, exact_text(threshold, unit), op)
    return ComparedText(repr(value), exact_text(threshold, unit), op)


def _read_back(text: str, suffix: str, factor: float) -> float | None:
    """The number a reader takes from ``text`` (in the value's own unit), or None when the text is
    in another scale than ``suffix`` (the usual formatter chose differently)."""
    number = text.removesuffix(suffix).strip().replace(",", "") if suffix else text
    if suffix and not text.endswith(f" {suffix}"):
        return None
    try:
        return float(number) * factor
    except ValueError:
        return None
