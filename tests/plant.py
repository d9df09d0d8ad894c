"""Planted faults in ONNX files a tool wrote: what a broken conversion, a wrong wrapper or a bad
edit leaves behind, applied to the graph itself so the same fault fits every tool's layout.

- ``scale_weight``: one projection's weight x1.05 (for a quantized MatMul, its scales: the
  dequantized weight is x1.05 all the same);
- ``swap_kv``: layer 0's key and value cache outputs swapped (the graph still computes right);
- ``ignore_mask``: every consumer of ``attention_mask`` reads ones instead (padding attended);
- ``positions_not_offset``: ``position_ids`` rebased to start at 0 in every call, so a cached
  step is placed at the prompt's start instead of after it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: op -> the input holding the float values a x1.05 must scale (weight, or quantized weight's scales)
_WEIGHT_INPUT = {"MatMul": 1, "Gemm": 1, "MatMulNBits": 2}


def _load(src: Path) -> onnx.ModelProto:
    return onnx.load(str(src))  # external data (genai's model.onnx.data) is read in and saved inline


def _save(model: onnx.ModelProto, src: Path, dst: Path) -> Path:
    """``dst``: the faulty model beside copies of ``src``'s other files (genai_config.json, tokenizer)."""
    dst.mkdir(parents=True, exist_ok=True)
    for other in src.parent.iterdir():
        if other.is_file() and other.suffix != ".onnx" and not other.name.endswith(".data"):
            (dst / other.name).write_bytes(other.read_bytes())
    target = dst / src.name
    onnx.save_model(model, str(target), save_as_external_data=model.ByteSize() > 1_500_000_000)
    return target


def scale_weight(src: Path, dst: Path, factor: float = 1.05, nth: int = 2) -> Path:
    """The ``nth`` weight-bearing MatMul (graph order) whose weight is a float initializer: x``factor``.
    The third by default: layer 0's value projection in optimum's BERT and Llama graphs (Q, K, V), the
    gate projection in genai's (fused QKV, O, gate). The first, a query projection, only sharpens a
    random BERT's near-uniform attention: x1.05 there moved its logits by less than FP32's gate."""
    model = _load(src)
    inits = {t.name: t for t in model.graph.initializer}
    found = [node.input[_WEIGHT_INPUT[node.op_type]] for node in model.graph.node
             if node.op_type in _WEIGHT_INPUT and len(node.input) > _WEIGHT_INPUT[node.op_type]
             and node.input[_WEIGHT_INPUT[node.op_type]] in inits
             and inits[node.input[_WEIGHT_INPUT[node.op_type]]].data_type in (TensorProto.FLOAT, TensorProto.FLOAT16)]
    if len(found) <= nth:
        raise AssertionError(f"{src}: no float weight #{nth} of MatMul/Gemm/MatMulNBits to scale")
    tensor = inits[found[nth]]
    values = numpy_helper.to_array(tensor)
    tensor.CopyFrom(numpy_helper.from_array((values * factor).astype(values.dtype), tensor.name))
    return _save(model, src, dst)


def swap_kv(src: Path, dst: Path, layer: int = 0) -> Path:
    """Layer ``layer``'s key and value cache *outputs* swapped (any naming with ``key``/``value`` and
    the layer number, e.g. ``present.0.key``): the graph computes as before, but hands the caller
    its value cache under the key's name and vice versa, as a wrapper that mixed up its outputs does."""
    model = _load(src)
    outputs = [o.name for o in model.graph.output]
    key = next(n for n in outputs if f".{layer}." in n and n.endswith("key"))
    value = next(n for n in outputs if f".{layer}." in n and n.endswith("value"))
    inner = {key: "planted_inner_key", value: "planted_inner_value"}
    for node in model.graph.node:
        node.input[:] = [inner.get(i, i) for i in node.input]
        node.output[:] = [inner.get(o, o) for o in node.output]
    model.graph.node.extend([helper.make_node("Identity", ["planted_inner_value"], [key]),
                             helper.make_node("Identity", ["planted_inner_key"], [value])])
    return _save(model, src, dst)


def _rewire(model: onnx.ModelProto, name: str, replacement: str, nodes: list[onnx.NodeProto]) -> None:
    """Every consumer of ``name`` reads ``replacement``; ``nodes`` (which compute it) go first."""
    for node in model.graph.node:
        node.input[:] = [replacement if i == name else i for i in node.input]
    for node in reversed(nodes):
        model.graph.node.insert(0, node)


def ignore_mask(src: Path, dst: Path) -> Path:
    model = _load(src)
    ones = helper.make_tensor("planted_one", TensorProto.INT64, [1], [1])
    _rewire(model, "attention_mask", "planted_mask", [
        helper.make_node("Shape", ["attention_mask"], ["planted_mask_shape"]),
        helper.make_node("ConstantOfShape", ["planted_mask_shape"], ["planted_mask"], value=ones),
    ])
    return _save(model, src, dst)


def positions_not_offset(src: Path, dst: Path) -> Path:
    model = _load(src)
    if "position_ids" not in {i.name for i in model.graph.input}:
        raise AssertionError(f"{src}: no position_ids input (positions are implicit)")
    model.graph.initializer.append(numpy_helper.from_array(np.array([1], dtype=np.int64), "planted_axis"))
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    reduce = (helper.make_node("ReduceMin", ["position_ids", "planted_axis"], ["planted_start"], keepdims=1)
              if opset >= 18 else helper.make_node("ReduceMin", ["position_ids"], ["planted_start"], axes=[1],
                                                   keepdims=1))
    _rewire(model, "position_ids", "planted_positions",
            [reduce, helper.make_node("Sub", ["position_ids", "planted_start"], ["planted_positions"])])
    return _save(model, src, dst)
