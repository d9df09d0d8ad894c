"""Reading a run directory's records: the one reader every consumer shares.

Here, in the results layer, so the history store, the gate, reports, shards and ``harness
compare`` read runs without importing each other (it lived in ``gate/baseline.py``, which made
``results.history`` import the gate).
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.core import UsageError
from harness.results.record import Record
from harness.results.store import RESULTS_FILE, ResultsFileError, iter_typed, latest_records


class RunDirError(UsageError):
    """A missing or malformed run directory (exit code 2)."""


def read_results(run_dir: str | os.PathLike[str]) -> list[Record]:
    """Every record of ``RUN_DIR/results.jsonl``, the last one per case id when a case was rerun.

    Strict about corrupt lines (the error names the line): numbers about to be
    blessed or gated on deserve a look when the file they came from is damaged.
    """
    run = Path(run_dir)
    if not run.exists():
        raise RunDirError(f"run directory not found: {run}")
    if not run.is_dir():
        raise RunDirError(f"not a run directory: {run}")
    if not (run / RESULTS_FILE).is_file():
        raise RunDirError(f"no {RESULTS_FILE} in {run} (is it a harness run directory?)")
    try:
        records = list(iter_typed(run / RESULTS_FILE, strict=True))
    except ResultsFileError as exc:
        raise RunDirError(str(exc)) from None
    return latest_records(records)
