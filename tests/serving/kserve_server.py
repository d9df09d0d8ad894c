"""The real KServe model server (PyPI ``kserve``) on 127.0.0.1, serving ONNX files through a
custom predictor (tests/serving/kserve_predictor.py), for the serving tests.

KServe pins fastapi, protobuf, grpcio and more than the project's venv allows, so it lives in a
virtualenv of its own: ``HARNESS_KSERVE_PYTHON`` names its python (CI's ``.ci/run`` creates
``.kserve-venv`` in the background and exports it); otherwise ``.kserve-venv/bin/python`` in the
checkout. Started on free ports, waited for by polling its ready endpoint, stopped as MLServer
is (tests/serving/mlserver.py). With ``HARNESS_REQUIRE_KSERVE=1`` (CI) a missing server fails
the tests instead of skipping them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.serving.mlserver import ROOT, Server, Unavailable, free_port, wait
from tests.waiting import PATIENCE

ENV = "HARNESS_KSERVE_PYTHON"
REQUIRE_ENV = "HARNESS_REQUIRE_KSERVE"
PREDICTOR = Path(__file__).with_name("kserve_predictor.py")


def python() -> str:
    given = os.environ.get(ENV)
    if given:
        if not Path(given).is_file():
            raise Unavailable(f"{ENV}={given}: no such file")
        return given
    local = ROOT / ".kserve-venv" / "bin" / "python"
    if local.is_file():
        return str(local)
    raise Unavailable(f"no KServe: set {ENV} to the python of a venv with kserve and onnxruntime, or create "
                      ".kserve-venv (python3 -m venv .kserve-venv && .kserve-venv/bin/pip install kserve onnxruntime)")


def start(root: Path, models: dict[str, Path], *, publish_metadata: tuple[str, ...] = (), refuse_binary: bool = False,
          budget_s: float = PATIENCE) -> Server:
    """KServe serving ``models`` (name -> ONNX file; those in ``publish_metadata`` publish their
    tensors), every model ready when this returns."""
    exe = python()
    root.mkdir(parents=True, exist_ok=True)
    http_port, grpc_port = free_port(), free_port()
    argv = [exe, str(PREDICTOR), *(f"--serve={name}={path}" for name, path in models.items()),
            f"--http_port={http_port}", f"--grpc_port={grpc_port}"]
    argv += [f"--publish-metadata={name}" for name in publish_metadata] + ["--refuse-binary"] * refuse_binary
    log = root / "kserve.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)  # the predictor imports kserve from its own venv, nothing of the project's
    with log.open("wb") as out:
        process = subprocess.Popen(argv, cwd=root, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    server = Server(process, root, http_port, grpc_port, log)
    try:
        wait(server, list(models), budget_s, label="KServe")
    except BaseException:
        server.stop()
        raise
    return server
