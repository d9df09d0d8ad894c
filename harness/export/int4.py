"""FP32 ONNX -> INT4 weight-only ONNX: onnxruntime's ``MatMulNBitsQuantizer``.

Why this recipe: INT4 weight-only is how LLMs ship on ONNX Runtime today (onnxruntime-genai's
model builder writes the same ``MatMulNBits`` op). Every MatMul whose second input is a constant
weight becomes ``MatMulNBits`` with ``bits=4``: weights in blocks of ``block_size`` along the
reduction axis, one scale per block (symmetric: no zero point, as the builder writes by default),
activations stay float. Block 32 is the builder's default; onnxruntime's quantizer defaults to
128, which on the zoo's tiny hidden sizes would be one block per column.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from harness.export.external import save
from harness.export.onnx_export import check_model

DEFAULT_INT4: dict[str, Any] = {"block_size": 32, "is_symmetric": True, "accuracy_level": None}


def int4_settings(settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The quantizer's settings as they enter the artifact's cache key."""
    return {**DEFAULT_INT4, **(settings or {})}


def quantize_int4(src: Path, out_dir: Path, settings: dict[str, Any] | None = None,
                  external_data: str = "auto") -> Path:
    """INT4 weight-only ``src`` into ``out_dir/model.onnx`` (external data as ``external_data`` decides)."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    s = int4_settings(settings)
    target = out_dir / "model.onnx"
    quant_logger = logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer")
    level = quant_logger.level
    quant_logger.setLevel(logging.WARNING)  # one INFO line per MatMul otherwise
    try:
        quantizer = MatMulNBitsQuantizer(onnx.load(str(src)), bits=4, block_size=s["block_size"],
                                         is_symmetric=s["is_symmetric"], accuracy_level=s["accuracy_level"],
                                         nodes_to_exclude=list(s.get("nodes_to_exclude") or []))
        quantizer.process()
    finally:
        quant_logger.setLevel(level)
    save(quantizer.model.model, target, external_data)
    check_model(target)
    return target
