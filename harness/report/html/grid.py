"""The overview grid: models down, precision × provider across, one cell per variant coloured
by its worst verdict, listing each suite's case with its headline number (a link to the case)."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any

from harness.report.html.headline import headline
from harness.report.html.templating import render
from harness.report.variants import precision_rank, split_variant
from harness.results import Record
from harness.results.reason import reason_line

#: worst first: a cell takes the colour of the worst case in it
SEVERITY = {"error": 0, "fail": 1, "not-run": 2, "pass": 3, "skip": 4}


def anchor(case_id: str) -> str:
    """A stable, safe element id for a case."""
    return "case-" + hashlib.sha1(case_id.encode()).hexdigest()[:12]


def case_label(record: Record) -> str:
    """The test function of a case, readable: ``test_cold_start_memory[...]`` -> ``cold start memory``."""
    return record.id.split("[", 1)[0].removeprefix("test_").replace("_", " ") or "case"


def _column(record: Record) -> str:
    """A column's heading under the precision: the provider, and the runtime setting that made the
    variant different (``ort_cpu · opt_disabled``) — such cases are not the default ``ort_cpu``."""
    parts = split_variant(record.variant or "")
    provider = record.provider or parts.provider or "?"
    return f"{provider} · {parts.setting}" if parts.setting else provider


def render_grid(records: list[Record]) -> str:
    cells: dict[tuple[str, str, str], list[Record]] = defaultdict(list)
    for r in records:
        cells[(r.model or "?", r.precision or "?", _column(r))].append(r)
    models = sorted({k[0] for k in cells})
    # precision order FP32 -> FP16 -> INT8, then provider (a runtime-setting variant beside its provider)
    columns = sorted({(k[1], k[2]) for k in cells}, key=lambda c: (precision_rank(c[0]), c[1]))
    rows = [(model, [_cell(cells.get((model, precision, provider), [])) for precision, provider in columns])
            for model in models]
    return render("grid.html.j2", columns=columns, rows=rows)


def _cell(found: list[Record]) -> dict[str, Any] | None:
    """One grid cell: its worst verdict and its cases, worst first (None: no such variant)."""
    if not found:
        return None
    cases = []
    for r in sorted(found, key=lambda r: (SEVERITY.get(r.verdict, 9), r.suite or "")):
        h = headline(r)
        cases.append({"verdict": r.verdict, "anchor": anchor(r.id), "id": r.id, "label": case_label(r),
                      "number": h.text() if h else reason_line(r)[:60]})
    return {"worst": min(found, key=lambda r: SEVERITY.get(r.verdict, 9)).verdict, "variant": found[0].variant or "",
            "cases": cases}
