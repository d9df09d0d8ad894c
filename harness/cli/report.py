"""``harness report RUN_DIR``: re-render a finished run's records as CSV, HTML or Markdown.

Reads only ``results.jsonl`` (the last record per case), so a report can be made long after
the run, on another machine. Exit codes: 0 written, 2 a missing or corrupt run directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core import UsageError
from harness.core.interrupts import read_marker
from harness.core.writable import ensure_writable_file
from harness.report.console import cli_console
from harness.report.html import render_report
from harness.report.summary import render_summary, status_line
from harness.results import history
from harness.results.rundir import read_results


def _write(path: str, text: str) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")


def cmd_report(args: argparse.Namespace) -> int:
    if args.history_db and not args.html:
        raise UsageError("--history-db: trend plots go into the HTML report; add --html OUT")
    for option in ("csv", "html", "markdown"):  # before reading: an unwritable OUT is one line, exit 2
        if getattr(args, option):
            ensure_writable_file(getattr(args, option), f"--{option}")
    records = read_results(args.run_dir)  # one-line UsageError for a missing dir or corrupt line
    if args.history_db:  # a missing or foreign store is one line, exit 2 (an empty one only says so in the page)

        history.runs(args.history_db)
    from harness.report import tables

    stopped = read_marker(Path(args.run_dir))  # the run was cut short: say so, as summary.md did
    frame = tables.records_frame(records)
    if args.csv:
        _write(args.csv, tables.to_csv(frame))
    if args.html:
        _write(args.html, render_report(records, title=f"model deployment gate: {Path(args.run_dir).name}",
                                        run_dir=Path(args.run_dir), report_path=Path(args.html), history_db=args.history_db,
                                        interruption=stopped))
    if args.markdown:
        _write(args.markdown, render_summary(records, interruption=stopped, run_dir=Path(args.run_dir)))
    if not (args.csv or args.html or args.markdown):
        from harness.report.terminal import build_table

        cli_console().print(build_table(records))
        if stopped is not None:
            print(status_line(records, interruption=stopped))
    else:
        written = ", ".join(str(p) for p in (args.csv, args.html, args.markdown) if p)
        print(f"{len(records)} case(s) from {args.run_dir} -> {written}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``report`` to the top-level parser."""
    parser = subparsers.add_parser("report", help="re-render a run's results as CSV, HTML or Markdown",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", metavar="RUN_DIR")
    from harness.settings.commands import add_command_options

    add_command_options(parser, "report")
    parser.set_defaults(func=cmd_report)
