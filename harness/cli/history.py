"""``harness history add|show|changes|list``: keep every nightly run's numbers, show their trend and its change points.

Exit codes: 0 ok, 1 nothing compared (no series of 2 runs; 4 for ``changes``) or, for ``changes``, a
series whose newest level is a regression (the perf gate's judge, ``harness.gate.trend``), 2 a
usage error (bad run directory, missing database, unknown variant or metric). ``show`` informs;
``changes`` is the trend's gate.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core import UsageError
from harness.core.compared import Compared
from harness.core.rundirs import history_db
from harness.core.units import value_text
from harness.core.writable import ensure_writable_file
from harness.gate.changepoints import series_changes
from harness.gate.policy import SERIES_MIN_RUNS
from harness.gate.row import Verdict
from harness.gate.trend import TrendVerdict, judge_trends
from harness.report.console import cli_console
from harness.report.html.page import CSS
from harness.report.html.templating import markup, render
from harness.report.html.trends import render_trends
from harness.report.units import fmt, quantity
from harness.results import history
from harness.settings.commands import add_command_options

if TYPE_CHECKING:
    import pandas as pd

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console
    from rich.text import Text


def _console() -> Console:
    return cli_console()


def cmd_add(args: argparse.Namespace) -> int:
    """Adds every good directory even when one is bad: a nightly `add reports/nightly-*` must
    not stall forever behind one interrupted night. Then fails (one line) naming the first bad one."""
    if not history.is_url(_db(args)):
        ensure_writable_file(_db(args), "--history-db")  # before any directory is read
    failed: list[str] = []
    for run_dir in args.run_dirs:
        try:
            stored = history.ingest(run_dir, _db(args))
        except history.HistoryError:
            raise  # the database itself is unusable: no point trying the other directories
        except UsageError as exc:
            failed.append(str(exc))
            continue
        for item in stored:
            if item.added:
                print(f"added run {item.run_id} from {run_dir}: {item.cases} case(s), {item.values} value(s)")
            else:
                print(f"run {item.run_id} from {run_dir} already stored; nothing added")
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise UsageError(f"{len(failed)} of {len(args.run_dirs)} run directories not added: {failed[0]}{more}")
    return 0


#: a change against the previous run (or the window's median) that ``show`` marks and counts
MOVED = 0.10


def _pct(change: float) -> str:
    return "" if change is None or math.isnan(change) else f"{change:+.1%}"


def _value(value: float, metric: str) -> str:
    """A stored value in its unit (``1.08 ms``, ``80.00 MiB``, ``900 calls/s``); a unitless one
    with 6 significant digits."""
    return "" if math.isnan(value) else value_text(value, quantity(metric).unit, digits=6)


def show_rows(wide: pd.DataFrame) -> pd.DataFrame:
    """Long table of what ``show`` prints: one row per series and run, oldest run first."""
    import pandas as pd

    parts = []
    for variant, metric in wide.columns:
        found = history.changes(wide[(variant, metric)])
        found = found[found["value"].notna()]
        if found.empty:
            continue
        found = found.reset_index()
        found.insert(0, "metric", metric)
        found.insert(0, "variant", variant)
        parts.append(found)
    if not parts:
        return pd.DataFrame(columns=["variant", "metric", "finished", "run_id", "value", "vs_previous", "vs_median"])
    return pd.concat(parts, ignore_index=True)


def cmd_show(args: argparse.Namespace) -> int:
    for option in ("csv", "html"):
        if getattr(args, option):
            ensure_writable_file(getattr(args, option), f"--{option}")
    wide = history.trend(_db(args), variant=args.variant, metric_glob=args.metric, last=args.last)
    if args.html:
        _write_html(args, wide)
    rows = show_rows(wide)
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"history of {args.metric!r} over the last {len(wide)} run(s) in {history.describe(_db(args))}"))
    for column in ("variant", "metric", "run", "finished", "value", "vs previous", "vs window median"):
        # names are never cut mid-word: the other columns give way (a narrow terminal wraps the line)
        table.add_column(column, justify="right" if column.startswith(("value", "vs")) else "left",
                         no_wrap=column in ("variant", "metric", "run", "value"), min_width=len(column))
    series = None
    for row in rows.itertuples(index=False):
        key = (row.variant, row.metric)
        first = key != series
        if first and series is not None:
            table.add_section()
        series = key
        table.add_row(Text(row.variant if first else ""), Text(row.metric if first else ""), Text(row.run_id),
                      Text(str(row.finished)), _value(row.value, str(row.metric)), _change_text(row.vs_previous),
                      _change_text(row.vs_median))
    _console().print(table)
    if args.csv:
        out = Path(args.csv)
        out.parent.mkdir(parents=True, exist_ok=True)
        rows.to_csv(out, index=False)  # shortest round-trip floats (no 62.066800000000001)
    summary = moved_summary(rows, args.metric, len(wide))
    if summary:
        print(summary)
    return _trend_verdict(args, wide)


def moved_summary(rows: pd.DataFrame, metric: str, runs: int) -> str | None:
    """The line under ``show``'s table: how many series moved by :data:`MOVED` or more in the
    newest run against the run before, the largest named -- what a nightly job's log shows of its
    trends (the table goes beside the report). None when no series has two runs (the verdict
    line says so)."""
    newest = rows.groupby(["variant", "metric"], sort=False).tail(1)
    newest = newest[newest["vs_previous"].notna()]
    if newest.empty:
        return None
    moved = newest[newest["vs_previous"].abs() >= MOVED]
    line = (f"{len(newest)} series of metric {metric!r} over {runs} run(s): {len(moved)} moved by "
            f"{MOVED:.0%} or more in the newest run against the one before")
    if moved.empty:
        return line
    top = moved.loc[moved["vs_previous"].abs().idxmax()]
    return f"{line} (the most: {top['variant']} {top['metric']} {_pct(float(top['vs_previous']))})"


def _trend_verdict(args: argparse.Namespace, wide: pd.DataFrame, least: int = 2) -> int:
    """A trend compares a series with its own past: with no series of ``least`` or more stored runs
    (nothing matched, or every series is shorter) nothing was compared: exit 1 with the series
    listed, unless ``--allow-missing``. Shorter series beside compared ones are new, not a
    failure. ``show`` needs two runs to show a change; ``changes`` needs what the series rule
    judges (``SERIES_MIN_RUNS``: a level of two runs on each side of a change)."""
    series = [(str(v), str(m)) for v, m in wide.columns]
    short = tuple(f"{v} {m}" for v, m in series if wide[(v, m)].dropna().shape[0] < least)
    compared = Compared(f"series with {least} or more runs", len(series) - len(short), short,
                        allow_missing=args.allow_missing, missing_as=f"with fewer than {least} runs")
    if compared.count:
        return 0
    scope = f"metric {args.metric!r}" + (f", variant {args.variant!r}" if args.variant else "")
    verdict = "OK" if args.allow_missing else "FAIL"
    print(f"{verdict}: {len(series)} series of {scope} over {len(wide)} run(s)" + compared.verdict_suffix())
    return compared.exit_code


def _write_html(args: argparse.Namespace, wide: pd.DataFrame) -> None:
    """One trend plot per metric (a line per variant, its baseline band shaded) as a page."""
    wanted = [(str(variant), str(metric)) for variant, metric in wide.columns]
    body = render_trends(_db(args), wanted, last=args.last or 30, max_plots=args.max_plots)
    title = f"history of {args.metric!r} in {history.describe(_db(args))}"
    out = Path(args.html)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render("history_page.html.j2", title=title, css=markup(CSS), body=markup(body)), encoding="utf-8")


def _change_text(change: float) -> Text:
    from rich.text import Text

    text = _pct(change)
    # for latency, memory and size, up is worse; for accuracy metrics it depends, so colour only big moves
    style = "yellow" if text and abs(change) >= MOVED else ""
    return Text(text, style=style)


def cmd_changes(args: argparse.Namespace) -> int:
    """Change points per variant (harness/gate/changepoints.py): the run where each new level
    started; then each series' newest level judged by the perf gate's judge (harness/gate/trend.py)."""
    from rich.table import Table
    from rich.text import Text

    wide = history.trend(_db(args), variant=args.variant, metric_glob=args.metric, last=args.last)
    found = []
    for variant, metric in wide.columns:
        q = quantity(str(metric))
        found += [(c, q) for c in series_changes(wide[(variant, metric)].dropna(), str(variant), str(metric),
                                                 higher_is_better=q.higher_is_better)]
    table = Table(title=Text(f"change points of {args.metric!r} over the last {len(wide)} run(s) in "
                             f"{history.describe(_db(args))}"))
    for column in ("variant", "metric", "from run", "finished", "before", "after", "change", "direction"):
        table.add_column(column, justify="right" if column in ("before", "after", "change") else "left",
                         overflow="fold")
    for c, q in found:
        direction = {True: Text("worse", style="bold red"), False: Text("better", style="green"),
                     None: Text("")}[c.worse]
        table.add_row(Text(c.variant), Text(c.metric), Text(c.run_id), Text(c.finished), fmt(c.before, q.unit),
                      fmt(c.after, q.unit), f"{c.relative:+.1%}", direction)
    console = _console()
    if found:
        console.print(table)
    console.print(f"{len(found)} change point(s) in {len(wide.columns)} series "
                  f"(PELT over each series' stored runs; a level must hold for 2 runs and move by 5 % and 3 σ)")
    missing = _trend_verdict(args, wide, least=SERIES_MIN_RUNS)
    if missing or not any(wide[c].dropna().shape[0] >= SERIES_MIN_RUNS for c in wide.columns):
        return missing  # nothing the series rule can judge: said above (exit 1, 0 with --allow-missing)
    verdict = judge_trends(wide, {str(m): quantity(str(m)).higher_is_better for _, m in wide.columns})
    _print_trend_verdict(console, verdict)
    return verdict.exit_code


_VERDICT_STYLE = {Verdict.REGRESSION: "bold red", Verdict.IMPROVEMENT: "cyan", Verdict.INCONCLUSIVE: "yellow",
                  Verdict.PASS: "green"}


def _print_trend_verdict(console: Console, verdict: TrendVerdict) -> None:
    """Every series not plainly PASS (regressions first), then one line: what was judged, and how."""
    from rich.table import Table
    from rich.text import Text

    order = (Verdict.REGRESSION, Verdict.INCONCLUSIVE, Verdict.IMPROVEMENT)
    notable = sorted((r for r in verdict.rows if r.verdict is not Verdict.PASS), key=lambda r: order.index(r.verdict))
    if notable:
        table = Table(title=Text("series whose newest level is not a plain PASS"))
        for column in ("verdict", "variant", "metric", "level before", "level now", "why"):
            table.add_column(column, justify="right" if column.startswith("level") else "left", overflow="fold")
        for r in notable:
            unit = quantity(r.metric).unit
            style = "dim" if r.advisory else _VERDICT_STYLE[r.verdict]
            table.add_row(Text(r.verdict.value, style=style), Text(r.variant), Text(r.metric), fmt(r.base, unit),
                          fmt(r.cand, unit), Text(r.reason))
        console.print(table)
    counts = ", ".join(f"{n} {v}" for v, n in sorted(verdict.counts().items()))
    gating = [r for r in verdict.rows if r.gating_regression]
    head = "REGRESSION" if gating else "OK"
    what = "; ".join(f"{r.variant} {r.metric}: {r.reason}" for r in gating[:3]) + (" ..." if len(gating) > 3 else "")
    # markup off: a series named ``latency_ms[gen=tpot,kv=on]`` is not a style tag (rich dropped it,
    # and the TPOT and TTFT series both read ``latency_ms.p50``)
    console.print(f"{head}: {len(verdict.rows)} series judged by the perf gate's series rule ({counts})"
                  + (f" -- {what}" if what else ""), markup=False, highlight=False)


def cmd_list(args: argparse.Namespace) -> int:
    import pandas as pd

    stored = history.runs(_db(args))
    if stored.empty:
        print(f"no runs in {history.describe(_db(args))}")
        return 0
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"runs in {history.describe(_db(args))}"))
    for column in stored.columns:
        table.add_column(column)
    for row in stored.itertuples(index=False):
        table.add_row(*(Text("" if pd.isna(v) else str(v)) for v in row))
    _console().print(table)
    return 0


def _db(args: argparse.Namespace) -> str:
    """The history store: ``--history-db``, else ``$HARNESS_HISTORY_DB``, else the default file."""
    return history_db(args.history_db)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``history`` with its add/show/list subcommands to the top-level parser."""
    parser = subparsers.add_parser("history", help="store runs' numbers over time and show their trend",
                                   description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="history_command", metavar="{add,show,changes,list}", required=True)

    add = actions.add_parser("add", help="store the records of one or more run directories (idempotent)")
    add.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    add_command_options(add, "history add")
    add.set_defaults(func=cmd_add)

    show = actions.add_parser("show", help="each metric per run, with the change vs the previous run and the median")
    add_command_options(show, "history show")
    show.set_defaults(func=cmd_show)

    changes = actions.add_parser("changes", help="change points per variant: the run where each new level started")
    add_command_options(changes, "history changes")
    changes.set_defaults(func=cmd_changes)

    listing = actions.add_parser("list", help="show stored runs")
    add_command_options(listing, "history list")
    listing.set_defaults(func=cmd_list)
