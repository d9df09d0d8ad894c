"""FP32 ONNX -> INT8 ONNX: onnxruntime's dynamic quantization (weights INT8,
activations quantized on the fly): the standard CPU recipe, no calibration data needed; and
static QDQ INT8 (``quantize_static``): activation ranges calibrated on corpus sentences,
what TensorRT's explicit quantisation and the fastest CPU deployments consume."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from harness.export.external import file_initializer_bytes, use_external
from harness.export.onnx_export import check_model

if TYPE_CHECKING:  # pragma: no cover
    import onnx

DEFAULT_INT8 = {"weight_type": "QInt8", "per_channel": False, "reduce_range": False}


def quantize_int8(src: Path, out_dir: Path, settings: dict[str, Any] | None = None,
                  external_data: str = "auto") -> Path:
    """Dynamic INT8 of ``src`` into ``out_dir/model.onnx`` (weights in ``model.onnx.data``
    when :func:`_external` says so; onnxruntime reads ``src``'s own external data by path)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    s = {**DEFAULT_INT8, **(settings or {})}
    target = out_dir / "model.onnx"
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # "consider pre-processing" on the root logger, per call (as for static)
    try:
        with lean_shape_reload():
            quantize_dynamic(str(src), str(target), weight_type=getattr(QuantType, s["weight_type"]),
                             per_channel=s["per_channel"], reduce_range=s["reduce_range"],
                             nodes_to_exclude=list(s.get("nodes_to_exclude") or []) or None,
                             use_external_data_format=_external(src, external_data))
    finally:
        root.setLevel(level)
    check_model(target)
    return target


def _reinfer_in_place(model: "onnx.ModelProto") -> "onnx.ModelProto":
    """onnxruntime's ``save_and_reload_model_with_shape_infer`` without copying a weight: shapes
    are inferred on a skeleton of the graph whose large initializers are stubs (name, type, dims;
    what shape inference reads of them, as for external data), and the inferred ``value_info``
    is written into ``model`` itself, which is returned. Only for callers that replace their model
    with the result, as the quantizer does."""
    import onnx
    from onnxruntime.quantization.quant_utils import add_infer_metadata

    skeleton = onnx.ModelProto()
    for field in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
        setattr(skeleton, field, getattr(model, field))
    skeleton.opset_import.extend(model.opset_import)
    skeleton.functions.extend(model.functions)
    graph, source = skeleton.graph, model.graph
    graph.name = source.name
    for part in ("node", "input", "output", "value_info", "sparse_initializer"):
        getattr(graph, part).extend(getattr(source, part))
    for tensor in source.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL or tensor.ByteSize() <= STUB_BYTES:
            graph.initializer.append(tensor)
        else:
            stub = graph.initializer.add()
            stub.name, stub.data_type = tensor.name, tensor.data_type
            stub.dims.extend(tensor.dims)
            stub.data_location = onnx.TensorProto.EXTERNAL
            stub.external_data.add(key="location", value="(held in memory)")
    inferred = onnx.shape_inference.infer_shapes(skeleton)
    del source.value_info[:]
    source.value_info.extend(inferred.graph.value_info)
    add_infer_metadata(model)
    return model


#: initializers above this many bytes are stubs in the shape-inference skeleton (the external-data convention)
STUB_BYTES = 1024


@contextmanager
def lean_shape_reload() -> Iterator[None]:
    """While dynamic quantisation runs, re-infer shapes without a third copy of the weights.

    ``ONNXQuantizer.__init__`` (dynamic mode) refreshes its shape information by deep-copying the
    whole model, saving the copy and loading it again while the original is still held: three
    copies of every weight at once, the peak of a multi-GB run (3.3x the FP32 weights on the
    2.23 GB decoder of docs/large-models.md). The quantizer replaces its model with the reloaded
    one immediately, so saving the original in place is equivalent and keeps one copy
    (scripts/bench_int8_memory.py measures both side by side; tests/test_memory_bounded.py holds
    the artifacts byte-identical). Patched in ``onnx_quantizer``'s namespace only, and restored."""
    from onnxruntime.quantization import onnx_quantizer

    original = getattr(onnx_quantizer, "save_and_reload_model_with_shape_infer", None)
    if original is None:  # another onnxruntime: quantise as it ships (correct, only heavier)
        yield
        return
    onnx_quantizer.save_and_reload_model_with_shape_infer = _reinfer_in_place
    try:
        yield
    finally:
        onnx_quantizer.save_and_reload_model_with_shape_infer = original


def _external(src: Path, mode: str) -> bool:
    """Whether the INT8 artifact of ``src`` is written with external data: decided on the FP32
    source's weight bytes (the quantizer holds them, and the QDQ / FP32-bias parts stay FP32), so
    a source that needed external data gives an artifact that has it."""
    return use_external(mode, file_initializer_bytes(src))


def int8_settings(settings: dict[str, Any] | None = None) -> dict[str, Any]:
    import onnxruntime

    return {"tool": "onnxruntime.quantization.quantize_dynamic", "version": onnxruntime.__version__,
            **DEFAULT_INT8, **(settings or {})}


# -- static (calibrated, QDQ) INT8 -------------------------------------------------------------------
#: the calibration methods users name -> onnxruntime's CalibrationMethod member
CALIBRATION_METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}
#: U8S8 QDQ: activations uint8, weights int8, the format onnxruntime recommends for CPU and the
#: explicit-quantisation graph TensorRT consumes
#: Only MatMul / Gemm are quantised (the ops dynamic INT8 quantises in these models, where the time
#: is): calibrating every op's tensors also histograms constant ones (a mask turned into a zero
#: bias), on which onnxruntime's entropy / percentile collectors fail ("Too many bins").
DEFAULT_STATIC = {"format": "QDQ", "activation_type": "QUInt8", "weight_type": "QInt8", "per_channel": False,
                  "reduce_range": False, "calibration": "minmax", "op_types": ["MatMul", "Gemm"]}


