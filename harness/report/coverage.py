"""What each case gated of its head's outputs, for summary.md and the HTML report.

Rendered from the records' ``data.coverage`` (``harness.results.coverage``) only: the head,
``gated n/m`` of the outputs it requires, what was measured but not gated and why, and what
is missing (a case with anything missing is not a pass). Records without the section (skips,
errors before judging, older runs) are left out.
"""

from __future__ import annotations

from typing import Iterable

from harness.core.markdown import table
from harness.results.coverage import Coverage
from harness.results.record import Record


def _rows(records: Iterable[Record]) -> list[tuple[Record, Coverage]]:
    out = []
    for r in sorted(records, key=lambda r: (r.suite or "", r.id)):
        cov = Coverage.of(r)
        if cov is not None:
            out.append((r, cov))
    return out


def _measured(cov: Coverage) -> str:
    return "; ".join(f"{k}: {why}" for k, why in cov.measured.items()) or "—"


def markdown(records: Iterable[Record]) -> list[str]:
    """The ``## Coverage`` section of summary.md (empty when no record carries coverage)."""
    rows = _rows(records)
    if not rows:
        return []
    lines = ["", "## Coverage", "", "What each case gated of its head's outputs; a case missing any is not a pass.", ""]
    return lines + table(["case", "head", "gated", "measured, not gated (why)"],
                         [[f"`{r.id}`", cov.head or "?", f"{cov.summary()}: {', '.join(cov.gated) or 'nothing'}",
                           _measured(cov)] for r, cov in rows])


def html(records: Iterable[Record]) -> str:
    """The coverage section of the HTML report ('' when no record carries coverage)."""
    rows = _rows(records)
    if not rows:
        return ""
    from harness.report.html.templating import render  # deferred: harness.report.html imports this module at import time

    return render("coverage.html.j2", rows=[(r, cov, _measured(cov)) for r, cov in rows])
