"""``summary.md``: what a release engineer reads first. Renders records; computes nothing new."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Sequence

from harness.report.checks import format_checks

SUMMARY_FILE = "summary.md"


def render_summary(records: Sequence[dict], title: str = "Model deployment gate") -> str:
    counts = Counter(r.get("verdict") for r in records)
    env = records[0].get("env", {}) if records else {}
    versions = env.get("versions", {})
    lines = [f"# {title}", ""]
    status = "FAILED" if counts.get("fail") or counts.get("error") else "PASSED"
    lines.append(f"**{status}** — {len(records)} cases: " + ", ".join(
        f"{counts.get(v, 0)} {v}" for v in ("pass", "fail", "error", "skip")))
    lines.append("")
    if env:
        lines.append(f"Environment: {env.get('cpu', '?')}, {env.get('cores', '?')} cores, "
                     + ", ".join(f"{k} {v}" for k, v in versions.items()) + f" (fingerprint `{env.get('fingerprint')}`)")
        lines.append("")
    lines += ["| case | verdict | worst checks | reason |", "|---|---|---|---|"]
    for r in sorted(records, key=lambda r: (r.get("suite") or "", r.get("id") or "")):
        reason = (r.get("reason") or "").splitlines()[0][:160] if r.get("reason") else ""
        lines.append(f"| `{r.get('id')}` | {r.get('verdict')} | {format_checks(r)} | {_md(reason)} |")
    failed = [r for r in records if r.get("verdict") in ("fail", "error")]
    if failed:
        lines += ["", "## Failures", ""]
        for r in failed:
            lines.append(f"### `{r.get('id')}` ({r.get('verdict')})")
            lines.append("")
            lines.append("```")
            lines.append(str(r.get("reason") or "").strip())
            lines.append("```")
            worst = (r.get("data") or {}).get("worst") or {}
            for output, where in worst.items():
                lines.append(f"- worst element of `{output}`: {where}")
            lines.append("")
    pairs = [r for r in records if (r.get("data") or {}).get("worst_pairs")]
    if pairs:
        lines += ["", "## Worst sentences per generation case", ""]
        for r in pairs:
            lines.append(f"### `{r.get('id')}`")
            lines += ["", "| # | source | reference | PyTorch | variant | edit |", "|---|---|---|---|---|---|"]
            for p in r["data"]["worst_pairs"]:
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


def write_summary(out_dir: Path, records: Sequence[dict]) -> Path:
    path = Path(out_dir) / SUMMARY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_summary(records), encoding="utf-8")
    return path
