"""Differences between two decoded sentences as HTML: ``<del>`` for what PyTorch's text has and
the variant lost, ``<ins>`` for what the variant has instead. Every piece is escaped.

Compared token by token — words, and single characters for CJK scripts (which have no spaces)
and punctuation — so "Katzen" -> "Hunde" is marked as one replaced word rather than as the
scattered letters a raw character diff would pick."""

from __future__ import annotations

import difflib
import re
from html import escape

_TOKENS = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]|\w+|\s+|[^\w\s]")


def tokens(text: str) -> list[str]:
    return _TOKENS.findall(text)


def highlight(reference: str, variant: str) -> tuple[str, str]:
    """(reference with removed tokens marked, variant with added tokens marked)."""
    a, b = tokens(reference), tokens(variant)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    left: list[str] = []
    right: list[str] = []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        removed, added = escape("".join(a[a0:a1])), escape("".join(b[b0:b1]))
        if op == "equal":
            left.append(removed)
            right.append(added)
            continue
        if removed:
            left.append(f"<del>{removed}</del>")
        if added:
            right.append(f"<ins>{added}</ins>")
    return "".join(left), "".join(right)
