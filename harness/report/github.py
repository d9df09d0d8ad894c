"""The GitHub Actions job summary: ``summary.md`` appended to ``$GITHUB_STEP_SUMMARY``.

GitHub renders that file on the run's page, so a reviewer sees the gate's verdicts without
downloading the artifact. The file is shared by every step of the job (appended, never
replaced) and GitHub refuses a summary over 1 MiB, so a long summary is cut with a note.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "GITHUB_STEP_SUMMARY"
#: GitHub's limit is 1 MiB per step; leave room for other steps' text
LIMIT_BYTES = 900 * 1024


def append_step_summary(markdown: str, out_dir: Path) -> Path | None:
    """Append ``markdown`` to ``$GITHUB_STEP_SUMMARY`` when set (best effort: a job summary is a
    convenience, the results are in ``out_dir`` whatever happens here)."""
    target = os.environ.get(ENV)
    if not target:
        return None
    data = markdown.encode("utf-8")
    if len(data) > LIMIT_BYTES:
        cut = data[:LIMIT_BYTES].decode("utf-8", errors="ignore").rsplit("\n", 1)[0]
        markdown = cut + f"\n\n… cut at {LIMIT_BYTES // 1024} KiB; the whole summary is {Path(out_dir) / 'summary.md'}\n"
    try:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(markdown + "\n")
    except OSError:
        return None
    return Path(target)
