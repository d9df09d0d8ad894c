"""How a byte count is written for people: binary units (GiB / MiB / KiB), one rule for every table."""

from __future__ import annotations

_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def binary_bytes(n: float, digits: int = 2) -> str:
    """``n`` bytes in the largest binary unit it reaches (``1.50 GiB``), whole bytes below 1 KiB."""
    for unit, size in _UNITS:
        if abs(n) >= size:
            return f"{n / size:.{digits}f} {unit}"
    return f"{n:.0f} B"
