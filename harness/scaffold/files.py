"""Writing the scaffold: all or nothing, never over a file that exists unless forced."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.core import UsageError
from harness.core.writable import ensure_writable_file


@dataclass(frozen=True)
class Planned:
    """One file ``harness init`` writes: its path, its full text, and whether it appends to a
    file that may exist (``.gitignore``: entries are added, nothing is replaced)."""

    path: Path
    text: str
    append: bool = False


def write_all(planned: list[Planned], *, force: bool) -> list[str]:
    """Write every planned file, or none: existing files (other than appended ones) are a
    ``UsageError`` naming them unless ``force``; every target is checked writable first.
    Returns one line per file for the user."""
    clashes = [p.path for p in planned if not p.append and p.path.exists()]
    if clashes and not force:
        names = ", ".join(str(c) for c in clashes)
        raise UsageError(f"{names}: already exists; nothing written (harness init --force replaces it)")
    for p in planned:
        ensure_writable_file(p.path, str(p.path))
    lines = []
    for p in planned:
        p.path.parent.mkdir(parents=True, exist_ok=True)
        if p.append:
            lines.append(_append(p))
            continue
        existed = p.path.exists()
        p.path.write_text(p.text, encoding="utf-8")
        lines.append(f"{'replaced' if existed else 'wrote'} {p.path}")
    return lines


def _append(p: Planned) -> str:
    """Add the lines of ``p.text`` that the file lacks (compared line by line, stripped)."""
    current = p.path.read_text(encoding="utf-8") if p.path.exists() else ""
    have = {line.strip() for line in current.splitlines()}
    missing = [line for line in p.text.splitlines() if line.strip() and line.strip() not in have]
    entries = [line for line in missing if not line.startswith("#")]
    if not entries:
        return f"{p.path}: already ignores {', '.join(line for line in p.text.splitlines() if not line.startswith('#'))}"
    prefix = "" if not current or current.endswith("\n") else "\n"
    with p.path.open("a", encoding="utf-8") as fh:
        fh.write(prefix + "\n".join(missing) + "\n")
    return f"added to {p.path}: {', '.join(entries)}"
