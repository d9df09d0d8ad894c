"""How a number is written for people, by its unit: one formatter per unit (a byte count in binary
units, a time in ms or s, a rate), one rule for every table. ``harness.report.units`` adds the unit
the metric registry declares; the gate (which may not import the reports) calls :func:`value_text`."""

from __future__ import annotations

import math
from typing import Callable

_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def binary_bytes(n: float, digits: int = 2) -> str:
    """``n`` bytes in the largest binary unit it reaches (``1.50 GiB``), whole bytes below 1 KiB."""
    for unit, size in _UNITS:
        if abs(n) >= size:
            return f"{n / size:.{digits}f} {unit}"
    return f"{n:.0f} B"


def _ms(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value / 1000:.3g} s" if abs(value) < 100_000 else f"{value / 1000:,.0f} s"
    return f"{value:.3g} ms"


def _rate(unit: str) -> Callable[[float], str]:
    return lambda value: f"{value:,.0f} {unit}" if abs(value) >= 100 else f"{value:.3g} {unit}"


FORMATTERS: dict[str, Callable[[float], str]] = {
    "ms": _ms,
    "s": lambda v: _ms(v * 1000),
    "bytes": lambda v: binary_bytes(v),
    "MiB": lambda v: binary_bytes(v * 2 ** 20),
    "tokens/s": _rate("tokens/s"),
    "calls/s": _rate("calls/s"),
    "%": lambda v: f"{v:.3g} %",
}


def scaled(value: float, unit: str) -> tuple[float, str, float]:
    """``value`` in the scale its unit's formatter writes it: (number, suffix, factor) with
    ``value == number * factor`` (``12000`` ms -> ``(12.0, "s", 1000.0)``; a unit without a
    formatter is its own scale, and a unitless number has no suffix)."""
    if unit in ("ms", "s"):
        ms = value * 1000 if unit == "s" else value
        per_ms = 1000.0 if unit == "s" else 1.0
        return (ms / 1000, "s", 1000 / per_ms) if abs(ms) >= 1000 else (ms, "ms", 1 / per_ms)
    if unit in ("bytes", "MiB"):
        per_byte = 2.0 ** 20 if unit == "MiB" else 1.0
        n = value * per_byte
        for name, size in _UNITS:
            if abs(n) >= size:
                return n / size, name, size / per_byte
        return n, "B", 1 / per_byte
    if unit in FORMATTERS:  # a rate or a percentage: written in its own unit
        return value, unit, 1.0
    return value, "", 1.0  # no formatter (a fraction, BLEU points): its column or name says the unit


def value_text(value: float | None, unit: str = "", *, digits: int = 4) -> str:
    """A metric's value on every report surface (grid, cards, compare, summary.md, JUnit, the
    terminal table): a time, size or rate through its unit's formatter (``10.1 s``, ``1.5 MiB``),
    any other number with ``digits`` significant digits and no unit (its column or the metric's
    name says it; thresholds and compared values pass 6 so 0.99999 does not read as 1); NaN and
    infinities spelled out (a NaN is a value that fails, not a missing one); '' for None."""
    if value is None:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    formatter = FORMATTERS.get(unit)
    return formatter(float(value)) if formatter is not None else f"{value:.{digits}g}"
