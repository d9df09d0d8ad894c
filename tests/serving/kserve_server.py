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

from pathlib import Path

from tests.serving.mlserver import Server, free_port, wait
from tests.serving.venv_server import launch, venv_python
from tests.waiting import PATIENCE

ENV = "HARNESS_KSERVE_PYTHON"
REQUIRE_ENV = "HARNESS_REQUIRE_KSERVE"
PREDICTOR = Path(__file__).with_name("kserve_predictor.py")


def python() -> str:
    return venv_python(ENV, ".kserve-venv", "kserve onnxruntime")


def start(root: Path, models: dict[str, Path], *, publish_metadata: tuple[str, ...] = (), refuse_binary: bool = False,
          budget_s: float = PATIENCE) -> Server:
    """KServe serving ``models`` (name -> ONNX file; those in ``publish_metadata`` publish their
    tensors), every model ready when this returns."""
    http_port, grpc_port = free_port(), free_port()
    argv = [python(), str(PREDICTOR), *(f"--serve={name}={path}" for name, path in models.items()),
            f"--http_port={http_port}", f"--grpc_port={grpc_port}"]
    argv += [f"--publish-metadata={name}" for name in publish_metadata] + ["--refuse-binary"] * refuse_binary

    def ready(srv: Server) -> None:
        # KServe starts its HTTP (uvicorn) and gRPC servers separately: HTTP answering ready says
        # nothing of the gRPC port, which may open later under load. Both transports are waited
        # for, by polling each one's ready endpoint, before a test is handed the server.
        wait(srv, list(models), budget_s, "KServe")
        wait(srv, list(models), budget_s, "KServe", url=srv.grpc)

    return launch(argv, root, (http_port, grpc_port), "KServe", ready)
