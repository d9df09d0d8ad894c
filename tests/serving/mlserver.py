"""A real MLServer on 127.0.0.1 for the serving tests, serving harness-built ONNX artifacts.

MLServer pins many packages (protobuf, fastapi, ...), so it lives in a virtualenv of its own:
``HARNESS_MLSERVER`` names its ``mlserver`` executable (CI's ``.ci/run`` creates the venv and
exports it); otherwise ``.mlserver-venv/bin/mlserver`` in the checkout. The server is a
subprocess: started on free ports, waited for by polling its ready endpoint (never a fixed
sleep), stopped (SIGTERM, then SIGKILL) when the tests end. Where no server can be had,
``unavailable`` says why; with ``HARNESS_REQUIRE_MLSERVER=1`` (CI) the tests fail instead of
skipping, so CI cannot pass without having run them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.waiting import PATIENCE

ENV = "HARNESS_MLSERVER"
REQUIRE_ENV = "HARNESS_REQUIRE_MLSERVER"
RUNTIME = Path(__file__).with_name("onnx_runtime.py")
ROOT = Path(__file__).resolve().parents[2]


class Unavailable(Exception):
    pass


def executable() -> str:
    given = os.environ.get(ENV)
    if given:
        if not Path(given).is_file():
            raise Unavailable(f"{ENV}={given}: no such file")
        return given
    local = ROOT / ".mlserver-venv" / "bin" / "mlserver"
    if local.is_file():
        return str(local)
    raise Unavailable(f"no MLServer: set {ENV} to an mlserver executable or create .mlserver-venv "
                      "(python3 -m venv .mlserver-venv && .mlserver-venv/bin/pip install mlserver onnxruntime)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServedFile:
    name: str
    onnx: Path
    precision: str | None = None  # declared in the metadata parameters
    version: str = "1"  # a second version of a name is a folder of its own (MLServer serves both)
    max_batch_size: int = 0  # MLServer's adaptive batching: 0 = off
    max_batch_time: float = 0.0
    #: the runtime's injected faults (fail_every, slow_every + slow_s, exit_after): tests/serving/onnx_runtime.py
    faults: dict[str, Any] | None = None


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    root: Path
    http_port: int
    grpc_port: int
    log: Path

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc(self) -> str:
        return f"grpc://127.0.0.1:{self.grpc_port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def write_repository(root: Path, models: list[ServedFile]) -> None:
    """MLServer's layout: ``settings.json`` and one folder per model with ``model-settings.json``."""
    for m in models:
        folder = root / (m.name if m.version == "1" else f"{m.name}-v{m.version}")
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(m.onnx, folder / "model.onnx")
        settings: dict[str, Any] = {"name": m.name, "implementation": "onnx_runtime.OnnxModel",
                                    "parameters": {"uri": str(folder / "model.onnx"), "version": m.version,
                                                   "extra": {**({"precision": m.precision} if m.precision else {}),
                                                             **(m.faults or {})}}}
        if m.max_batch_size:
            settings.update(max_batch_size=m.max_batch_size, max_batch_time=m.max_batch_time)
        (folder / "model-settings.json").write_text(json.dumps(settings, indent=1))
    shutil.copy(RUNTIME, root / "onnx_runtime.py")


def start(root: Path, models: list[ServedFile], budget_s: float = PATIENCE) -> Server:
    """Start MLServer serving ``models``; returns once every model is ready (polled; the process
    exiting ends the wait at once, so the bound is only for a server that hangs: ``PATIENCE``,
    as every wait in the tests -- a fixed 180 s was a bet on the machine's load)."""
    exe = executable()
    write_repository(root, models)
    http_port, grpc_port = free_port(), free_port()
    (root / "settings.json").write_text(json.dumps({
        "host": "127.0.0.1", "http_port": http_port, "grpc_port": grpc_port, "metrics_port": free_port(),
        "parallel_workers": 0, "metrics_endpoint": None, "debug": False, "load_models_at_startup": True}))
    log = root / "mlserver.log"
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1", "MLSERVER_PARALLEL_WORKERS": "0"}
    env.pop("PYTHONHOME", None)
    with log.open("wb") as out:
        process = subprocess.Popen([exe, "start", str(root)], cwd=root, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    server = Server(process, root, http_port, grpc_port, log)
    try:
        wait(server, [m.name for m in models], budget_s)
    except BaseException:
        server.stop()
        raise
    return server


def wait(server: Server, names: list[str], budget_s: float, label: str = "MLServer", url: str | None = None) -> None:
    """Every model of ``names`` ready (polled) at ``url`` (the HTTP endpoint unless given: pass
    ``server.grpc`` to wait for the gRPC port too, which a server may open after its HTTP one),
    or ``Unavailable`` with the server's log tail."""
    from harness.serving.client import wait_ready
    from harness.settings.endpoint import parse_endpoint

    deadline = time.monotonic() + budget_s
    for name in names:
        endpoint = parse_endpoint(url or server.http, [name])
        while True:
            if server.process.poll() is not None:
                raise Unavailable(f"{label} exited with {server.process.returncode}: {server.tail()}")
            if wait_ready(endpoint, name, budget_s=min(2.0, max(0.1, deadline - time.monotonic()))):
                break
            if time.monotonic() > deadline:
                raise Unavailable(f"{label}: {name} not ready after {budget_s:.0f} s: {server.tail()}")


def start_or_skip(root: Path, models: list[ServedFile]) -> Server:
    """``start``, or skip the test with the reason (fail instead where ``REQUIRE_ENV=1``: CI)."""
    from tests.serving.venv_server import required  # it imports this module

    return required(lambda: start(root, models), REQUIRE_ENV, "MLServer")
