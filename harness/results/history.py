"""Nightly trending: an append-only store of each run's key numbers, SQLite or PostgreSQL.

A run directory is cleaned up eventually, and a baseline compares only two runs; the history
keeps one row per (run, case, number) forever, so a slow drift over weeks is visible.
Ingesting is idempotent per ``run_id``: re-adding a run (or a glob that matches old runs
again, as the nightly job does) stores nothing twice, also when several machines add at the
same moment (the ``runs`` row is inserted with ON CONFLICT DO NOTHING inside the run's one
transaction: the writer that loses stores nothing and says "already stored").

``db`` is a file path (SQLite, the default ``reports/history.sqlite``) or a SQLAlchemy URL
(``postgresql://user@host/db``; the psycopg 3 driver is chosen for you). Schema and
migrations: ``history_schema``; docs/history.md.
"""

from __future__ import annotations

import fnmatch
import math
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from harness.results.numbers import record_numbers

if TYPE_CHECKING:  # pandas is imported where a trend is computed: `harness --help` must not pay for it
    import pandas as pd
    from sqlalchemy.engine import Connection, Engine

from harness.core import UsageError, did_you_mean
from harness.core.rundirs import HISTORY_DB, HISTORY_DB_ENV, history_db
from harness.results import Record
from harness.results.reason import reason_line
from harness.results.rundir import read_results

DEFAULT_DB = HISTORY_DB
#: environment variable naming the default store (a path or URL), so a team sets it once in CI
DB_ENV = HISTORY_DB_ENV


class HistoryError(UsageError):
    """The history database is missing, unreadable, or the query names nothing stored."""


@dataclass(frozen=True)
class Ingested:
    run_id: str
    source: str
    cases: int
    values: int
    added: bool  # False: this run_id was already stored, nothing was written


def default_db() -> str:
    """The store used when none is given (``harness.core.rundirs.history_db``)."""
    return history_db()


def is_url(db: str | Path) -> bool:
    return "://" in str(db)


def describe(db: str | Path) -> str:
    """``db`` as messages name it: a URL without its password."""
    if not is_url(db):
        return str(db)
    from sqlalchemy.engine import make_url

    try:
        return make_url(str(db)).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a malformed URL is reported by _engine
        return str(db).split("@")[-1]


def _url(db: str | Path, *, create: bool) -> str:
    """A SQLAlchemy URL for ``db``; checks a SQLite path the way the file store always did."""
    if is_url(db):
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(str(db))
        except ArgumentError:
            raise HistoryError(f"--history-db {describe(db)}: not a database URL (postgresql://user@host/db) "
                               "or a file path") from None
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")
        if url.get_backend_name() not in ("postgresql", "sqlite"):
            raise HistoryError(f"--history-db {describe(db)}: unsupported database {url.get_backend_name()!r} "
                               "(SQLite file paths and postgresql:// URLs are supported)")
        if url.get_backend_name() == "postgresql":
            try:
                import psycopg  # noqa: F401
            except ImportError:
                raise HistoryError("--history-db postgresql://... needs the psycopg driver: "
                                   "pip install 'model-harness[postgres]'") from None
        return url.render_as_string(hide_password=False)
    path = Path(db)
    if path.is_dir():
        raise HistoryError(f"history database {path} is a directory; pass a file path with --history-db")
    if not path.exists():
        if not create:
            siblings = [str(p) for p in path.parent.glob("*.sqlite")] if path.parent.is_dir() else []
            raise HistoryError(f"no history database at {path}{did_you_mean(str(path), siblings)}; "
                               "create it with `harness history add RUN_DIR`")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(f"cannot create history database {path}: {exc.strerror or exc}") from None
    return f"sqlite:///{path.resolve()}"


