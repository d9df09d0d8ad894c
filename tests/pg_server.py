"""A real PostgreSQL server for the history tests: the one ``HARNESS_TEST_PG_URL`` names (CI's
``.ci/run`` starts one and exports it), else a throwaway cluster started from the Debian package's
binaries in a temp dir (as the ``postgres`` user when running as root: initdb refuses root).

Each caller gets a fresh database on that server, dropped afterwards. Where no server can be had,
``unavailable`` says precisely why; with ``HARNESS_REQUIRE_PG=1`` (set by CI) the tests fail
instead of skipping, so CI can never pass without having run them."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

from waiting import PATIENCE

URL_ENV = "HARNESS_TEST_PG_URL"
REQUIRE_ENV = "HARNESS_REQUIRE_PG"


class Unavailable(Exception):
    pass


def _as_postgres(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    runuser = shutil.which("runuser")
    if runuser is None:
        raise Unavailable("running as root and no runuser to start PostgreSQL as the postgres user")
    return [runuser, "-u", "postgres", "--", *argv]


def start_cluster() -> Iterator[str]:
    """Yields a server URL (postgres superuser over a Unix socket); stops and deletes it after."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    initdb = found[-1] if found else shutil.which("initdb")
    if not initdb:
        raise Unavailable("no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb); "
                          f"install the Debian package postgresql or set {URL_ENV}")
    pg_ctl = str(Path(initdb).with_name("pg_ctl"))
    root = Path(tempfile.mkdtemp(prefix="harness-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", 20000 + os.getpid() % 20000
    try:
        init = subprocess.run(_as_postgres([initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
                              capture_output=True, text=True, timeout=PATIENCE)
        if init.returncode:
            raise Unavailable(f"initdb failed: {(init.stderr or init.stdout).strip().splitlines()[-1:]}")
        start = subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-l", str(root / "log"), "-w", "-t", "60",
                                             "-o", f"-k {root} -p {port} -c listen_addresses='' -c fsync=off",
                                             "start"]), capture_output=True, text=True, timeout=PATIENCE)
        if start.returncode:
            log = (root / "log").read_text(errors="replace") if (root / "log").exists() else start.stderr
            raise Unavailable(f"pg_ctl start failed: {log.strip().splitlines()[-1:]}")
        try:
            yield f"postgresql://postgres@/postgres?host={root}&port={port}"
        finally:
            subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]),
                           capture_output=True, timeout=PATIENCE)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def server() -> Iterator[str]:
    given = os.environ.get(URL_ENV)
    if given:
        yield given
    else:
        yield from start_cluster()


def fresh_database(server_url: str) -> Iterator[str]:
    """A new empty database on the server; its URL. Dropped afterwards."""
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(server_url)
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"harness_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
