"""Differences between two decoded sentences as HTML: ``<del>`` for what PyTorch's text has and
the variant lost, ``<ins>`` for what the variant has instead. The markup is a template
(``templates/text_diff.html.j2``, autoescape on): every piece of text is escaped there.

Compared token by token — words, and single characters for CJK scripts (which have no spaces)
and punctuation — so "Katzen" -> "Hunde" is marked as one replaced word rather than as the
scattered letters a raw character diff would pick."""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

from harness.report.html.templating import markup, render

if TYPE_CHECKING:  # pragma: no cover
    from markupsafe import Markup

_TOKENS = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]|\w+|\s+|[^\w\s]")


def tokens(text: str) -> list[str]:
    return _TOKENS.findall(text)


def pieces(reference: str, variant: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(reference, variant) as (kind, text) pieces: kind ``del`` for tokens only the reference
    has, ``ins`` for those only the variant has, ``same`` for the rest."""
    a, b = tokens(reference), tokens(variant)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    left: list[tuple[str, str]] = []
    right: list[tuple[str, str]] = []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        removed, added = "".join(a[a0:a1]), "".join(b[b0:b1])
        if op == "equal":
            left.append(("same", removed))
            right.append(("same", added))
            continue
        if removed:
            left.append(("del", removed))
        if added:
            right.append(("ins", added))
    return left, right


def highlight(reference: str, variant: str) -> tuple[Markup, Markup]:
    """(reference with removed tokens marked, variant with added tokens marked) as markup from
    ``templates/text_diff.html.j2`` (autoescape: a ``<`` in a sentence stays text)."""
    left, right = pieces(reference, variant)
    return markup(render("text_diff.html.j2", pieces=left)), markup(render("text_diff.html.j2", pieces=right))
