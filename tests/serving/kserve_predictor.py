"""A KServe custom predictor serving ONNX files, as a team writes one: a ``kserve.Model``
subclass whose ``predict`` runs ONNX Runtime on the request's tensors.

Run by tests/serving/kserve.py inside the KServe virtualenv (its own: KServe pins fastapi,
protobuf, grpcio...), never imported by the project. A model named by
``--publish-metadata`` overrides ``get_input_types()`` / ``get_output_types()``; the others'
metadata lists no tensors, KServe's default for custom predictors. ``--refuse-binary`` answers
HTTP binary tensors with a 400, as JSON-only servers do.

    python kserve_predictor.py --serve bert=model.onnx [--publish-metadata bert] [--refuse-binary] \
        --http_port P --grpc_port Q
"""

from __future__ import annotations

import argparse
import uuid
from typing import Dict, List

import numpy as np
import onnxruntime as ort
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer
from kserve.errors import InvalidInput

OIP = {"float32": "FP32", "float16": "FP16", "float64": "FP64", "int64": "INT64", "int32": "INT32", "int8": "INT8",
       "uint8": "UINT8", "bool": "BOOL"}
ONNX = {"tensor(float)": "FP32", "tensor(float16)": "FP16", "tensor(int64)": "INT64", "tensor(int32)": "INT32",
        "tensor(bool)": "BOOL"}


class OnnxPredictor(Model):
    def __init__(self, name: str, path: str, publish: bool, refuse_binary: bool) -> None:
        super().__init__(name)
        self.path, self.publish, self.refuse_binary = path, publish, refuse_binary
        self.session: ort.InferenceSession | None = None
        self.load()

    def load(self) -> bool:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(self.path, options, providers=["CPUExecutionProvider"])
        self.ready = True
        return self.ready

    def _describe(self, tensors) -> List[Dict]:
        return [{"name": t.name, "datatype": ONNX.get(t.type, "BYTES"),
                 "shape": [d if isinstance(d, int) else -1 for d in t.shape]} for t in tensors]

    def get_input_types(self) -> List[Dict]:
        return self._describe(self.session.get_inputs()) if self.publish else []

    def get_output_types(self) -> List[Dict]:
        return self._describe(self.session.get_outputs()) if self.publish else []

    def predict(self, payload: InferRequest, headers: Dict[str, str] | None = None,
                response_headers: Dict[str, str] | None = None) -> InferResponse:
        if self.refuse_binary and headers and "inference-header-content-length" in headers:
            raise InvalidInput("binary tensor data is not supported by this predictor: send JSON tensors")
        feeds = {i.name: i.as_numpy() for i in payload.inputs}
        names = [o.name for o in self.session.get_outputs()]
        outputs = []
        for name, value in zip(names, self.session.run(names, feeds)):
            value = np.ascontiguousarray(value)
            out = InferOutput(name, list(value.shape), OIP[str(value.dtype)])
            out.set_data_from_numpy(value, binary_data=False)
            outputs.append(out)
        return InferResponse(response_id=payload.id or str(uuid.uuid4()), model_name=self.name, infer_outputs=outputs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="append", required=True, help="NAME=MODEL.onnx")
    parser.add_argument("--publish-metadata", action="append", default=[], metavar="NAME",
                        help="this model overrides get_input_types() / get_output_types()")
    parser.add_argument("--refuse-binary", action="store_true", help="answer HTTP binary tensors with a 400")
    parser.add_argument("--http_port", type=int, required=True)
    parser.add_argument("--grpc_port", type=int, required=True)
    args, _ = parser.parse_known_args()
    served = dict(item.split("=", 1) for item in args.serve)
    models = [OnnxPredictor(name, path, publish=name in args.publish_metadata, refuse_binary=args.refuse_binary)
              for name, path in served.items()]
    ModelServer(http_port=args.http_port, grpc_port=args.grpc_port, workers=1,
                enable_latency_logging=False).start(models)


if __name__ == "__main__":
    main()