class _Batches:
    """An onnxruntime ``CalibrationDataReader`` over prepared feed batches (casts to the
    graph's input dtypes happen here, so the calibration session takes them)."""

    def __init__(self, batches: "list[dict[str, Any]]") -> None:
        self._iter = iter(batches)

    def get_next(self) -> "dict[str, Any] | None":
        return next(self._iter, None)

    def rewind(self) -> None:  # pragma: no cover - quantize_static reads once
        pass


def quantize_int8_static(src: Path, out_dir: Path, batches: "list[dict[str, Any]]",
                         settings: dict[str, Any] | None = None, external_data: str = "auto") -> Path:
    """Static INT8 in QDQ format: activation ranges calibrated on ``batches`` (corpus sentences
    the parity judge never sees), weights per tensor or per channel."""
    import numpy as np
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    s = {**DEFAULT_STATIC, **(settings or {})}
    if not batches:
        raise ValueError("int8-static: no calibration sentences: the corpus has none beyond the judged ones "
                         "(lower --samples, or use a larger corpus)")
    graph_inputs = {i.name for i in onnx.load(str(src), load_external_data=False).graph.input}
    feeds = [{k: np.asarray(v) for k, v in b.items() if k in graph_inputs} for b in batches]
    if s["calibration"] != "minmax":
        feeds = _same_shapes(feeds)
    target = out_dir / "model.onnx"
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # onnxruntime.quantization advises pre-processing on the root logger, per call
    try:
        quantize_static(str(src), str(target), _Batches(feeds), quant_format=getattr(QuantFormat, s["format"]),
                        per_channel=s["per_channel"], reduce_range=s["reduce_range"],
                        activation_type=getattr(QuantType, s["activation_type"]),
                        weight_type=getattr(QuantType, s["weight_type"]),
                        calibrate_method=getattr(CalibrationMethod, CALIBRATION_METHODS[s["calibration"]]),
                        op_types_to_quantize=list(s["op_types"]),
                        nodes_to_exclude=list(s.get("nodes_to_exclude") or []) or None,
                        extra_options={"CalibTensorRangeSymmetric": False},
                        use_external_data_format=_external(src, external_data))
    finally:
        root.setLevel(level)
    check_model(target)
    for leftover in out_dir.glob("*.onnx-augmented*"):  # calibration's scratch model, if left in place
        leftover.unlink()
    return target


def _same_shapes(batches: "list[dict[str, Any]]") -> "list[dict[str, Any]]":
    """Every batch zero-padded to the largest shape of each input: the histogram calibrators
    (entropy, percentile) stack activations across batches and need equal shapes. Padding is
    zeros (attention masks 0: masked positions), so it adds values at zero, inside any range."""
    import numpy as np

    out = []
    for batch in batches:
        padded = {}
        for name, value in batch.items():
            target = tuple(max(b[name].shape[i] for b in batches) for i in range(value.ndim))
            widths = [(0, t - d) for d, t in zip(value.shape, target)]
            padded[name] = np.pad(value, widths) if any(w for _, w in widths) else value
        out.append(padded)
    return out


def int8_static_settings(settings: dict[str, Any] | None = None) -> dict[str, Any]:
    import onnxruntime

    return {"tool": "onnxruntime.quantization.quantize_static", "version": onnxruntime.__version__,
            **DEFAULT_STATIC, **(settings or {})}
