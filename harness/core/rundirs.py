"""Where output goes by default: ``reports/<kind>-<local time>``, ``reports/baselines`` and
``reports/history.sqlite``.

Declared once for every command that writes a directory (``harness run``, the pytest plugin,
``harness check``, ``merge``, ``bisect``); they wrote the pattern themselves five times (and the
history database's path was written twice).
"""

from __future__ import annotations

import time
from pathlib import Path

#: the directory every default output lives under, relative to where the command runs
REPORTS = Path("reports")
#: where baselines live unless ``--baseline-store`` says otherwise
BASELINE_STORE = REPORTS / "baselines"
#: the history database unless ``--db`` / ``$HARNESS_HISTORY_DB`` says otherwise (``harness.results.history``)
HISTORY_DB = REPORTS / "history.sqlite"


def default_run_dir(kind: str = "run", root: Path | None = None) -> Path:
    """``[root/]reports/<kind>-YYYYmmdd-HHMMSS`` (local time, second resolution)."""
    return (root / REPORTS if root is not None else REPORTS) / time.strftime(f"{kind}-%Y%m%d-%H%M%S")
