"""The history store on a real PostgreSQL server and on SQLite alike: same schema, version table,
migration of an existing harness 0.1 SQLite file, and concurrent writers (shards, nightly machines)
that neither lose nor duplicate a run. The server: tests/pg_server.py (CI starts one in .ci/run)."""

from __future__ import annotations

import json
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import pg_server
import pytest
import sqlalchemy as sa

from harness.cli import main
from harness.results import history
from harness.results.history_schema import VERSION

SCHEMA = "harness.result/1"


def run_dir(root: Path, n: int, cases: int = 3) -> Path:
    """A run directory of ``cases`` cases with run_id ``run<n>``."""
    records = []
    for c in range(cases):
        records.append({"schema": SCHEMA, "id": f"test_logits_parity[m{c}-fp32-ort_cpu]", "run_id": f"run{n}",
                        "suite": "test_logits_parity", "variant": f"m{c}-fp32-ort_cpu", "verdict": "pass",
                        "finished": f"2026-01-{n + 1:02d}T00:00:00+00:00", "duration_s": 1.5 + c,
                        "metrics": {"model.logits.max_abs": 0.001 * n, "model.logits.cosine": 0.99999},
                        "env": {"fingerprint": "fp"}})
    out = root / f"run-{n}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    try:
        gen = pg_server.server()
        url = next(gen)
    except pg_server.Unavailable as exc:
        if os.environ.get(pg_server.REQUIRE_ENV):
            pytest.fail(f"PostgreSQL required ({pg_server.REQUIRE_ENV}=1) but unavailable: {exc}")
        pytest.skip(f"no PostgreSQL server could be started: {exc}")
    yield url
    gen.close()


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[str]:
    yield from pg_server.fresh_database(pg_url)


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    return str(request.getfixturevalue("pg_db"))


def _count(db: str, table: str) -> int:
    engine = sa.create_engine(history._url(db, create=False))
    with engine.connect() as conn:
        value = conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one()
    engine.dispose()
    return int(value)


def test_add_list_show_through_the_cli(db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [run_dir(tmp_path, n) for n in (1, 2, 3)]
    assert main(["history", "add", *map(str, runs), "--history-db", db]) == 0
    assert main(["history", "add", str(runs[1]), "--history-db", db]) == 0  # idempotent
    assert "already stored" in capsys.readouterr().out
    assert (_count(db, "runs"), _count(db, "cases"), _count(db, "metric_values")) == (3, 9, 18)
    stored = history.runs(db)
    assert list(stored["run_id"]) == ["run1", "run2", "run3"] and list(stored["pass"]) == [3, 3, 3]
    wide = history.trend(db, metric_glob="metric:*.max_abs")
    assert list(wide[("m0-fp32-ort_cpu", "metric:model.logits.max_abs")]) == pytest.approx([0.001, 0.002, 0.003])
    assert history.durations(db)["test_logits_parity[m2-fp32-ort_cpu]"] == 3.5
    assert main(["history", "show", "--metric", "metric:*.max_abs", "--history-db", db]) == 0


def test_version_table_says_current(db: str, tmp_path: Path) -> None:
    history.ingest(run_dir(tmp_path, 1), db)
    engine = sa.create_engine(history._url(db, create=False))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version FROM harness_schema")).scalar_one() == VERSION
    engine.dispose()


def test_concurrent_writers_store_every_run_exactly_once(db: str, tmp_path: Path) -> None:
    """8 writers at once on a database nobody created yet: 4 runs, each added by two writers
    (a shard re-adding, two nightly machines). Schema set up once, every run stored once."""
    dirs = [run_dir(tmp_path, n, cases=20) for n in range(4)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda d: history.ingest(d, db), dirs + dirs))
    added = sorted(i.run_id for batch in results for i in batch if i.added)
    skipped = sorted(i.run_id for batch in results for i in batch if not i.added)
    assert added == skipped == [f"run{n}" for n in range(4)]
    assert (_count(db, "runs"), _count(db, "cases"), _count(db, "metric_values")) == (4, 80, 160)
    assert _count(db, "harness_schema") == 1


LEGACY = """
CREATE TABLE runs (run_id TEXT PRIMARY KEY, finished TEXT, fingerprint TEXT, harness_version TEXT,
    source TEXT, ingested TEXT, cases INTEGER);
CREATE TABLE cases (run_id TEXT NOT NULL REFERENCES runs(run_id), id TEXT NOT NULL, variant TEXT, suite TEXT,
    verdict TEXT, reason TEXT, finished TEXT, PRIMARY KEY (run_id, id));
CREATE TABLE metric_values (run_id TEXT NOT NULL REFERENCES runs(run_id), id TEXT NOT NULL, variant TEXT,
    metric TEXT NOT NULL, value REAL, PRIMARY KEY (run_id, id, metric));
INSERT INTO runs VALUES ('old', '2025-12-01T00:00:00+00:00', 'fp', '0.1.0', '/x', '2025-12-01', 1);
INSERT INTO cases VALUES ('old', 'test_logits_parity[m0-fp32-ort_cpu]', 'm0-fp32-ort_cpu', 'test_logits_parity',
    'pass', '', '2025-12-01T00:00:00+00:00');
INSERT INTO metric_values VALUES ('old', 'test_logits_parity[m0-fp32-ort_cpu]', 'm0-fp32-ort_cpu',
    'metric:model.logits.max_abs', 0.0005);
"""


def test_a_harness_0_1_database_is_migrated_keeping_its_data(db: str, tmp_path: Path) -> None:
    """A version-1 store (no version table, no cases.duration_s) written by the old SQLite code."""
    if db.startswith("postgresql"):
        engine = sa.create_engine(history._url(db, create=True))
        with engine.begin() as conn:
            for statement in LEGACY.split(";"):
                if statement.strip():
                    conn.execute(sa.text(statement))
        engine.dispose()
    else:
        with sqlite3.connect(db) as conn:
            conn.executescript(LEGACY)
        conn.close()
    history.ingest(run_dir(tmp_path, 1), db)
    wide = history.trend(db, variant="m0-fp32-ort_cpu", metric_glob="metric:*.max_abs")
    assert list(wide.index.get_level_values("run_id")) == ["old", "run1"]
    assert list(wide.iloc[:, 0]) == pytest.approx([0.0005, 0.001])
    durations = history.durations(db)
    assert durations["test_logits_parity[m0-fp32-ort_cpu]"] == 1.5  # the new column, filled for the new run
    engine = sa.create_engine(history._url(db, create=False))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version FROM harness_schema")).scalar_one() == VERSION
    engine.dispose()


def test_unreachable_server_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = f"postgresql://nobody:secret@/x?host={tmp_path}&port=1"
    assert main(["history", "list", "--history-db", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a usable history database" in err and "secret" not in err
