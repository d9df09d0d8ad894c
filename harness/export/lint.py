"""Static checks on an ONNX artifact for mistakes numbers alone can miss.

A model exported in training mode keeps ``Dropout(training_mode=1)`` (or random ops) in the
graph. onnxruntime's default graph optimisations silently remove Dropout, so parity can pass
on one machine and the same artifact behaves randomly where optimisations are off or another
runtime loads it. Counting those nodes makes the verdict independent of the runtime.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

RANDOM_OPS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli",
                        "Multinomial"})


def training_mode_nodes(model: onnx.ModelProto | str | Path) -> list[str]:
    """Names of nodes that make inference random: training-mode Dropout and random ops."""
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model), load_external_data=False)
    constants: dict[str, np.ndarray] = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer
                                        if init.data_type == onnx.TensorProto.BOOL}
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_type == onnx.TensorProto.BOOL:
                    constants[node.output[0]] = numpy_helper.to_array(attr.t)
    found = []
    for node in model.graph.node:
        if node.op_type in RANDOM_OPS:
            found.append(node.name or node.op_type)
        elif node.op_type == "Dropout" and len(node.input) >= 3 and node.input[2]:
            flag = constants.get(node.input[2])
            # a non-constant training_mode input is a switch someone can flip: also flagged
            if flag is None or bool(np.asarray(flag).any()):
                found.append(node.name or "Dropout")
    return found
