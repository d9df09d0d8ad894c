"""A real Triton Inference Server on 127.0.0.1 for the serving tests: the ``tritonserver``
PyPI's ``nvidia-pytriton`` bundles, serving ONNX files through tests/serving/pytriton_models.py.

pytriton pins its own tritonclient, numpy and more: it lives in a virtualenv of its own.
``HARNESS_PYTRITON_PYTHON`` names its python (CI's ``.ci/run`` creates ``.pytriton-venv`` in the
background and exports it); otherwise ``.pytriton-venv/bin/python`` in the checkout. Started on
free ports, waited for by polling its ready endpoint, stopped as MLServer is. With
``HARNESS_REQUIRE_TRITON=1`` (CI) a missing server fails the tests instead of skipping them.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from tests.serving.mlserver import Server, free_port, wait
from tests.serving.venv_server import launch, venv_python
from tests.waiting import PATIENCE

ENV = "HARNESS_PYTRITON_PYTHON"
REQUIRE_ENV = "HARNESS_REQUIRE_TRITON"
MODELS = Path(__file__).with_name("pytriton_models.py")


def python() -> str:
    return venv_python(ENV, ".pytriton-venv", "nvidia-pytriton onnxruntime")


def start(root: Path, models: dict[str, Path], budget_s: float = PATIENCE) -> Server:
    """Triton serving ``models`` (name -> ONNX file), every model ready when this returns."""
    http_port, grpc_port = free_port(), free_port()
    argv = [python(), str(MODELS), *(f"--serve={name}={path}" for name, path in models.items()),
            f"--http-port={http_port}", f"--grpc-port={grpc_port}", f"--metrics-port={free_port()}"]
    # pytriton's workspace (with its models' unix sockets) goes under ~/.cache: a home of the test's own,
    # short, since a socket path over 107 bytes fails ("File name too long") and pytest's tmp paths are long
    home = Path(tempfile.mkdtemp(prefix="pytriton-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return launch(argv, root, (http_port, grpc_port), "Triton", lambda srv: wait(srv, list(models), budget_s, "Triton"),
                  home=home)
