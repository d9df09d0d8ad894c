"""Records as a pandas table: one row per case, every number a column.

The same flattening (``record_numbers``) feeds the CSV/HTML exports and the history store,
so a column called ``perf:latency_ms.p50`` in a spreadsheet is the metric of that name in
``harness history show``.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import pandas as pd

from harness.core.verdict_text import exact_text
from harness.report.highlights import perf_columns
from harness.report.html.headline import headline
from harness.report.html.templating import markup, render
from harness.results import Record
from harness.results.numbers import METRIC_PREFIX, PERF_PREFIX, perf_numbers, record_numbers
from harness.results.record import RecordError, RecordLike

__all__ = ["METRIC_PREFIX", "PERF_PREFIX", "perf_numbers", "record_numbers"]  # re-exported: declared in results

BASE_COLUMNS = ("id", "suite", "variant", "model", "precision", "backend", "provider", "verdict", "reason",
                "duration_s", "fingerprint", "finished", "run_id",
                # the case's headline number, chosen by the metric registry (report/html/headline.py)
                "headline_metric", "headline_value", "headline_threshold")
#: what users look for first (harness.report.highlights), after the identity columns where present
HIGHLIGHT_COLUMNS = ("p99_ms", "p99_samples", "p99_low_confidence", "ttft_ms", "tpot_ms", "tokens_per_s", "runtime")
VERDICT_COLOURS = {"pass": "#d7f5dd", "fail": "#f8d0d0", "error": "#f4b6b6", "skip": "#fcefc7", "not-run": "#e9d3f5"}


def first_line(text: Any) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0] if lines else ""


def records_frame(records: Iterable[RecordLike]) -> pd.DataFrame:
    """One row per record: identity columns first, then sorted metric and perf columns
    (NaN where a case did not measure that number)."""
    rows = []
    for r in (r.to_dict() if isinstance(r, Record) else r for r in records):
        env = r.get("env")
        if not isinstance(env, Mapping):
            env = {}
        row: dict[str, Any] = {c: r.get(c) for c in BASE_COLUMNS}
        row["reason"] = first_line(r.get("reason"))
        row["fingerprint"] = env.get("fingerprint")
        row.update(_headline_cells(r))
        row.update(record_numbers(r))
        row.update({k: v for k, v in perf_columns(r).items() if v not in (None, "")})
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(BASE_COLUMNS) if not rows else None)
    extra = sorted(c for c in frame.columns if c not in BASE_COLUMNS)
    ordered = [c for c in extra if c.startswith(METRIC_PREFIX)] + [c for c in extra if c.startswith(PERF_PREFIX)]
    highlights = [c for c in HIGHLIGHT_COLUMNS if c in frame.columns]  # only where some case has them
    frame = frame.reindex(columns=list(BASE_COLUMNS) + highlights + ordered)
    if len(frame):
        frame["duration_s"] = pd.to_numeric(frame["duration_s"], errors="coerce")
    return frame


def _headline_cells(raw: Mapping[str, Any]) -> dict[str, Any]:
    try:
        found = headline(Record.from_dict(raw))
    except RecordError:
        found = None
    if found is None:
        return {}

    gate = f"{found.op} {exact_text(found.threshold)}" if found.threshold is not None else None
    return {"headline_metric": found.key, "headline_value": found.value, "headline_threshold": gate}


def to_csv(frame: pd.DataFrame) -> str:
    """CSV whose floats are the shortest text that reads back as the same number (Python's repr):
    a round trip gives back the recorded numbers, and ``62.0668`` is not written ``62.066800000000001``."""
    csv: str = frame.to_csv(index=False)
    return csv


_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; position: sticky; top: 0; }
"""


def _verdict_style(verdict: Any) -> str:
    colour = VERDICT_COLOURS.get(str(verdict))
    return f"background-color: {colour}" if colour else ""


def _format_cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def to_html(frame: pd.DataFrame, title: str = "model deployment gate") -> str:
    """A self-contained page (inline CSS, no scripts or external assets); every cell and
    header is HTML-escaped because reasons and ids carry arbitrary text. The case and
    verdict cells are coloured by verdict."""
    styler = frame.style.hide(axis="index")
    styler = styler.format(_format_cell, escape="html").format_index(escape="html", axis=1)
    if "verdict" in frame.columns and len(frame):
        # the case and verdict cells only: a per-cell rule for hundreds of metric columns bloats the page
        styler = styler.map(_verdict_style, subset=["verdict"])
        styler = styler.apply(lambda _: frame["verdict"].map(_verdict_style), subset=["id"], axis=0)
    # Styler silently trims tables above 262144 cells; a report must show every case
    with pd.option_context("styler.render.max_elements", max(frame.size, 1) * 2):
        table = styler.set_table_attributes('class="results"').to_html()
    counts = frame["verdict"].value_counts().to_dict() if "verdict" in frame.columns else {}
    summary = ", ".join(f"{counts.get(v, 0)} {v}" for v in ("pass", "fail", "error", "not-run", "skip"))
    return render("table_page.html.j2", title=title, css=markup(_CSS), cases=len(frame), summary=summary,
                  table=markup(table))
