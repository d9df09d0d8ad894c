"""The one Markdown table writer: summary.md and its sections, the gates' reports (perf, accuracy),
`harness compare`, `harness bench`, the check report and the generated docs tables.

Cells arrive as text the caller made safe for its column (``summary.md_cell`` for corpus text,
``summary.md_code`` for ids); the writer only escapes a pipe that would end a cell early and
joins. ``align`` is one letter per column: ``l`` (default) or ``r`` (numbers).
"""

from __future__ import annotations

from typing import Iterable, Sequence


def cell(value: object) -> str:
    """A cell's text with its pipes escaped (an unescaped one would start a new column)."""
    return str(value).replace("\n", " ").replace("\\|", "\x00").replace("|", "\\|").replace("\x00", "\\|")


def table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str = "") -> list[str]:
    """``header`` and ``rows`` as Markdown table lines (no blank line around them)."""
    rule = ["---:" if (align[i:i + 1] == "r") else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines
