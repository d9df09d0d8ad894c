"""What every server of the serving tests shares: a virtualenv of its own found through an
environment variable (or a folder of the checkout), a subprocess on free ports of 127.0.0.1 whose
output goes to a log, started in its own session (stopped with its children), waited for by
polling, and a test module's way of requiring it (CI) or skipping without it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.serving.mlserver import ROOT, Server, Unavailable


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
