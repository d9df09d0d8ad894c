"""Character-level differences between two strings as HTML: ``<del>`` for what the reference has
and the variant lost, ``<ins>`` for what the variant added. Every piece is escaped."""

from __future__ import annotations

import difflib
from html import escape


def highlight(reference: str, variant: str) -> tuple[str, str]:
    """(reference with removed characters marked, variant with added characters marked)."""
    matcher = difflib.SequenceMatcher(None, reference, variant, autojunk=False)
    left: list[str] = []
    right: list[str] = []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        a, b = escape(reference[a0:a1]), escape(variant[b0:b1])
        if op == "equal":
            left.append(a)
            right.append(b)
            continue
        if a:
            left.append(f"<del>{a}</del>")
        if b:
            right.append(f"<ins>{b}</ins>")
    return "".join(left), "".join(right)
