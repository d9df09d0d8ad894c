"""The report page: verdict banner, overview grid, failures first, performance plots, trends,
every case. One self-contained file: inline CSS, inline SVG, no script, no external asset; the
shell is ``templates/report.html.j2`` (Jinja2, autoescape on: every string from a record is
escaped where it is placed; the sections are the other renderers' markup)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from harness.metrics.registry import METRICS
from harness.report.coverage import html as coverage_html
from harness.report.html.cases import render_case_table, render_failures
from harness.report.html.grid import render_grid
from harness.report.html.headline import headline
from harness.report.html.perf import render_perf
from harness.report.html.templating import markup, render
from harness.report.html.trends import render_trends
from harness.report.summary import ORDER, status_line
from harness.results import Record
from harness.results.notrun import not_run_records
from harness.results.record import run_green
from harness.results.runheader import RunHeader

if TYPE_CHECKING:  # pragma: no cover
    from harness.core.interrupts import Interruption

CSS = """
body { font-family: system-ui, -apple-system, sans-serif; margin: 0 1.5em 2em; color: #1d1d1f; }
h1 { font-size: 1.4em; margin: .6em 0 .2em; } h2 { margin-top: 1.4em; border-bottom: 1px solid #ddd; }
nav a { margin-right: 1em; }
.banner { padding: .8em 1em; border-radius: 6px; font-size: 1.15em; font-weight: 600; margin: .6em 0; }
.banner.passed { background: #d7f5dd; border: 1px solid #4caf50; }
.banner.failed { background: #f8d0d0; border: 1px solid #d32f2f; }
.banner.empty { background: #eee; border: 1px solid #999; }
.counts span { margin-right: 1.2em; }
table { border-collapse: collapse; font-size: 13px; margin: .4em 0; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.grid td.cell { min-width: 11em; }
table.grid a.case { display: block; color: inherit; text-decoration: none; font-size: 12px; }
table.grid a.case:hover { text-decoration: underline; }
.v-pass { background: #d7f5dd; } .v-fail { background: #f8d0d0; } .v-error { background: #f4b6b6; }
.v-skip { background: #fcefc7; } .v-not-run { background: #e9d3f5; } td.empty { color: #aaa; text-align: center; }
table.grid a.case.v-pass, table.grid a.case.v-skip { background: none; }
.badge { padding: 1px 6px; border-radius: 4px; font-size: .8em; border: 1px solid #999; }
article.failure { border: 1px solid #d32f2f; border-left-width: 6px; border-radius: 4px; padding: .3em 1em;
                  margin: .8em 0; background: #fff; }
pre { background: #f7f7f7; padding: .5em; overflow-x: auto; white-space: pre-wrap; word-break: break-word; }
tr.bad td { background: #fde4e4; }
del { background: #ffc9c9; text-decoration: line-through; } ins { background: #b9f0c2; text-decoration: none; }
td.text { font-family: ui-monospace, monospace; max-width: 28em; }
figure.plot { margin: .6em 0; } figure.plot svg { max-width: 100%; height: auto; }
figcaption { font-size: 12px; color: #555; }
.muted { color: #777; } .env { color: #555; font-size: 13px; }
.env b { font-weight: 600; color: #333; }
table.variants td, table.variants th { white-space: nowrap; }
table.variants td.verdict { white-space: normal; min-width: 8em; max-width: 24em; }
"""


def trend_metrics(records: Iterable[Record]) -> list[tuple[str, str]]:
    """(variant, history metric name) of each case's headline number, for the trend plots."""
    out = []
    for r in records:
        h = headline(r)
        if h is None or not r.variant:
            continue
        spec = METRICS.get(h.metric)
        if h.key.startswith("perf.") and spec is not None and spec.reading is not None:
            path = [p for p in spec.reading.paths[0] if p != "summary"]
            out.append((r.variant, "perf:" + ".".join(path)))
        else:
            out.append((r.variant, f"metric:{h.key}"))
    return out


def banner_state(records: list[Record], interruption: Interruption | None = None) -> str:
    """``passed``/``failed``/``empty``: the rule summary.md's status line and the exit code follow
    (``run_green``: an all-skipped run is failed), never a rule of the page's own."""
    if not records:
        return "empty"
    return "failed" if interruption or not run_green(r.verdict for r in records) else "passed"


def render_report(records: Iterable[Record], *, title: str = "model deployment gate", run_dir: Path | None = None,
                  report_path: Path | None = None, history_db: str | Path | None = None,
                  extra_sections: Iterable[str] = (), interruption: Interruption | None = None) -> str:
    recs = list(records)
    unfinished = not_run_records(interruption)  # the grid and the tally count what never ran
    report_dir = report_path.parent if report_path is not None else None
    sections = [render_grid(recs + unfinished), render_failures(recs, run_dir, report_dir), render_perf(recs, run_dir)]
    if history_db is not None:
        sections.append(render_trends(history_db, trend_metrics(recs)))
    sections += list(extra_sections)

    sections.append(coverage_html(recs))
    sections.append(render_case_table(recs))
    shown = [s for s in sections if s]
    nav = [s for s in ("overview", "failures", "perf", "trends", "coverage", "cases") if f'id="{s}"' in "".join(shown)]
    state = banner_state(recs, interruption)
    counts = Counter(r.verdict for r in recs)
    counts["not-run"] += len(unfinished)
    return render("report.html.j2", title=title, css=markup(CSS), state=state,
                  status=status_line(recs, interruption=interruption), tally=[(v, counts.get(v, 0)) for v in ORDER],
                  header=RunHeader.of(recs).parts() if recs else None, nav=nav, sections=[markup(s) for s in shown])
