"""``summary.md``: what a release engineer reads first. Renders records; computes nothing new."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.report.checks import format_checks
from harness.results import VERDICTS, Record, Verdict

SUMMARY_FILE = "summary.md"
#: verdict order in counts: the ones that need attention first
ORDER: tuple[Verdict, ...] = ("pass", "fail", "error", "skip")
assert set(ORDER) == set(VERDICTS)


def render_summary(records: Iterable[Record | Mapping[str, Any]], title: str = "Model deployment gate") -> str:
    recs = [Record.coerce(r) for r in records]
    counts = Counter(r.verdict for r in recs)
    env = recs[0].env if recs else {}
    versions = env.get("versions", {})
    lines = [f"# {title}", ""]
    status = "FAILED" if any(r.failed for r in recs) else "PASSED"
    lines.append(f"**{status}** — {len(recs)} cases: " + ", ".join(
        f"{counts.get(v, 0)} {v}" for v in ORDER))
    lines.append("")
    if env:
        lines.append(f"Environment: {env.get('cpu', '?')}, {env.get('cores', '?')} cores, "
                     + ", ".join(f"{k} {v}" for k, v in versions.items()) + f" (fingerprint `{env.get('fingerprint')}`)")
        lines.append("")
    lines += ["| case | verdict | worst checks | reason |", "|---|---|---|---|"]
    for r in sorted(recs, key=lambda r: (r.suite or "", r.id)):
        reason = r.reason.splitlines()[0][:160] if r.reason else ""
        lines.append(f"| `{r.id}` | {r.verdict} | {format_checks(r)} | {_md(reason)} |")
    failed = [r for r in recs if r.failed]
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
    pairs = [r for r in recs if r.data.get("worst_pairs")]
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


def write_summary(out_dir: Path, records: Iterable[Record | Mapping[str, Any]]) -> Path:
    path = Path(out_dir) / SUMMARY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_summary(records), encoding="utf-8")
    return path
