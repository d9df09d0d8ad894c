"""A real Triton Inference Server on 127.0.0.1 for the serving tests: the ``tritonserver``
PyPI's ``nvidia-pytriton`` bundles, serving ONNX files through tests/serving/pytriton_models.py.

pytriton pins its own tritonclient, numpy and more: it lives in a virtualenv of its own.
``HARNESS_PYTRITON_PYTHON`` names its python (CI's ``.ci/run`` creates ``.pytriton-venv`` in the
background and exports it); otherwise ``.pytriton-venv/bin/python`` in the checkout. Started on
free ports, waited for by polling its ready endpoint, stopped as MLServer is. With
``HARNESS_REQUIRE_TRITON=1`` (CI) a missing server fails the tests instead of skipping them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.serving.mlserver import ROOT, Server, Unavailable, free_port, wait
from tests.waiting import PATIENCE

ENV = "HARNESS_PYTRITON_PYTHON"
REQUIRE_ENV = "HARNESS_REQUIRE_TRITON"
MODELS = Path(__file__).with_name("pytriton_models.py")


def python() -> str:
    given = os.environ.get(ENV)
    if given:
        if not Path(given).is_file():
            raise Unavailable(f"{ENV}={given}: no such file")
        return given
    local = ROOT / ".pytriton-venv" / "bin" / "python"
    if local.is_file():
        return str(local)
    raise Unavailable(f"no Triton: set {ENV} to the python of a venv with nvidia-pytriton and onnxruntime, or "
                      "create .pytriton-venv (python3 -m venv .pytriton-venv && .pytriton-venv/bin/pip install "
                      "nvidia-pytriton onnxruntime)")


def start(root: Path, models: dict[str, Path], budget_s: float = PATIENCE) -> Server:
    """Triton serving ``models`` (name -> ONNX file), every model ready when this returns."""
    exe = python()
    root.mkdir(parents=True, exist_ok=True)
    http_port, grpc_port = free_port(), free_port()
    argv = [exe, str(MODELS), *(f"--serve={name}={path}" for name, path in models.items()),
            f"--http-port={http_port}", f"--grpc-port={grpc_port}", f"--metrics-port={free_port()}"]
    log = root / "triton.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HOME": str(root)}  # pytriton's workspace under ~/.cache: the test's
    env.pop("PYTHONPATH", None)
    with log.open("wb") as out:
        process = subprocess.Popen(argv, cwd=root, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    server = Server(process, root, http_port, grpc_port, log)
    try:
        wait(server, list(models), budget_s, label="Triton")
    except BaseException:
        server.stop()
        raise
    return server
