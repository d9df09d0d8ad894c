"""The overview grid: models down, precision × provider across, one cell per variant coloured
by its worst verdict, listing each suite's case with its headline number (a link to the case)."""

from __future__ import annotations

from collections import defaultdict
from html import escape

from harness.report.html.headline import headline
from harness.report.variants import precision_rank, split_variant
from harness.results import Record

#: worst first: a cell takes the colour of the worst case in it
SEVERITY = {"error": 0, "fail": 1, "not-run": 2, "pass": 3, "skip": 4}


def anchor(case_id: str) -> str:
    """A stable, safe element id for a case."""
    import hashlib

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
    head = "".join(f"<th scope=\"col\">{escape(p)}<br><small>{escape(q)}</small></th>" for p, q in columns)
    rows = []
    for model in models:
        tds = []
        for precision, provider in columns:
            found = cells.get((model, precision, provider), [])
            if not found:
                tds.append('<td class="empty">–</td>')
                continue
            worst = min(found, key=lambda r: SEVERITY.get(r.verdict, 9)).verdict
            lines = []
            for r in sorted(found, key=lambda r: (SEVERITY.get(r.verdict, 9), r.suite or "")):
                h = headline(r)
                number = escape(h.text()) if h else escape(r.first_reason_line[:60])
                lines.append(f'<a class="case v-{escape(r.verdict)}" href="#{anchor(r.id)}" '
                             f'title="{escape(r.id)}"><b>{escape(case_label(r))}</b> {number}</a>')
            tds.append(f'<td class="cell v-{escape(worst)}" data-verdict="{escape(worst)}" '
                       f'data-variant="{escape(found[0].variant or "")}">{"".join(lines)}</td>')
        rows.append(f"<tr><th scope=\"row\">{escape(model)}</th>{''.join(tds)}</tr>")
    return (f'<section id="overview"><h2>Overview</h2><table class="grid"><thead><tr><th>model</th>{head}</tr>'
            f"</thead><tbody>{''.join(rows)}</tbody></table></section>")
