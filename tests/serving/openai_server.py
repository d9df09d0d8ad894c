"""A real OpenAI-compatible server on 127.0.0.1 for the serving tests: LitServe (PyPI
``litserve``) serving transformers causal LMs on CPU (tests/serving/litserve_llm.py).

LitServe pins fastapi, uvicorn and pyzmq: it lives in a virtualenv of its own, with CPU torch
and the project's transformers version. ``HARNESS_LITSERVE_PYTHON`` names its python (CI's
``.ci/run`` creates ``.litserve-venv`` in the background and exports it); otherwise
``.litserve-venv/bin/python`` in the checkout. Ready when ``/health`` answers ``ok`` (polled);
stopped as MLServer is. With ``HARNESS_REQUIRE_LITSERVE=1`` (CI) a missing server fails the
tests instead of skipping them.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from pathlib import Path

from tests.serving.mlserver import ROOT, Server, Unavailable, free_port
from tests.waiting import PATIENCE

ENV = "HARNESS_LITSERVE_PYTHON"
REQUIRE_ENV = "HARNESS_REQUIRE_LITSERVE"
SCRIPT = Path(__file__).with_name("litserve_llm.py")


def python() -> str:
    given = os.environ.get(ENV)
    if given:
        if not Path(given).is_file():
            raise Unavailable(f"{ENV}={given}: no such file")
        return given
    local = ROOT / ".litserve-venv" / "bin" / "python"
    if local.is_file():
        return str(local)
    raise Unavailable(f"no LitServe: set {ENV} to the python of a venv with litserve, torch and transformers, or "
                      "create .litserve-venv (python3 -m venv .litserve-venv && .litserve-venv/bin/pip install "
                      "litserve torch transformers)")


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
            return answer.read().strip() == b"ok"
    except OSError:
        return False


def start(root: Path, models: dict[str, Path], budget_s: float = PATIENCE) -> Server:
    """LitServe serving ``models`` (name -> transformers model directory); returns once healthy."""
    exe = python()
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [exe, str(SCRIPT), *(f"--serve={name}={path}" for name, path in models.items()), f"--port={port}"]
    log = root / "litserve.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    with log.open("wb") as out:
        process = subprocess.Popen(argv, cwd=root, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    server = Server(process, root, port, port, log)
    deadline = time.monotonic() + budget_s
    try:
        while not _healthy(port):
            if process.poll() is not None:
                raise Unavailable(f"LitServe exited with {process.returncode}: {server.tail()}")
            if time.monotonic() > deadline:
                raise Unavailable(f"LitServe not healthy after {budget_s:.0f} s: {server.tail()}")
            time.sleep(0.2)
    except BaseException:
        server.stop()
        raise
    return server
