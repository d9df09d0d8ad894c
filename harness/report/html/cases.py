"""Failures and errors first, each with what a reviewer needs to act: the failed checks (metric,
value, threshold), the worst element, the worst sentences with their differing characters
marked, the rerun command and links to the batch the run saved. Then every case in one table."""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Any

from harness.report.html.diff import highlight
from harness.report.html.grid import SEVERITY, anchor
from harness.report.html.headline import format_number, headline
from harness.report.text import printable
from harness.results import Record
from harness.results.sections import Evidence, Generation, Judged


def _text(value: Any) -> str:
    return escape(printable(str(value if value is not None else ""), keep_newlines=True))


def locate(path: str, run_dir: Path | None) -> Path | None:
    """A side file a record names: where it was written, or the same file under ``run_dir``
    (a merged or copied run directory)."""
    p = Path(path)
    if p.is_file():
        return p
    if run_dir is not None:
        if "cases" in p.parts:  # cases/<case>/<...>: the same relative path under the moved run
            at = len(p.parts) - 1 - p.parts[::-1].index("cases")
            moved = run_dir.joinpath(*p.parts[at:])
            if moved.is_file():
                return moved
        moved = run_dir / "cases" / p.parent.name / p.name
        if moved.is_file():
            return moved
    return None


def _href(target: Path, report_dir: Path | None) -> str:
    if report_dir is None:
        return target.resolve().as_uri()
    return os.path.relpath(target.resolve(), report_dir.resolve()).replace(os.sep, "/")


def _files(record: Record, run_dir: Path | None, report_dir: Path | None) -> list[tuple[str, str]]:
    """(label, href) of the case's saved files: failing batches, repro bundles (``harness repro``),
    decoded text, the case directory."""
    named: dict[str, str] = {}
    evidence = Evidence.of(record)
    named.update({f"failing batch of {graph}": path for graph, path in evidence.failing_batches.items()})
    named.update({f"repro bundle of {graph} (harness repro DIR)": str(Path(path) / "bundle.json")
                  for graph, path in evidence.repro_bundles.items()})
    decoded = Generation.of(record).decoded
    if decoded:
        named["decoded sentences"] = decoded
    out = []
    for label, path in named.items():
        found = locate(path, run_dir)
        if found is not None:
            out.append((label, _href(found, report_dir)))
    if run_dir is not None:
        from harness.results.collector import case_dir_name

        case_dir = run_dir / "cases" / case_dir_name(record.id)
        shown = {h for _, h in out}
        for f in sorted(case_dir.glob("*")) if case_dir.is_dir() else []:
            href = _href(f, report_dir)
            if f.is_file() and href not in shown:
                out.append((f.name, href))
    return out


def _checks_table(record: Record) -> str:
    checks = sorted(record.checks(), key=lambda c: (c.passed, c.subject, c.metric))
    if not checks:
        return ""
    failing = [c for c in checks if not c.passed]
    shown = failing + [c for c in checks if c.passed][: max(0, 6 - len(failing))]
    rows = "".join(
        f'<tr class="{"bad" if not c.passed else "ok"}"><td>{_text(c.subject)}</td><td>{_text(c.metric)}</td>'
        f"<td class=\"num\">{format_number(c.value)}</td><td>{_text(c.op)} {format_number(c.threshold, 6)}</td>"
        f"<td>{'FAIL' if not c.passed else 'ok'}</td></tr>" for c in shown)
    more = len(checks) - len(shown)
    tail = f"<p class=\"muted\">{more} more passing check(s) not shown</p>" if more > 0 else ""
    return ("<table class=\"checks\"><thead><tr><th>output</th><th>metric</th><th>value</th><th>threshold</th>"
            f"<th></th></tr></thead><tbody>{rows}</tbody></table>{tail}")


def _worst(record: Record) -> str:
    worst = Judged.of(record).worst
    if not worst:
        return ""
    failing_subjects = {c.subject.replace("/", ".") for c in record.checks() if not c.passed}
    items = [(k, v) for k, v in worst.items() if k in failing_subjects] or list(worst.items())[:3]
    return "<ul class=\"worst\">" + "".join(
        f"<li>worst element of <code>{_text(k)}</code>: {_text(v)}</li>" for k, v in items) + "</ul>"


