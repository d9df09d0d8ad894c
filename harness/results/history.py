"""Nightly trending: an append-only SQLite store of each run's key numbers.

A run directory is cleaned up eventually, and a baseline compares only two runs; the history
keeps one row per (run, case, number) forever, so a slow drift over weeks is visible.
Ingesting is idempotent per ``run_id``: re-adding a run (or a glob that matches old runs
again, as the nightly job does) stores nothing twice. Schema: docs/history.md.
"""

from __future__ import annotations

import fnmatch
import math
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:  # pandas is imported where a trend is computed: `harness --help` must not pay for it
    import pandas as pd

from harness.core import UsageError, did_you_mean
from harness.gate.baseline import read_results
from harness.results import Record

DEFAULT_DB = Path("reports/history.sqlite")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, finished TEXT, fingerprint TEXT, harness_version TEXT,
    source TEXT, ingested TEXT, cases INTEGER
);
CREATE TABLE IF NOT EXISTS cases (
    run_id TEXT NOT NULL REFERENCES runs(run_id), id TEXT NOT NULL, variant TEXT, suite TEXT,
    verdict TEXT, reason TEXT, finished TEXT, PRIMARY KEY (run_id, id)
);
CREATE TABLE IF NOT EXISTS metric_values (
    run_id TEXT NOT NULL REFERENCES runs(run_id), id TEXT NOT NULL, variant TEXT, metric TEXT NOT NULL,
    value REAL, PRIMARY KEY (run_id, id, metric)
);
CREATE INDEX IF NOT EXISTS metric_values_by_series ON metric_values (variant, metric);
"""


#: every table's columns, in order: what a database must hold to be taken for ours
_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("run_id", "finished", "fingerprint", "harness_version", "source", "ingested", "cases"),
    "cases": ("run_id", "id", "variant", "suite", "verdict", "reason", "finished"),
    "metric_values": ("run_id", "id", "variant", "metric", "value"),
}
#: the schema objects (tables, indexes, including SQLite's automatic primary-key indexes) a history holds
_OBJECTS = (*_COLUMNS, "metric_values_by_series")


class HistoryError(UsageError):
    """The history database is missing, unreadable, or the query names nothing stored."""


@dataclass(frozen=True)
class Ingested:
    run_id: str
    source: str
    cases: int
    values: int
    added: bool  # False: this run_id was already stored, nothing was written


def _connect(db: Path, *, create: bool) -> sqlite3.Connection:
    db = Path(db)
    if db.is_dir():
        raise HistoryError(f"history database {db} is a directory; pass a file path with --db")
    if not db.exists():
        if not create:
            siblings = [str(p) for p in db.parent.glob("*.sqlite")] if db.parent.is_dir() else []
            raise HistoryError(f"no history database at {db}{did_you_mean(str(db), siblings)}; "
                               "create it with `harness history add RUN_DIR`")
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(f"cannot create history database {db}: {exc.strerror or exc}") from None
    try:
        conn = sqlite3.connect(db)
        _check_ours(conn, db)  # before anything is written: another application's file stays untouched
        conn.executescript(_SCHEMA)
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"{db} is not a usable history database ({exc})") from None
    return conn


def _check_ours(conn: sqlite3.Connection, db: Path) -> None:
    """Refuse (``HistoryError``, nothing written) a database that holds anything but the
    history's tables with their columns: an empty file or a fresh one is ours to create, a
    history database of this or an earlier version is ours to use, anything else is not."""
    found = {name: sql for name, sql in conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")}
    if not found:
        return
    foreign = sorted(set(found) - set(_OBJECTS))
    if foreign:
        conn.close()
        raise HistoryError(f"{db} is not a harness history database (it holds {', '.join(foreign[:3])}"
                           f"{' ...' if len(foreign) > 3 else ''}); pass another file with --db")
    for table, columns in _COLUMNS.items():
        have = tuple(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
        if have and have != columns:
            conn.close()
            raise HistoryError(f"{db} is not a harness history database (table {table} has columns "
                               f"{', '.join(have)}); pass another file with --db")


def _run_groups(records: list[Record]) -> Iterator[tuple[str, list[Record]]]:
    """Records grouped by the pytest session that wrote them (a rerun into the same
    directory is its own run, with its own run_id)."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(r.run_id, []).append(r)
    yield from groups.items()


def _numbers(record: Record) -> dict[str, float]:
    """The record's numbers as the reports flatten them (imported on ingest: the report tables need pandas)."""
    from harness.report.tables import record_numbers

    return record_numbers(record)


