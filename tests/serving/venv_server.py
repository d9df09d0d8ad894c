"""What every server of the serving tests shares: a virtualenv of its own found through an
environment variable (or a folder of the checkout), a subprocess on free ports of 127.0.0.1 whose
output goes to a log, started in its own session (stopped with its children), waited for by
polling, a test module's way of requiring it (CI) or skipping without it, and a module's server
that each test finds serving (:class:`Relaunching`)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.serving.mlserver import ROOT, Server, Unavailable
from tests.waiting import PATIENCE


def venv_python(env: str, folder: str, packages: str) -> str:
    """``$env`` (a venv's python), else ``<checkout>/<folder>/bin/python``, else ``Unavailable``."""
    given = os.environ.get(env)
    if given:
        if not Path(given).is_file():
            raise Unavailable(f"{env}={given}: no such file")
        return given
    local = ROOT / folder / "bin" / "python"
    if local.is_file():
        return str(local)
    raise Unavailable(f"set {env} to the python of a venv with {packages}, or create {folder} "
                      f"(python3 -m venv {folder} && {folder}/bin/pip install {packages})")


def launch(argv: list[str], root: Path, ports: tuple[int, int], label: str,
           ready: Callable[[Server], None], home: Path | None = None) -> Server:
    """Start ``argv`` (its log ``root/<label>.log``, without the project on PYTHONPATH, ``HOME``
    moved to ``home`` when given) and return once ``ready(server)`` returned; a failure stops it."""
    root.mkdir(parents=True, exist_ok=True)
    log = root / f"{label.lower()}.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1", **({"HOME": str(home)} if home else {})}
    env.pop("PYTHONPATH", None)  # the server imports its own venv's packages, nothing of the project's
    with log.open("wb") as out:
        process = subprocess.Popen(argv, cwd=root, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    server = Server(process, root, ports[0], ports[1], log)
    try:
        ready(server)
    except BaseException:
        server.stop()
        raise
    return server


def required(start: Callable[[], Server], require_env: str, label: str) -> Server:
    """``start()``; without the server, fail when ``require_env`` is 1 (CI), else skip saying why."""
    try:
        return start()
    except Unavailable as exc:
        if os.environ.get(require_env) == "1":
            pytest.fail(f"{require_env}=1 but no {label}: {exc}")
        pytest.skip(f"no {label} here: {exc}")


def check(argv: list[str], out: Path, capsys: Any) -> tuple[int, str, dict[str, dict[str, Any]]]:
    """``harness check ARGV --out OUT``: exit code, everything printed, the records by suite."""
    from harness.cli import main

    code = main(["check", *argv, "--out", str(out)])
    captured = capsys.readouterr()
    results = out / "results.jsonl"
    records = [json.loads(x) for x in results.read_text().splitlines()] if results.exists() else []
    return code, captured.out + captured.err, {r["suite"]: r for r in records}


def refuses_connections(server: Server) -> bool:
    """The server's process exited or its HTTP port refuses a connection (a server that is merely
    slow still accepts, so load never reads as death)."""
    if server.process.poll() is not None:
        return True
    try:
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=PATIENCE):
            return False
    except ConnectionRefusedError:
        return True


class Relaunching:
    """A test module's third-party server that each test finds serving.

    The real servers (Triton through pytriton, MLServer) are other people's processes: on a
    shared CI runner one stopped once mid-test, every later request refused, and the module's
    next test failed on the corpse too. ``judged`` runs a check; when the server refuses
    connections afterwards, the server died, not the verdict: its log is kept beside the test's
    output, a warning says so in pytest's summary, a fresh server is started and the check runs
    once more, whose result is returned. A second death is returned as it is (the test fails,
    the first server's log kept, the second's tail in its message), so a harness that kills
    servers cannot hide behind the retry.
    """

    def __init__(self, start: Callable[[], Server], label: str) -> None:
        self._start, self.label = start, label
        self.server = start()

    def serving(self) -> Server:
        if refuses_connections(self.server):
            self.server.stop()
            self.server = self._start()
        return self.server

    def judged(self, argv: Callable[[Server], list[str]], out: Path,
               capsys: Any) -> tuple[int, str, dict[str, dict[str, Any]]]:
        """``check(argv(server), out)``, once more on a fresh server when the server died during it."""
        code, text, suites = check(argv(self.serving()), out, capsys)
        if not refuses_connections(self.server):
            return code, text, suites
        kept = out.with_name(out.name + f"-{self.label.lower()}-died.log")
        if self.server.log.exists():
            shutil.copy(self.server.log, kept)
        warnings.warn(f"{self.label} died during the check (its log: {kept}); judged again on a fresh server",
                      stacklevel=2)
        return check(argv(self.serving()), out.with_name(out.name + "-again"), capsys)

    def stop(self) -> None:
        self.server.stop()
