"""A small MLServer runtime that serves one ONNX file with ONNX Runtime (CPU, one thread).

MLServer itself is the real package (its REST and gRPC servers, its adaptive batcher); only
the model runtime is ours, as MLServer intends (a custom runtime is one ``MLModel`` subclass).
It reads the file's inputs and outputs into the model's metadata, so the V2 metadata endpoint
describes the served model as Triton would, and passes ``parameters.extra.precision`` of the
model settings on as a metadata parameter (what a server declares about its model).

Runs inside the server's own virtualenv (mlserver + onnxruntime), never imported by the harness.
"""

from __future__ import annotations

import asyncio
import os

import numpy as np
import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import (
    InferenceRequest,
    InferenceResponse,
    MetadataModelResponse,
    MetadataTensor,
    Parameters,
)

_DTYPES = {"tensor(float)": "FP32", "tensor(float16)": "FP16", "tensor(int64)": "INT64", "tensor(int32)": "INT32",
           "tensor(bool)": "BOOL", "tensor(double)": "FP64"}


def _meta(arg: ort.NodeArg) -> MetadataTensor:
    shape = [d if isinstance(d, int) else -1 for d in arg.shape]
    return MetadataTensor(name=arg.name, datatype=_DTYPES.get(arg.type, "BYTES"), shape=shape)


class OnnxModel(MLModel):
    async def load(self) -> bool:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        uri = self.settings.parameters.uri if self.settings.parameters else None
        self._session = ort.InferenceSession(str(uri), options, providers=["CPUExecutionProvider"])
        self.inputs = [_meta(i) for i in self._session.get_inputs()]
        self.outputs = [_meta(o) for o in self._session.get_outputs()]
        self._names = [o.name for o in self._session.get_outputs()]
        extra = (self.settings.parameters.extra or {}) if self.settings.parameters else {}
        self._precision = extra.get("precision")
        # faults the tests inject (a real server misbehaving, not a mock): every k-th request fails
        # with HTTP 500 / gRPC INTERNAL, every k-th is slow, the server process dies after n requests
        self._fail_every = int(extra.get("fail_every", 0))
        self._slow_every, self._slow_s = int(extra.get("slow_every", 0)), float(extra.get("slow_s", 0))
        self._exit_after = int(extra.get("exit_after", 0))
        self._count = 0
        return True

    async def metadata(self) -> MetadataModelResponse:
        meta = await super().metadata()
        meta.platform = meta.platform or "onnxruntime_onnx"
        if self._precision:
            meta.parameters = Parameters(precision=self._precision)
        return meta

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        self._count += 1
        if self._exit_after and self._count > self._exit_after:
            os._exit(3)
        if self._fail_every and self._count % self._fail_every == 0:
            raise RuntimeError(f"injected failure of request {self._count}")
        if self._slow_every and self._count % self._slow_every == 0:
            await asyncio.sleep(self._slow_s)
        feeds = {i.name: np.asarray(NumpyCodec.decode_input(i)) for i in payload.inputs}
        outs = self._session.run(self._names, feeds)
        return InferenceResponse(model_name=self.name, model_version=self.version,
                                 outputs=[NumpyCodec.encode_output(n, a) for n, a in zip(self._names, outs)])
