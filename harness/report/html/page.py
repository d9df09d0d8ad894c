"""The report page: verdict banner, overview grid, failures first, performance plots, trends,
every case. One self-contained file: inline CSS, inline SVG, no script, no external asset; every
string from a record is HTML-escaped where it is placed."""

from __future__ import annotations

from collections import Counter
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from harness.metrics.registry import METRICS
from harness.report.html.cases import render_case_table, render_failures
from harness.report.html.grid import render_grid
from harness.report.html.headline import headline
from harness.report.html.perf import render_perf
from harness.report.summary import ORDER, status_line
from harness.report.text import printable
from harness.results import Record
from harness.results.record import run_green

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
"""


def _banner(records: list[Record], interruption: Interruption | None = None, unfinished: int = 0) -> str:
    state = "empty" if not records else "failed" if interruption or not run_green(r.verdict for r in records) \
        else "passed"  # the rule summary.md's status line and the exit code follow (all skipped: failed)
    counts = Counter(r.verdict for r in records)
    counts["not-run"] += unfinished
    tally = "".join(f'<span class="v-{v}">{counts.get(v, 0)} {v}</span>' for v in ORDER)
    return (f'<div class="banner {state}" id="verdict" data-state="{state}">'
            f'{escape(status_line(records, interruption=interruption))}</div>'
            f'<p class="counts">{tally}</p>')


def _env(records: list[Record]) -> str:
    envs = {r.fingerprint for r in records if r.fingerprint}
    env = next((r.env for r in records if r.env), {})
    if not env:
        return ""
    versions = env.get("versions")
    shown = ", ".join(f"{k} {v}" for k, v in versions.items()) if isinstance(versions, Mapping) else ""
    mixed = f" — {len(envs)} different environments" if len(envs) > 1 else ""
    return (f'<p class="env">{escape(printable(env.get("cpu", "?")))}, {escape(str(env.get("cores", "?")))} cores; '
            f'{escape(printable(shown))} (fingerprint <code>{escape(str(env.get("fingerprint")))}</code>){escape(mixed)}</p>')


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


def render_report(records: Iterable[Record], *, title: str = "model deployment gate", run_dir: Path | None = None,
                  report_path: Path | None = None, history_db: str | Path | None = None,
                  extra_sections: Iterable[str] = (), interruption: Interruption | None = None) -> str:
    from harness.results.notrun import not_run_records

    recs = list(records)
    unfinished = not_run_records(interruption)  # the grid and the tally count what never ran
    report_dir = report_path.parent if report_path is not None else None
    sections = [render_grid(recs + unfinished), render_failures(recs, run_dir, report_dir), render_perf(recs)]
    if history_db is not None:
        from harness.report.html.trends import render_trends

        sections.append(render_trends(history_db, trend_metrics(recs)))
    sections += list(extra_sections)
    from harness.report.coverage import html as coverage_html

    sections.append(coverage_html(recs))
    sections.append(render_case_table(recs))
    nav = "".join(f'<a href="#{s}">{s}</a>' for s in ("overview", "failures", "perf", "trends", "coverage", "cases")
                  if f'id="{s}"' in "".join(sections))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head>\n<body><h1>{escape(title)}</h1>"
            f"{_banner(recs, interruption, len(unfinished))}{_env(recs)}<nav>{nav}</nav>\n" + "\n".join(s for s in sections if s)
            + "\n</body></html>\n")
