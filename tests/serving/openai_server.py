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

import time
import urllib.request
from pathlib import Path

from tests.serving.mlserver import Server, Unavailable, free_port
from tests.serving.venv_server import launch, venv_python
from tests.waiting import PATIENCE

ENV = "HARNESS_LITSERVE_PYTHON"
REQUIRE_ENV = "HARNESS_REQUIRE_LITSERVE"
SCRIPT = Path(__file__).with_name("litserve_llm.py")


def python() -> str:
    return venv_python(ENV, ".litserve-venv", "litserve torch transformers")


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
            return answer.read().strip() == b"ok"
    except OSError:
        return False


def start(root: Path, models: dict[str, Path], budget_s: float = PATIENCE) -> Server:
    """LitServe serving ``models`` (name -> transformers model directory); returns once healthy."""
    port = free_port()
    argv = [python(), str(SCRIPT), *(f"--serve={name}={path}" for name, path in models.items()), f"--port={port}"]

    def ready(server: Server) -> None:
        deadline = time.monotonic() + budget_s
        while not _healthy(port):
            if server.process.poll() is not None:
                raise Unavailable(f"LitServe exited with {server.process.returncode}: {server.tail()}")
            if time.monotonic() > deadline:
                raise Unavailable(f"LitServe not healthy after {budget_s:.0f} s: {server.tail()}")
            time.sleep(0.2)

    return launch(argv, root, (port, port), "LitServe", ready)
