"""ONNX files served by a real Triton Inference Server: PyPI ``nvidia-pytriton`` bundles
``tritonserver`` (2.51, python backend, runs on CPU) and binds Python functions as models.

Run by tests/serving/triton_server.py inside the pytriton virtualenv (its own), never imported
by the project. Each ``--serve NAME=MODEL.onnx`` is one Triton model with dynamic batching
(``max_batch_size`` 8) whose function runs ONNX Runtime on the batch Triton formed.

The python backend's stub process is linked against ``libpython3.X.so``: it must load the
library of the interpreter running this script, not whichever the system's loader finds first
(Debian's own libpython3.11 beside a pyenv 3.11.7 gave ``'_thread.RLock' object has no
attribute '_recursion_count'``): the library directory is put first on ``LD_LIBRARY_PATH``,
which tritonserver and its stubs inherit.

    python pytriton_models.py --serve bert=model.onnx --http-port P --grpc-port Q --metrics-port R
"""

from __future__ import annotations

import argparse
import os
import sysconfig

import numpy as np
import onnxruntime as ort

ONNX_TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
              "tensor(float16)": np.float16, "tensor(bool)": np.bool_}


def _function(session: ort.InferenceSession):
    from pytriton.decorators import batch

    names = [o.name for o in session.get_outputs()]

    @batch
    def infer(**inputs: np.ndarray) -> dict[str, np.ndarray]:
        return dict(zip(names, session.run(names, inputs)))

    return infer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="append", required=True, help="NAME=MODEL.onnx")
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    args = parser.parse_args()
    libdir = sysconfig.get_config_var("LIBDIR")
    os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libdir, os.environ.get("LD_LIBRARY_PATH")) if p)

    from pytriton.model_config import ModelConfig, Tensor
    from pytriton.triton import DEFAULT_PROTECTED_ENDPOINTS, Triton, TritonConfig, TritonSecurityConfig

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    config = TritonConfig(http_address="127.0.0.1", http_port=args.http_port, grpc_address="127.0.0.1",
                          grpc_port=args.grpc_port, metrics_port=args.metrics_port)
    # pytriton puts the statistics extension behind an access token; the sweep reads it (queue and
    # compute times, the batches formed), as it reads a stock tritonserver's
    security = TritonSecurityConfig(restricted_endpoints=[e for e in DEFAULT_PROTECTED_ENDPOINTS if e != "statistics"])
    with Triton(config=config, security_config=security) as triton:
        for item in args.serve:
            name, path = item.split("=", 1)
            session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            triton.bind(model_name=name, infer_func=_function(session),
                        inputs=[Tensor(name=t.name, dtype=ONNX_TYPES[t.type], shape=(-1,) * (len(t.shape) - 1))
                                for t in session.get_inputs()],
                        outputs=[Tensor(name=t.name, dtype=ONNX_TYPES[t.type], shape=(-1,) * (len(t.shape) - 1))
                                 for t in session.get_outputs()],
                        config=ModelConfig(max_batch_size=8))
        triton.serve()


if __name__ == "__main__":
    main()
