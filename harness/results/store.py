"""``<run dir>/results.jsonl``: one strict-JSON record per line, appended as each case finishes.

Appended under a file lock, flushed and fsynced, so an interrupted run (even SIGKILL) keeps every
case that finished and xdist workers never interleave lines. Lines are strict JSON (non-finite
floats as ``"NaN"``/``"Infinity"``/``"-Infinity"``, see ``jsonsafe``) so any JSON parser reads them;
files from before that rule (bare ``NaN`` tokens) still load here.

Two reading paths: ``read_typed``/``iter_typed`` give ``Record`` objects; ``read_records``/
``iter_records`` give plain dicts (the numeric fields decoded the same way) for code that predates
the type.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from filelock import FileLock

from harness.core.hooks import record_hooks
from harness.core.writable import DiskFull, no_space
from harness.results.jsonsafe import dumps
from harness.results.record import Record, RecordError, RecordLike, decode_record

if TYPE_CHECKING:  # pragma: no cover
    from harness.core.writable import DiskFull

RESULTS_FILE = "results.jsonl"
#: disk space a run directory sets aside for its last records and summary (``ResultsWriter``)
RESERVE_FILE = ".harness-reserve"
RESERVE_BYTES = 1 << 20


class ResultsFileError(ValueError):
    """results.jsonl is missing or has a corrupt line; the message names file and line."""


def record_line(record: RecordLike, **kwargs: Any) -> str:
    """One record as one line of strict JSON (no newline)."""
    return dumps(record.to_dict() if isinstance(record, Record) else dict(record), **kwargs)


class ResultsWriter:
    """Appends records to ``out_dir/results.jsonl`` (the directory is made on the first record,
    so a session without cases leaves none).

    With the first record it sets aside ``reserve_bytes`` of disk (``.harness-reserve``): when
    the filesystem fills up later (another job's files, a huge dump), the record that hit
    ENOSPC is cut back off the file, the reserve is given back and the record written again,
    so the run still ends with every record and a summary that says the disk is full
    (``full``); the caller stops the run then. ``release`` removes the reserve at the end."""

    def __init__(self, out_dir: Path | str, reserve_bytes: int = 0) -> None:
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / RESULTS_FILE
        self._lock: FileLock | None = None
        self.reserve_bytes = reserve_bytes
        self.reserve = self.out_dir / RESERVE_FILE
        #: the first ENOSPC met (``harness.core.writable.DiskFull``), None while there is room
        self.full: DiskFull | None = None

    def append(self, record: RecordLike) -> None:
        """Append one record; raises ``DiskFull`` when it could not be written even with the
        reserve given back (the file then holds exactly the records before it)."""
        line = record_line(record_hooks(record.to_dict() if isinstance(record, Record) else dict(record)))
        if self._lock is None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._lock = FileLock(str(self.path) + ".lock")
            self._set_aside()
        with self._lock:
            try:
                self._write(line)
            except DiskFull as exc:
                self.full = self.full or exc
                if not self.release():
                    raise
                self._write(line)  # the reserve's room; raises DiskFull again when that is not enough

    def _write(self, line: str) -> None:
        size = self.path.stat().st_size if self.path.exists() else 0
        try:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            if not no_space(exc):
                raise
            _truncate(self.path, size)  # a half-written line would hide the records before it
            raise DiskFull(self.path, exc.strerror or "No space left on device") from None

    def _set_aside(self) -> None:
        if not self.reserve_bytes:
            return
        try:
            with self.reserve.open("wb") as fh:
                fh.write(b"\0" * self.reserve_bytes)  # real blocks (a sparse file would free nothing)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError:  # already too full to set anything aside: the first record will say so
            self.reserve.unlink(missing_ok=True)

    def release(self) -> bool:
        """Give the reserve back to the filesystem; False when there was none."""
        try:
            self.reserve.unlink()
            return True
        except OSError:
            return False


def _truncate(path: Path, size: int) -> None:
    """Cut ``path`` back to ``size`` bytes (what it held before a failed append); best effort."""
    try:
        with path.open("r+b") as fh:
            fh.truncate(size)
    except OSError:
        pass


def write_records(path: Path, records: Iterable[RecordLike], *, sort_keys: bool = False) -> None:
    """A whole file of records at once (a baseline's copy), strict JSON like the writer's."""
    with Path(path).open("w", encoding="utf-8") as fh:
        fh.writelines(record_line(record, sort_keys=sort_keys) + "\n" for record in records)


def _lines(path: Path, strict: bool) -> Iterator[tuple[Path, int, Any]]:
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
                raw = json.loads(line)  # bare NaN/Infinity of older files accepted
            except json.JSONDecodeError as exc:
                if strict:
                    raise ResultsFileError(f"{path}:{number}: corrupt JSON ({exc.msg})") from None
                continue  # a line cut by an interrupted write; the rest is still good
            yield path, number, raw


def iter_records(path: Path | str, *, strict: bool = False) -> Iterator[dict[str, Any]]:
    """Each record of a results file (or run directory) as a dict, numeric fields decoded
    (lines that are not JSON objects skipped: this path stays as tolerant as it always was)."""
    for _, _, raw in _lines(Path(path), strict):
        if isinstance(raw, dict):
            yield decode_record(raw)


def read_records(path: Path | str, *, strict: bool = False) -> list[dict[str, Any]]:
    return list(iter_records(path, strict=strict))


def iter_typed(path: Path | str, *, strict: bool = False) -> Iterator[Record]:
    """Each record as a ``Record``. A line no schema version wrote (not a JSON object, another schema,
    no id, unknown verdict, a metric that is not a number) is a ``ResultsFileError`` naming file and
    line in both modes: it is not an interrupted write."""
    for file, number, raw in _lines(Path(path), strict):
        try:
            yield Record.from_dict(raw)
        except RecordError as exc:
            raise ResultsFileError(f"{file}:{number}: {exc}") from None


def read_typed(path: Path | str, *, strict: bool = False) -> list[Record]:
    return list(iter_typed(path, strict=strict))


R = TypeVar("R", Record, Mapping[str, Any], dict[str, Any])


def _case_id(record: RecordLike) -> str | None:
    if isinstance(record, Record):
        return record.id
    return str(record["id"]) if "id" in record else None


def latest_records(records: Iterable[R]) -> list[R]:
    """The last record per case id, in file order (a rerun into the same directory supersedes)."""
    listed = list(records)
    last = {cid: i for i, r in enumerate(listed) if (cid := _case_id(r)) is not None}
    return [r for i, r in enumerate(listed) if (cid := _case_id(r)) is None or last[cid] == i]
