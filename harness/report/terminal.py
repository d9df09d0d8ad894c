"""The end-of-run table in the terminal (rich), next to pytest's own summary."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterable

import pytest
from rich.markup import escape
from rich.table import Table

from harness.core.interrupts import Interruption
from harness.report.checks import format_checks, reason_line
from harness.report.console import reporter_console
from harness.report.durations import terminal_lines
from harness.report.highlights import highlights
from harness.report.memory import terminal_lines as memory_lines
from harness.report.perf_table import COLUMNS, model_tables, shown_columns
from harness.report.summary import ATTENTION, status_line
from harness.report.text import printable
from harness.results import Record
from harness.results.record import RecordLike

STYLE = {"pass": "green", "fail": "bold red", "error": "red", "skip": "yellow", "not-run": "bold magenta"}


def build_table(records: Iterable[RecordLike]) -> Table:
    table = Table(title="model deployment gate", show_lines=False)
    recs = sorted(map(Record.coerce, records), key=lambda r: (r.suite or "", r.id))
    lit = {r.id: "; ".join(v for v in highlights(r).values() if v) for r in recs}
    columns = ["case", "verdict", "worst checks", "reason"] + (["perf / settings"] if any(lit.values()) else [])
    for col in columns:  # the case id is never folded: a broken id cannot be searched or copied
        table.add_column(col, no_wrap=True) if col == "case" else table.add_column(col, overflow="fold")
    for r in recs:
        reason = reason_line(r)[:160]
        cells = [escape(printable(r.id)), f"[{STYLE.get(r.verdict, '')}]{r.verdict}[/]",
                 escape(printable(format_checks(r))), escape(printable(reason))]
        if len(columns) > 4:
            cells.append(escape(printable(lit[r.id])))
        table.add_row(*cells)
    return table


def plain_lines(records: Iterable[RecordLike]) -> list[str]:
    """The end-of-run table for a CI log: one line per case, the case id whole (a log viewer wraps
    long lines; a table squeezed to the pipe's width broke ids into pieces across hundreds of lines),
    cases that need attention first."""
    recs = sorted(map(Record.coerce, records),
                  key=lambda r: (ATTENTION.index(r.verdict) if r.verdict in ATTENTION else len(ATTENTION),
                                 r.suite or "", r.id))
    width = max((len(r.verdict) for r in recs), default=4)
    lines = []
    for r in recs:
        detail = reason_line(r) if r.verdict != "pass" else format_checks(r)
        lit = "; ".join(v for v in highlights(r).values() if v)
        parts = [p for p in (detail, lit) if p]
        lines.append(printable(f"{r.verdict.upper():<{width}}  {r.id}" + (f"  {' | '.join(parts)}" if parts else "")))
    return lines


def perf_tables(records: list[Record], run_dir: Path | None = None) -> list[Table]:
    """Per model, its variants' perf table (``harness.report.perf_table``), regressions first."""
    out = []
    for model in model_tables(records, run_dir):
        shown = shown_columns(model)
        table = Table(title=f"performance: {escape(printable(model.model))}", show_lines=False)
        for i in shown:
            table.add_column(COLUMNS[i], no_wrap=True) if i == 0 else table.add_column(COLUMNS[i], justify="right")
        for row in model.rows:
            cells = row.cells()
            table.add_row(*(escape(printable(cells[i])) for i in shown), style="bold red" if row.regressed else "")
        out.append(table)
    return out


def perf_plain_lines(records: list[Record], run_dir: Path | None = None) -> list[str]:
    """The perf tables for a CI log: per model, one line per variant, each number named."""
    lines = []
    for model in model_tables(records, run_dir):
        lines.append(printable(f"performance: {model.model}"))
        for row in model.rows:
            cells = row.cells()
            named = " | ".join(f"{COLUMNS[i]} {cells[i]}" for i in shown_columns(model)[1:] if cells[i])
            flag = "REGRESSED  " if row.regressed else ""
            lines.append(printable(f"  {flag}{row.variant}  {named}"))
    return lines


def is_terminal(terminalreporter: Any) -> bool:
    """Whether pytest writes to a terminal (not a pipe or a CI log)."""
    stream: Any = getattr(getattr(terminalreporter, "_tw", None), "_file", None) or sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def render_terminal(records: Iterable[RecordLike], terminalreporter: pytest.TerminalReporter,
                    out_dir: Path, *, interruption: Interruption | None = None, durations: int | None = None,
                    perf: bool = False) -> None:
    """The summary table; with ``perf`` (the run measured performance) each model's variant table
    after it; with ``durations`` (``--durations N``) the phase totals and the N slowest cases too."""
    recs = [Record.coerce(r) for r in records]
    terminalreporter.write_sep("=", "harness summary")
    if not is_terminal(terminalreporter):
        for line in plain_lines(recs) + (perf_plain_lines(recs, out_dir) if perf else []):
            terminalreporter.write_line(line)
    else:
        console, buffer = reporter_console(terminalreporter, min_width=100)
        if recs:
            console.print(build_table(recs))
        for table in perf_tables(recs, out_dir) if perf else []:
            console.print(table)
        terminalreporter.write(buffer.getvalue())
    if interruption is not None:
        terminalreporter.write_line(status_line(recs, interruption) + f" (exit {interruption.exit_code})",
                                    red=True, bold=True)
    if durations is not None and recs:
        terminalreporter.write_sep("-", "harness durations")
        for line in terminal_lines(recs, durations):
            terminalreporter.write_line(line)

        terminalreporter.write_sep("-", "harness memory")
        for line in memory_lines(recs, durations):
            terminalreporter.write_line(line)
    terminalreporter.write_line(f"results: {Path(out_dir) / 'results.jsonl'}  summary: {Path(out_dir) / 'summary.md'}")