def _engine(db: str | Path, *, create: bool) -> Engine:
    from sqlalchemy import create_engine, event

    url = _url(db, create=create)
    if url.startswith("sqlite"):
        # writers queue on the file lock for up to 60 s instead of failing "database is locked";
        # BEGIN IMMEDIATE takes the write lock up front (no deadlock upgrading a read lock)
        engine = create_engine(url, connect_args={"timeout": 60})

        @event.listens_for(engine, "connect")
        def _autocommit_off(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # SQLAlchemy's BEGIN below, not pysqlite's

        @event.listens_for(engine, "begin")
        def _begin_immediate(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return create_engine(url, pool_pre_ping=True)


@contextmanager
def _open(given: str | Path | None, *, create: bool) -> Iterator[Engine]:
    """An engine on a history that exists (and is migrated to the current schema); every
    database error becomes one ``HistoryError`` line naming ``db``. ``given`` None: the
    default store (``history_db``: ``$HARNESS_HISTORY_DB``, else ``reports/history.sqlite``)."""
    from sqlalchemy.exc import SQLAlchemyError

    from harness.results import history_schema as schema

    db = history_db(given)
    engine = _engine(db, create=create)
    try:
        try:
            with engine.begin() as conn:
                found = schema.found_version(conn) if not create else None
                if not create and found is None:
                    raise HistoryError(f"{describe(db)} holds no history yet; create it with `harness history add RUN_DIR`")
                schema.prepare(conn, _now())
        except schema.ForeignDatabase as exc:
            raise HistoryError(f"{describe(db)} is not a harness history database ({exc}); pass another --history-db") from None
        except SQLAlchemyError as exc:
            raise HistoryError(f"{describe(db)} is not a usable history database ({_reason(exc)})") from None
        try:
            yield engine
        except SQLAlchemyError as exc:
            raise HistoryError(f"history database {describe(db)}: {_reason(exc)}") from None
    finally:
        engine.dispose()


def _reason(exc: Exception) -> str:
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split())[:300]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _run_groups(records: list[Record]) -> Iterator[tuple[str, list[Record]]]:
    """Records grouped by the pytest session that wrote them (a rerun into the same
    directory is its own run, with its own run_id)."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(r.run_id, []).append(r)
    yield from groups.items()


def _numbers(record: Record) -> dict[str, float]:
    """The record's numbers as the reports flatten them (imported on ingest: the report tables need pandas)."""
    return record_numbers(record)


def _insert(conn: Connection, table: Any) -> Any:
    """INSERT ... ON CONFLICT DO NOTHING in the connection's dialect."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).on_conflict_do_nothing()
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table).on_conflict_do_nothing()


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def ingest(run_dir: str | Path, db: str | Path | None = None) -> list[Ingested]:
    """Store every record of ``run_dir`` (the last one per case id); one transaction per run,
    so an interrupted ingest leaves either the whole run or none of it, and two writers adding
    the same run at once store it once."""
    from harness.results import history_schema as schema

    records = read_results(run_dir)
    if not records:
        raise UsageError(f"{Path(run_dir)} has no records to store")
    out = []
    with _open(db, create=True) as engine:
        for run_id, group in _run_groups(records):
            if not run_id:
                raise UsageError(f"{Path(run_dir)}: a record has no run_id (not a harness.result/1 file?)")
            values = [{"run_id": run_id, "id": r.id, "variant": r.variant, "metric": metric, "value": _finite(v)}
                      for r in group for metric, v in _numbers(r).items()]
            with engine.begin() as conn:  # one transaction
                claimed = conn.execute(_insert(conn, schema.runs_table).values(
                    run_id=run_id, finished=max(r.finished for r in group),
                    fingerprint=next((r.env.get("fingerprint") for r in group if r.env), None),
                    harness_version=group[0].harness_version or None, source=str(Path(run_dir).resolve()),
                    ingested=_now(), cases=len(group)).returning(schema.runs_table.c.run_id)).first()
                if claimed is None:  # stored before, or by a writer that committed first
                    out.append(Ingested(run_id, str(run_dir), len(group), 0, added=False))
                    continue
                conn.execute(schema.cases_table.insert(), [
                    {"run_id": run_id, "id": r.id, "variant": r.variant, "suite": r.suite, "verdict": r.verdict,
                     "reason": reason_line(r), "finished": r.finished or None,
                     "duration_s": _finite(r.duration_s)} for r in group])
                if values:
                    conn.execute(_insert(conn, schema.values_table), values)
            out.append(Ingested(run_id, str(run_dir), len(group), len(values), added=True))
    return out


def _frame(db: str | Path | None, sql: str) -> pd.DataFrame:
    import pandas as pd
    from sqlalchemy import text

    with _open(db, create=False) as engine, engine.connect() as conn:
        result = conn.execute(text(sql))
        return pd.DataFrame(result.fetchall(), columns=list(result.keys()))


def runs(db: str | Path | None = None) -> pd.DataFrame:
    """Stored runs, oldest first, with case counts per verdict."""
    return _frame(db, """SELECT r.run_id, r.finished, r.fingerprint, r.cases,
                      SUM(CASE WHEN c.verdict = 'pass' THEN 1 ELSE 0 END) AS pass,
                      SUM(CASE WHEN c.verdict = 'fail' THEN 1 ELSE 0 END) AS fail,
                      SUM(CASE WHEN c.verdict = 'error' THEN 1 ELSE 0 END) AS error,
                      SUM(CASE WHEN c.verdict = 'skip' THEN 1 ELSE 0 END) AS skip, r.source
               FROM runs r LEFT JOIN cases c ON c.run_id = r.run_id
               GROUP BY r.run_id, r.finished, r.fingerprint, r.cases, r.source
               ORDER BY r.finished, r.run_id""")


def durations(db: str | Path | None = None) -> dict[str, float]:
    """Each case id's duration in its newest stored run that measured one (for ``--shard`` balancing)."""
    frame = _frame(db, """SELECT c.id, c.duration_s FROM cases c JOIN runs r ON r.run_id = c.run_id
                          WHERE c.duration_s IS NOT NULL ORDER BY r.finished, r.run_id""")
    return {str(i): float(d) for i, d in zip(frame["id"], frame["duration_s"])} if len(frame) else {}


def run_durations(db: str | Path | None = None, last: int = 8) -> list[dict[str, float]]:
    """Each of the newest ``last`` stored runs' case durations (case id -> seconds), newest first:
    the progress display's ETA prices with whichever priced this run's last cases best
    (``harness.plugins.progress``), so a CI job on a fresh checkout has a history too."""
    frame = _frame(db, f"""SELECT c.run_id, c.id, c.duration_s FROM cases c JOIN runs r ON r.run_id = c.run_id
                           WHERE c.duration_s IS NOT NULL AND c.duration_s > 0 AND c.run_id IN
                             (SELECT run_id FROM runs ORDER BY finished DESC, run_id DESC LIMIT {int(last)})
                           ORDER BY r.finished DESC, r.run_id DESC""")
    out: dict[str, dict[str, float]] = {}
    for run_id, case, seconds in zip(frame["run_id"], frame["id"], frame["duration_s"]) if len(frame) else ():
        out.setdefault(str(run_id), {})[str(case)] = float(seconds)
    return list(out.values())


def trend(db: str | Path | None = None, variant: str | None = None, metric_glob: str = "*",
          last: int | None = None) -> pd.DataFrame:
    """Wide table: one row per run (index ``(finished, run_id)``, oldest first; only runs that
    have a matching value), one column per ``(variant, metric)``. A metric measured by two
    cases of one variant in one run is averaged. ``last`` keeps the newest N runs."""
    import pandas as pd

    if last is not None and last < 1:
        raise HistoryError(f"--last must be at least 1, got {last}")
    long = _frame(db, """SELECT r.finished, v.run_id, v.variant, v.metric, v.value
                         FROM metric_values v JOIN runs r ON r.run_id = v.run_id""")
    long["value"] = pd.to_numeric(long["value"], errors="coerce")
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
