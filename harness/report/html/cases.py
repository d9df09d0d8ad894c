"""Failures and errors first, each with what a reviewer needs to act: the failed checks (metric,
value, threshold), the worst element, the worst sentences with their differing characters
marked, the rerun command and links to the batch the run saved. Then every case in one table.
The markup is in ``templates/failures.html.j2`` and ``cases.html.j2`` (autoescape on); this
module picks and orders what they show."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.report.checks import reason_line
from harness.report.html.diff import highlight
from harness.report.html.grid import SEVERITY, anchor
from harness.report.html.headline import format_number, headline
from harness.report.html.templating import render
from harness.report.memory import gb, peak_bytes
from harness.report.text import printable
from harness.results import Record
from harness.results.sections import Evidence, Generation, Judged


def _text(value: Any) -> str:
    """A record's value as printable text (the template escapes it)."""
    return printable(str(value if value is not None else ""), keep_newlines=True)


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
        from harness.case.collector import case_dir_name

        case_dir = run_dir / "cases" / case_dir_name(record.id)
        shown = {h for _, h in out}
        for f in sorted(case_dir.glob("*")) if case_dir.is_dir() else []:
            href = _href(f, report_dir)
            if f.is_file() and href not in shown:
                out.append((f.name, href))
    return out


def _checks(record: Record) -> dict[str, Any]:
    """The failing checks first, then passing ones up to six rows; ``more``: the passing ones left out."""
    checks = sorted(record.checks(), key=lambda c: (c.passed, c.subject, c.metric))
    failing = [c for c in checks if not c.passed]
    shown = failing + [c for c in checks if c.passed][: max(0, 6 - len(failing))]
    return {"rows": [{"passed": c.passed, "subject": _text(c.subject), "metric": _text(c.metric),
                      "value": c.text().value, "op": _text(c.op), "threshold": c.text().threshold}
                     for c in shown],
            "more": len(checks) - len(shown)}


def _worst(record: Record) -> list[tuple[str, str]]:
    worst = Judged.of(record).worst
    if not worst:
        return []
    failing_subjects = {c.subject.replace("/", ".") for c in record.checks() if not c.passed}
    items = [(k, v) for k, v in worst.items() if k in failing_subjects] or list(worst.items())[:3]
    return [(_text(k), _text(v)) for k, v in items]


def _pairs(record: Record) -> list[dict[str, Any]]:
    """The worst sentences, their differing tokens marked (``diff.highlight``: escaped markup)."""
    out = []
    for p in Generation.of(record).worst_pairs:
        ref, got = highlight(printable(str(p.get("pytorch") or "")), printable(str(p.get("variant") or "")))
        out.append({"index": _text(p.get("index", "")), "source": _text(p.get("source")), "reference": ref,
                    "variant": got, "edits": _text(p.get("edit_distance", ""))})
    return out


def _forensics(record: Record) -> list[dict[str, Any]]:
    """The divergent step of the worst sentences (``data.generation_forensics``): both sides' top-k
    side by side, the variant's chosen token and the reference's top-1 marked, and the near-tie call."""
    out = []
    for e in Generation.of(record).forensics:
        ref, var = e.get("reference") or {}, e.get("variant") or {}
        marked = {ref.get("chosen"), var.get("chosen")}

        def cell(tops: list[Any], i: int, marked: set[Any] = marked) -> dict[str, Any] | None:
            if i >= len(tops):
                return None
            c = tops[i]
            return {"id": _text(c.get("id")), "token": _text(c.get("token")), "marked": c.get("id") in marked,
                    "logit": format_number(c.get("logit")), "logprob": format_number(c.get("logprob"))}

        ref_top, var_top = list(ref.get("top") or []), list(var.get("top") or [])
        out.append({"index": _text(e.get("index")), "step": _text(e.get("step")), "ref_chosen": _text(ref.get("chosen")),
                    "var_chosen": _text(var.get("chosen")), "margin": format_number(e.get("reference_margin")),
                    "tie": "near-tie" if e.get("near_tie") else "clear decision",
                    "near_tie_margin": _text(e.get("near_tie_margin")), "logit_error": format_number(e.get("logit_error")),
                    "rows": [(cell(ref_top, i), cell(var_top, i)) for i in range(max(len(ref_top), len(var_top)))]})
    return out


def render_failures(records: list[Record], run_dir: Path | None, report_dir: Path | None) -> str:
    """One card per failing/erroring case, worst first (``templates/failures.html.j2``)."""
    failed = sorted((r for r in records if r.failed), key=lambda r: (SEVERITY.get(r.verdict, 9), r.id))
    cards = [{"verdict": r.verdict, "anchor": anchor(r.id), "id": _text(r.id), "reason": _text(r.reason.strip()),
              "checks": _checks(r), "worst": _worst(r), "pairs": _pairs(r), "forensics": _forensics(r),
              "rerun": _text(r.rerun) if r.rerun else "",
              "files": [(_text(label), href) for label, href in _files(r, run_dir, report_dir)]} for r in failed]
    return render("failures.html.j2", cards=cards)


def _peak(record: Record) -> str:
    """The case's peak resident memory (``harness.report.memory``), empty when not recorded."""
    peak = peak_bytes(record)
    return gb(peak) if peak is not None else ""


def render_case_table(records: list[Record]) -> str:
    """Every case, worst first (``templates/cases.html.j2``); a failing case's anchor is its card."""
    rows = []
    for r in sorted(records, key=lambda r: (SEVERITY.get(r.verdict, 9), r.suite or "", r.id)):
        h = headline(r)
        rows.append({"anchor": "" if r.failed else anchor(r.id), "verdict": r.verdict, "id": _text(r.id),
                     "metric": _text(h.metric) if h else "", "value": h.value_text if h else "",
                     "threshold": h.gate_text if h else "", "seconds": f"{r.duration_s:.2f}", "peak": _peak(r),
                     "reason": _text(reason_line(r)[:200])})
    return render("cases.html.j2", rows=rows)
