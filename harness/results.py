"""Results records: one JSON object per case, appended to ``<out>/results.jsonl``.

Appended (under a file lock, flushed and fsynced) as each case finishes, so an interrupted
run keeps everything that finished. Readers ignore fields they don't know; the ``schema``
field versions the format (see docs/results-schema.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator

from filelock import FileLock

SCHEMA = "harness.result/1"
VERDICTS = ("pass", "fail", "skip", "error")
RESULTS_FILE = "results.jsonl"


class ResultsWriter:
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / RESULTS_FILE
        self._lock: FileLock | None = None

    def append(self, record: dict) -> None:
        if self._lock is None:  # created on first record: a session without cases leaves no dir
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._lock = FileLock(str(self.path) + ".lock")
        line = json.dumps(record, sort_keys=False, default=_json_default, allow_nan=True)
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _json_default(value: object) -> object:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    return str(value)


class ResultsFileError(ValueError):
    """results.jsonl is missing or has a corrupt line; the message names file and line."""


def read_records(path: Path, *, strict: bool = False) -> list[dict]:
    return list(iter_records(path, strict=strict))


def iter_records(path: Path, *, strict: bool = False) -> Iterator[dict]:
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    if not path.is_file():
        raise ResultsFileError(f"{path}: no such results file")
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                if strict:
                    raise ResultsFileError(f"{path}:{number}: corrupt JSON ({exc.msg})") from None
                continue  # a line cut by an interrupted write; the rest is still good
            if isinstance(record, dict):
                yield record


def latest_records(records: Iterable[dict]) -> list[dict]:
    """The last record per case id, in file order (a rerun into the same directory supersedes)."""
    records = list(records)
    last = {str(r["id"]): i for i, r in enumerate(records) if "id" in r}
    return [r for i, r in enumerate(records) if "id" not in r or last[str(r["id"])] == i]
