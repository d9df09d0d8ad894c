"""FP32 ONNX -> INT8 ONNX with onnxruntime's dynamic quantization (weights INT8,
activations quantized on the fly): the standard CPU recipe, no calibration data needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.export.onnx_export import check_model

DEFAULT_INT8 = {"weight_type": "QInt8", "per_channel": False, "reduce_range": False}


def quantize_int8(src: Path, out_dir: Path, settings: dict[str, Any] | None = None) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    s = {**DEFAULT_INT8, **(settings or {})}
    target = out_dir / "model.onnx"
    quantize_dynamic(str(src), str(target), weight_type=getattr(QuantType, s["weight_type"]),
                     per_channel=s["per_channel"], reduce_range=s["reduce_range"])
    check_model(target)
    return target


def int8_settings(settings: dict[str, Any] | None = None) -> dict[str, Any]:
    import onnxruntime

    return {"tool": "onnxruntime.quantization.quantize_dynamic", "version": onnxruntime.__version__,
            **DEFAULT_INT8, **(settings or {})}
