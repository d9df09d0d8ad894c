"""The history store's schema, its version table and the migrations between versions.

One SQLAlchemy ``MetaData`` serves SQLite (the default file) and PostgreSQL (``--history-db
postgresql://...``), so a team can move from a file on one machine to a shared server without a
second schema to keep in step. ``harness_schema`` holds the version; ``prepare`` brings any
database this or an earlier harness wrote up to ``VERSION`` inside one transaction taken under a
lock (``BEGIN IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL), so several writers starting
at once (shards of one run, nightly machines) migrate it exactly once and never race on
``CREATE TABLE``.

Versions:

* 1 — the SQLite schema of harness 0.1 (``runs``, ``cases``, ``metric_values``), no version table;
* 2 — ``harness_schema`` added; ``cases.duration_s`` (so ``harness run --shard`` can balance shards
  by the durations history remembers).
"""

from __future__ import annotations

from typing import Callable

from sqlalchemy import (
    Column,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    inspect,
    text,
)
from sqlalchemy.engine import Connection

VERSION = 2
#: PostgreSQL advisory lock key for schema setup (any constant: "hist" in ASCII)
_LOCK_KEY = 0x68697374

metadata = MetaData()

schema_table = Table(
    "harness_schema", metadata,
    Column("version", Integer, nullable=False),
    Column("migrated", String(40)),
)
runs_table = Table(
    "runs", metadata,
    Column("run_id", String(200), primary_key=True),
    Column("finished", String(40)),
    Column("fingerprint", String(200)),
    Column("harness_version", String(100)),
    Column("source", Text),
    Column("ingested", String(40)),
    Column("cases", Integer),
)
cases_table = Table(
    "cases", metadata,
    Column("run_id", String(200), nullable=False),
    Column("id", Text, nullable=False),
    Column("variant", Text),
    Column("suite", Text),
    Column("verdict", String(10)),
    Column("reason", Text),
    Column("finished", String(40)),
    Column("duration_s", Float),
    PrimaryKeyConstraint("run_id", "id"),
    ForeignKeyConstraint(["run_id"], ["runs.run_id"]),
)
values_table = Table(
    "metric_values", metadata,
    Column("run_id", String(200), nullable=False),
    Column("id", Text, nullable=False),
    Column("variant", Text),
    Column("metric", Text, nullable=False),
    Column("value", Float),
    PrimaryKeyConstraint("run_id", "id", "metric"),
    ForeignKeyConstraint(["run_id"], ["runs.run_id"]),
)
Index("metric_values_by_series", values_table.c.variant, values_table.c.metric)

#: every version's columns per table: what a database must hold to be taken for ours
COLUMNS: dict[int, dict[str, tuple[str, ...]]] = {
    1: {"runs": ("run_id", "finished", "fingerprint", "harness_version", "source", "ingested", "cases"),
        "cases": ("run_id", "id", "variant", "suite", "verdict", "reason", "finished"),
        "metric_values": ("run_id", "id", "variant", "metric", "value")},
}
COLUMNS[2] = {**COLUMNS[1], "cases": (*COLUMNS[1]["cases"], "duration_s"), "harness_schema": ("version", "migrated")}
KNOWN_TABLES = frozenset(COLUMNS[VERSION])


class ForeignDatabase(Exception):
    """The database holds tables that are not the history's (message: what was found)."""


def _migrate_1_to_2(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE cases ADD COLUMN duration_s FLOAT"))
    schema_table.create(conn)


#: ``from_version -> step`` (each step leaves the database at ``from_version + 1``)
MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _migrate_1_to_2}


def lock(conn: Connection) -> None:
    """Serialise schema setup between writers (SQLite is already serialised by BEGIN IMMEDIATE)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})


def found_version(conn: Connection) -> int | None:
    """The version of the history in ``conn`` (None: an empty database). ``ForeignDatabase`` for
    tables or columns no harness version wrote; nothing is written."""
    inspector = inspect(conn)
    tables = set(inspector.get_table_names())
    if not tables:
        return None
    foreign = sorted(tables - KNOWN_TABLES)
    if foreign:
        raise ForeignDatabase(f"it holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}")
    have = {t: tuple(c["name"] for c in inspector.get_columns(t)) for t in tables}
    for version in sorted(COLUMNS, reverse=True):
        if all(have.get(t) == cols for t, cols in COLUMNS[version].items() if t in have):
            if "harness_schema" in have:
                stored = conn.execute(schema_table.select()).first()
                return int(stored.version) if stored else version
            return version
    table = next(t for t in sorted(have) if all(have[t] != COLUMNS[v].get(t) for v in COLUMNS))
    raise ForeignDatabase(f"table {table} has columns {', '.join(have[table])}")


def prepare(conn: Connection, now: str) -> tuple[int | None, int]:
    """Create or migrate the history in ``conn`` (inside the caller's transaction) to ``VERSION``;
    returns (version found, version now). A database newer than this harness is refused."""
    lock(conn)
    before = found_version(conn)
    if before is None:
        metadata.create_all(conn)
        conn.execute(schema_table.insert().values(version=VERSION, migrated=now))
        return None, VERSION
    if before > VERSION:
        raise ForeignDatabase(f"its schema version {before} is newer than this harness's ({VERSION}); upgrade harness")
    version = before
    while version < VERSION:
        MIGRATIONS[version](conn)
        version += 1
    if before < VERSION:
        conn.execute(schema_table.delete())
        conn.execute(schema_table.insert().values(version=VERSION, migrated=now))
    metadata.create_all(conn, checkfirst=True)  # an index a hand-made copy lacks
    return before, VERSION
