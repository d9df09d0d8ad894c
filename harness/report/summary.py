"""``summary.md``: what a release engineer reads first. Renders records; computes nothing new."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.core.interrupts import Interruption
from harness.report.checks import format_checks
from harness.results import VERDICTS, Record

SUMMARY_FILE = "summary.md"
#: verdict order in counts: the ones that need attention first
ORDER = ("pass", "fail", "error", "skip")
assert set(ORDER) == set(VERDICTS)
#: not-run case ids listed in an interrupted run's summary (the rest are counted)
NOT_RUN_LISTED = 50


def status_line(records: list[Record], interruption: Interruption | None = None) -> str:
    """The first thing read: PASSED, FAILED or INTERRUPTED (never PASSED for a run cut short)."""
    counts = Counter(r.verdict for r in records)
    tally = ", ".join(f"{counts.get(v, 0)} {v}" for v in ORDER)
    if interruption is not None and not interruption.expected and not records:
        return f"INTERRUPTED by {interruption.signal} — stopped before the cases were collected; 0 finished"
    if interruption is not None:
        failed = " (FAILED among them)" if any(r.failed for r in records) else ""
        return (f"INTERRUPTED by {interruption.signal} — {len(interruption.not_run)} case(s) not run; "
                f"{len(records)} finished{failed}: {tally}")
    status = "FAILED" if any(r.failed for r in records) else "PASSED"
    return f"{status} — {len(records)} cases: {tally}"


def render_summary(records: Iterable[Record | Mapping[str, Any]], title: str = "Model deployment gate", *,
                   interruption: Interruption | None = None) -> str:
    records = [Record.coerce(r) for r in records]
    env = records[0].env if records else {}
    versions = env.get("versions", {})
    lines = [f"# {title}", ""]
    head, sep, rest = status_line(records, interruption).partition(" — ")
    lines.append(f"**{head}**{sep}{rest}")
    lines.append("")
    if interruption is not None:
        lines.append(f"The run was stopped (exit {interruption.exit_code}). The {len(records)} finished case(s) below "
                     "are kept in results.jsonl; the ones not run are listed under *Not run*. A rerun into the same "
                     "directory runs every selected case again, and each case's newest record supersedes the older "
                     "one (docs/reliability-interrupts.md).")
        lines.append("")
    if env:
        lines.append(f"Environment: {env.get('cpu', '?')}, {env.get('cores', '?')} cores, "
                     + ", ".join(f"{k} {v}" for k, v in versions.items()) + f" (fingerprint `{env.get('fingerprint')}`)")
        lines.append("")
    lines += ["| case | verdict | worst checks | reason |", "|---|---|---|---|"]
    for r in sorted(records, key=lambda r: (r.suite or "", r.id)):
        reason = r.reason.splitlines()[0][:160] if r.reason else ""
        lines.append(f"| `{r.id}` | {r.verdict} | {format_checks(r)} | {_md(reason)} |")
    failed = [r for r in records if r.failed]
    if failed:
        lines += ["", "## Failures", ""]
        for r in failed:
            lines.append(f"### `{r.id}` ({r.verdict})")
            lines.append("")
            lines.append("```")
            lines.append(r.reason.strip())
            lines.append("```")
            worst = r.data.get("worst") or {}
            for output, where in worst.items():
                lines.append(f"- worst element of `{output}`: {where}")
            lines.append("")
    if interruption is not None and interruption.not_run:
        lines += ["", "## Not run", ""]
        lines += [f"- `{_md(nodeid.split('::')[-1])}`" for nodeid in interruption.not_run[:NOT_RUN_LISTED]]
        if len(interruption.not_run) > NOT_RUN_LISTED:
            lines.append(f"- … and {len(interruption.not_run) - NOT_RUN_LISTED} more")
        lines.append("")
    pairs = [r for r in records if r.data.get("worst_pairs")]
    if pairs:
        lines += ["", "## Worst sentences per generation case", ""]
        for r in pairs:
            lines.append(f"### `{r.id}`")
            lines += ["", "| # | source | reference | PyTorch | variant | edit |", "|---|---|---|---|---|---|"]
            for p in r.data["worst_pairs"]:
                lines.append(f"| {p.get('index', '')} | {_md(p.get('source'))} | {_md(p.get('reference'))} | "
                             f"{_md(p.get('pytorch'))} | {_md(p.get('variant'))} | {p.get('edit_distance')} "
                             f"({p.get('norm_edit_distance', 0):.2f}) |")
            lines.append("")
    return "\n".join(lines) + "\n"


def _md(text: object) -> str:
    """One table cell: pipes escaped, control characters (random-weight models decode raw
    bytes such as ESC) shown as ``\\xNN`` escapes so the file stays text."""
    raw = str(text if text is not None else "").replace("\n", " ")
    cleaned = "".join(c if c.isprintable() or c == " " else f"\\x{ord(c):02x}" for c in raw)
    return cleaned.replace("|", "\\|")


def write_summary(out_dir: Path, records: Iterable[Record | Mapping[str, Any]], *,
                  interruption: Interruption | None = None) -> Path:
    path = Path(out_dir) / SUMMARY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_summary(records, interruption=interruption), encoding="utf-8")
    return path
