"""FP32 ONNX -> FP16 ONNX with onnxconverter-common, keeping FP32 graph inputs/outputs.

``keep_io_types`` means callers feed and read FP32 exactly as for the FP32 model, so the
same feeds and comparisons apply. Ops in the block list stay FP32; the defaults are the
ones whose FP16 range overflows in practice (reductions feeding normalisation, exponentials).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any, Sequence

import onnx
from onnxconverter_common import float16

from harness.export.external import save
from harness.export.onnx_export import check_model

#: Ops kept in FP32 on top of onnxconverter-common's own DEFAULT_OP_BLOCK_LIST.
DEFAULT_FP16_BLOCK_LIST: tuple[str, ...] = ()


def convert_fp16(src: Path, out_dir: Path, op_block_list: Sequence[str] = DEFAULT_FP16_BLOCK_LIST,
                 external_data: str = "auto", node_block_list: Sequence[str] = ()) -> Path:
    """``src`` (FP32, external data or not) -> ``out_dir/model.onnx`` in FP16, stored as
    ``external_data`` decides for the FP16 size. ``node_block_list``: node names kept in FP32
    (onnxconverter-common casts around them), what ``harness bisect --suggest`` searches for.

    Shapes are inferred on the graph *without* its weights (an in-memory ``infer_shapes`` of a
    model over 2 GB fails: it serialises one protobuf), then the weights are read in and the
    converter is told not to infer again."""
    from onnx.external_data_helper import load_external_data_for_model

    model = onnx.load(str(src), load_external_data=False)
    _isolate_consumed_outputs(model)
    held = _detach_weights(model)
    model = onnx.shape_inference.infer_shapes(model)
    _attach_weights(model, held)
    del held
    load_external_data_for_model(model, str(Path(src).parent))
    if node_block_list:
        _inline_weight_identities(model)
    blocked = sorted(set(float16.DEFAULT_OP_BLOCK_LIST) | set(op_block_list))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        converted = float16.convert_float_to_float16(model, keep_io_types=True, op_block_list=blocked,
                                                     node_block_list=sorted(set(node_block_list)) or None,
                                                     disable_shape_infer=True)
    _write_range_report(out_dir / "fp16_report.json", [str(w.message) for w in caught])
    _align_cast_targets(converted)
    target = out_dir / "model.onnx"
    del model
    save(converted, target, external_data)
    del converted
    check_model(target)
    return target


#: tensors above this many bytes are set aside during shape inference (the external-data convention)
DETACH_BYTES = 1024


def _detach_weights(model: onnx.ModelProto) -> dict[str, bytes]:
    """Take the ``raw_data`` of every initializer over :data:`DETACH_BYTES` out of ``model``.

    ``infer_shapes`` on an in-memory model serialises it, parses the copy in C++, and hands a
    third copy back: with the weights inside (an artifact under the external-data threshold)
    that is three more copies of them (measured: a 0.29 GB graph took the conversion to 1.4 GB
    above the process's floor). Shape inference reads only the small constants (shapes, axes),
    so the large ones are held aside and put back afterwards."""
    held: dict[str, bytes] = {}
    for tensor in model.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL and len(tensor.raw_data) > DETACH_BYTES:
            held[tensor.name] = tensor.raw_data
            tensor.ClearField("raw_data")
    return held


def _attach_weights(model: onnx.ModelProto, held: dict[str, bytes]) -> None:
    for tensor in model.graph.initializer:
        if tensor.name in held:
            tensor.raw_data = held.pop(tensor.name)


def fp16_settings(op_block_list: Sequence[str] = DEFAULT_FP16_BLOCK_LIST,
                  node_block_list: Sequence[str] = ()) -> dict[str, Any]:
    """The FP16 artifact's cache-key settings; ``node_block_list`` only when non-empty, so the
    keys of artifacts built before it existed still match."""
    import onnxconverter_common

    out: dict[str, Any] = {"tool": "onnxconverter_common.float16", "version": onnxconverter_common.__version__,
                           "keep_io_types": True, "op_block_list": sorted(set(op_block_list))}
    if node_block_list:
        out["node_block_list"] = sorted(set(node_block_list))
        out["node_block_recipe"] = 1  # _inline_weight_identities; bump when the blocked path changes
    return out


def _align_cast_targets(model: onnx.ModelProto) -> int:
    """Make ``Cast(to=FLOAT)`` nodes whose output the converter re-typed to FP16 cast to FP16.

    Dynamo exports contain such casts (e.g. an int mask cast to float for pooling);
    onnxconverter-common re-types their outputs but leaves ``to`` alone, and onnxruntime
    then refuses the model ("Type (tensor(float16)) of output arg ... does not match").
    """
    from onnx import TensorProto

    declared = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.value_info}
    fixed = 0
    for node in model.graph.node:
        if node.op_type != "Cast" or declared.get(node.output[0]) != TensorProto.FLOAT16:
            continue
        for attr in node.attribute:
            if attr.name == "to" and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.FLOAT16
                fixed += 1
    return fixed


def _inline_weight_identities(model: onnx.ModelProto) -> int:
    """Replace ``Identity(initializer)`` nodes by a copy of the initializer under the output's name.

    The TorchScript exporter emits such Identities for weights it deduplicated. With a
    ``node_block_list``, onnxconverter-common keeps a blocked node's weight FP32 but converts the
    Identity in front of it, and onnxruntime refuses the model ("Type (tensor(float16)) of output
    arg (...bias) of node (Identity_92) does not match expected type (tensor(float))"). Only done
    when nodes are blocked, so every artifact built without a node list stays byte-identical."""
    from onnx import numpy_helper

    weights = {i.name: i for i in model.graph.initializer}
    outputs = {o.name for o in model.graph.output}
    inlined = []
    for node in model.graph.node:
        if node.op_type == "Identity" and node.input[0] in weights and node.output[0] not in outputs:
            copy = numpy_helper.from_array(numpy_helper.to_array(weights[node.input[0]]), node.output[0])
            model.graph.initializer.append(copy)
            inlined.append(node)
    for node in inlined:
        model.graph.node.remove(node)
    names = {n.output[0] for n in inlined}
    kept = [vi for vi in model.graph.value_info if vi.name not in names]
    del model.graph.value_info[:]
    model.graph.value_info.extend(kept)
    return len(inlined)


def _isolate_consumed_outputs(model: onnx.ModelProto) -> int:
    """Give graph outputs that other nodes also read a private internal name.

    A decoder's ``present.*.encoder.key`` is both a graph output and the input of the
    cross-attention MatMul. With ``keep_io_types`` the converter casts the *output* back to
    FP32 under the same name, and the internal consumer then reads FP32 where FP16 is
    declared, which onnxruntime rejects. Routing consumers through ``<name>__internal`` and
    producing the output with an Identity keeps both sides typed correctly.
    """
    from onnx import helper

    outputs = {o.name for o in model.graph.output}
    consumed = {i for node in model.graph.node for i in node.input} & outputs
    for name in consumed:
        internal = f"{name}__internal"
        for node in model.graph.node:
            for idx, value in enumerate(node.output):
                if value == name:
                    node.output[idx] = internal
            for idx, value in enumerate(node.input):
                if value == name:
                    node.input[idx] = internal
        model.graph.node.append(helper.make_node("Identity", [internal], [name], name=f"{name}__identity"))
    return len(consumed)


def _write_range_report(path: Path, messages: list[str]) -> None:
    """Record which weights FP16 cannot represent: values flushed towards 1e-7 (underflow)
    and values clamped to +-65504 (overflow, the classic FP16 failure)."""
    pattern = re.compile(r"the float32 number (\S+) will be truncated to (\S+)")
    underflow: list[float] = []
    overflow: list[float] = []
    for message in messages:
        match = pattern.search(message)
        if not match:
            continue
        value = float(match.group(1))
        (overflow if abs(value) > 65504 else underflow).append(value)
    report = {"underflow_count": len(underflow), "overflow_count": len(overflow),
              "overflow_examples": overflow[:10], "underflow_examples": underflow[:5]}
    path.write_text(json.dumps(report, indent=2))
