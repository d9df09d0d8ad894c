"""Where output goes by default: ``reports/<kind>-<local time>``, ``reports/baselines`` and
``reports/history.sqlite``.

Declared once for every command that writes a directory (``harness run``, the pytest plugin,
``harness check``, ``merge``, ``bisect``); they wrote the pattern themselves five times (and the
history database's path was written twice).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

#: the directory every default output lives under, relative to where the command runs
REPORTS = Path("reports")
#: where baselines live unless ``--baseline-store`` says otherwise
BASELINE_STORE = REPORTS / "baselines"
#: the history database unless ``--history-db`` / ``$HARNESS_HISTORY_DB`` says otherwise (``harness.results.history``)
HISTORY_DB = REPORTS / "history.sqlite"
#: environment variable naming the history database (a path or URL), so a team sets it once in CI
HISTORY_DB_ENV = "HARNESS_HISTORY_DB"


def history_db(given: str | os.PathLike[str] | None = None) -> str:
    """The history database a command uses: the one it was given (``--history-db``),
    else ``$HARNESS_HISTORY_DB``, else ``reports/history.sqlite``. Every command and function that
    reads or writes the history resolves it here (``baseline save --history-db`` once ignored the
    variable that ``harness history`` honoured)."""
    if given is not None and str(given):
        return str(given)
    return os.environ.get(HISTORY_DB_ENV) or str(HISTORY_DB)


#: how a command's history-database option describes its default
HISTORY_DB_HELP = f"default: ${HISTORY_DB_ENV} or {HISTORY_DB}"


def default_run_dir(kind: str = "run", root: Path | None = None) -> Path:
    """``[root/]reports/<kind>-YYYYmmdd-HHMMSS`` (local time, second resolution)."""
    return (root / REPORTS if root is not None else REPORTS) / time.strftime(f"{kind}-%Y%m%d-%H%M%S")