def ingest(run_dir: str | Path, db: str | Path = DEFAULT_DB) -> list[Ingested]:
    """Store every record of ``run_dir`` (the last one per case id); one transaction per run,
    so an interrupted ingest leaves either the whole run or none of it."""
    records = read_results(run_dir)
    if not records:
        raise UsageError(f"{Path(run_dir)} has no records to store")
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    out = []
    with closing(_connect(Path(db), create=True)) as conn:
        for run_id, group in _run_groups(records):
            if not run_id:
                raise UsageError(f"{Path(run_dir)}: a record has no run_id (not a harness.result/1 file?)")
            if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
                out.append(Ingested(run_id, str(run_dir), len(group), 0, added=False))
                continue
            finished = max(r.finished for r in group)
            fingerprint = next((r.env.get("fingerprint") for r in group if r.env), None)
            values = [(run_id, r.id, r.variant, metric, None if math.isnan(v) else v)
                      for r in group for metric, v in _numbers(r).items()]
            with conn:  # one transaction
                conn.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (run_id, finished, fingerprint, group[0].harness_version or None,
                              str(Path(run_dir).resolve()), now, len(group)))
                conn.executemany("INSERT INTO cases VALUES (?, ?, ?, ?, ?, ?, ?)",
                                 [(run_id, r.id, r.variant, r.suite, r.verdict, r.first_reason_line,
                                   r.finished or None) for r in group])
                conn.executemany("INSERT OR REPLACE INTO metric_values VALUES (?, ?, ?, ?, ?)", values)
            out.append(Ingested(run_id, str(run_dir), len(group), len(values), added=True))
    return out


def runs(db: str | Path = DEFAULT_DB) -> pd.DataFrame:
    """Stored runs, oldest first, with case counts per verdict."""
    import pandas as pd

    with closing(_connect(Path(db), create=False)) as conn:
        return pd.read_sql_query(
            """SELECT r.run_id, r.finished, r.fingerprint, r.cases,
                      SUM(c.verdict = 'pass') AS pass, SUM(c.verdict = 'fail') AS fail,
                      SUM(c.verdict = 'error') AS error, SUM(c.verdict = 'skip') AS skip, r.source
               FROM runs r LEFT JOIN cases c USING (run_id)
               GROUP BY r.run_id ORDER BY r.finished, r.run_id""", conn)


def trend(db: str | Path = DEFAULT_DB, variant: str | None = None, metric_glob: str = "*",
          last: int | None = None) -> pd.DataFrame:
    """Wide table: one row per run (index ``(finished, run_id)``, oldest first; only runs that
    have a matching value), one column per ``(variant, metric)``. A metric measured by two
    cases of one variant in one run is averaged. ``last`` keeps the newest N runs."""
    import pandas as pd

    if last is not None and last < 1:
        raise HistoryError(f"--last must be at least 1, got {last}")
    with closing(_connect(Path(db), create=False)) as conn:
        long = pd.read_sql_query(
            """SELECT r.finished, v.run_id, v.variant, v.metric, v.value
               FROM metric_values v JOIN runs r USING (run_id)""", conn)
    if variant is not None:
        known = sorted(set(long["variant"].dropna()))
        if variant not in known:
            raise HistoryError(f"unknown variant {variant!r}{did_you_mean(variant, known)}; "
                               f"{len(known)} variant(s) stored")
        long = long[long["variant"] == variant]
    metrics = sorted(set(long["metric"]))
    selected = [m for m in metrics if fnmatch.fnmatchcase(m, metric_glob)]
    if not selected:
        raise HistoryError(f"no stored metric matches {metric_glob!r}{did_you_mean(metric_glob, metrics)}")
    long = long[long["metric"].isin(selected)]
    wide = long.pivot_table(index=["finished", "run_id"], columns=["variant", "metric"], values="value",
                            aggfunc="mean", dropna=False).sort_index()
    wide = wide.dropna(axis=1, how="all").dropna(how="all")  # NaN-only series say nothing
    return wide.tail(last) if last else wide


def changes(series: pd.Series) -> pd.DataFrame:
    """Per run: the value, relative change vs the previous run that has a value, and vs the
    median of the window. Relative, because a 2 ms shift means nothing without the scale."""
    import pandas as pd

    values = series.astype(float)
    previous = values.ffill().shift(1)
    median = values.median()
    return pd.DataFrame({
        "value": values,
        "vs_previous": _relative(values, previous),
        "vs_median": _relative(values, pd.Series(median, index=values.index)),
    })


def _relative(values: pd.Series, reference: pd.Series) -> pd.Series:

    ref = reference.where(reference != 0)
    return values / ref - 1.0