def _pairs(record: Record) -> str:
    pairs = Generation.of(record).worst_pairs
    if not pairs:
        return ""
    rows = []
    for p in pairs:
        ref, got = highlight(printable(str(p.get("pytorch") or "")), printable(str(p.get("variant") or "")))
        rows.append(f"<tr><td>{_text(p.get('index', ''))}</td><td>{_text(p.get('source'))}</td>"
                    f"<td class=\"text\">{ref}</td><td class=\"text\">{got}</td>"
                    f"<td class=\"num\">{_text(p.get('edit_distance', ''))}</td></tr>")
    return ("<table class=\"pairs\"><thead><tr><th>#</th><th>source</th><th>PyTorch</th><th>variant</th>"
            f"<th>edits</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _forensics(record: Record) -> str:
    """The divergent step of the worst sentences (``data.generation_forensics``): both sides' top-k
    side by side, the variant's chosen token and the reference's top-1 marked, and the near-tie call."""
    entries = Generation.of(record).forensics
    if not entries:
        return ""
    parts = []
    for e in entries:
        ref, var = e.get("reference") or {}, e.get("variant") or {}
        marked = {ref.get("chosen"), var.get("chosen")}

        def cell(c: Any, marked: set[Any] = marked) -> str:
            text = f"{_text(c.get('id'))} <code>{_text(c.get('token'))}</code>"
            text = f"<b>{text}</b>" if c.get("id") in marked else text
            return (f"<td>{text}</td><td class=\"num\">{format_number(c.get('logit'))}</td>"
                    f"<td class=\"num\">{format_number(c.get('logprob'))}</td>")

        ref_top, var_top = list(ref.get("top") or []), list(var.get("top") or [])
        rows = "".join(
            f"<tr><td>{i + 1}</td>{cell(ref_top[i]) if i < len(ref_top) else '<td></td>' * 3}"
            f"{cell(var_top[i]) if i < len(var_top) else '<td></td>' * 3}</tr>"
            for i in range(max(len(ref_top), len(var_top))))
        tie = "near-tie" if e.get("near_tie") else "clear decision"
        parts.append(
            f"<p>sentence {_text(e.get('index'))}, step {_text(e.get('step'))}: the reference scored its token "
            f"{_text(ref.get('chosen'))} above the variant's {_text(var.get('chosen'))} by "
            f"{format_number(e.get('reference_margin'))} logits (<b>{tie}</b>, threshold "
            f"{_text(e.get('near_tie_margin'))}); largest logit error there {format_number(e.get('logit_error'))}</p>"
            "<table class=\"forensics\"><thead><tr><th>rank</th><th>PyTorch token</th><th>logit</th>"
            "<th>log-prob</th><th>variant token</th><th>logit</th><th>log-prob</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")
    return "<div class=\"forensics\"><p>first divergent step (teacher-forced on the common prefix):</p>" + "".join(
        parts) + "</div>"


def render_failures(records: list[Record], run_dir: Path | None, report_dir: Path | None) -> str:
    failed = sorted((r for r in records if r.failed), key=lambda r: (SEVERITY.get(r.verdict, 9), r.id))
    if not failed:
        return '<section id="failures"><h2>Failures</h2><p class="muted">none</p></section>'
    cards = []
    for r in failed:
        files = _files(r, run_dir, report_dir)
        links = ("<p>saved: " + ", ".join(f'<a href="{escape(h)}">{_text(label)}</a>' for label, h in files) + "</p>"
                 if files else "")
        rerun = f"<p>rerun:</p><pre class=\"rerun\">{_text(r.rerun)}</pre>" if r.rerun else ""
        cards.append(
            f'<article class="failure v-{escape(r.verdict)}" id="{anchor(r.id)}" data-case="{escape(r.id)}">'
            f"<h3><span class=\"badge v-{escape(r.verdict)}\">{escape(r.verdict.upper())}</span> {_text(r.id)}</h3>"
            f"<pre class=\"reason\">{_text(r.reason.strip())}</pre>{_checks_table(r)}{_worst(r)}{_pairs(r)}{_forensics(r)}"
            f"{rerun}{links}</article>")
    return f'<section id="failures"><h2>Failures and errors ({len(failed)})</h2>{"".join(cards)}</section>'


def _peak(record: Record) -> str:
    """The case's peak resident memory (``harness.report.memory``), empty when not recorded."""
    from harness.report.memory import gb, peak_bytes

    peak = peak_bytes(record)
    return escape(gb(peak)) if peak is not None else ""


def render_case_table(records: list[Record]) -> str:
    ordered = sorted(records, key=lambda r: (SEVERITY.get(r.verdict, 9), r.suite or "", r.id))
    rows = []
    for r in ordered:
        h = headline(r)
        ident = "" if r.failed else f' id="{anchor(r.id)}"'
        rows.append(
            f'<tr{ident} class="v-{escape(r.verdict)}" data-case="{escape(r.id)}"><td>{_text(r.id)}</td>'
            f"<td>{escape(r.verdict)}</td><td>{_text(h.metric) if h else ''}</td>"
            f"<td class=\"num\">{format_number(h.value) if h else ''}</td>"
            f"<td>{_text(f'{h.op} {format_number(h.threshold, 6)}') if h and h.threshold is not None else ''}</td>"
            f"<td class=\"num\">{r.duration_s:.2f}</td><td class=\"num\">{_peak(r)}</td>"
            f"<td>{_text(r.first_reason_line[:200])}</td></tr>")
    return ('<section id="cases"><h2>All cases</h2><table class="cases"><thead><tr><th>case</th><th>verdict</th>'
            "<th>headline metric</th><th>value</th><th>threshold</th><th>s</th><th>peak RSS</th><th>reason</th>"
            "</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>")
