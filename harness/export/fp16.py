"""FP32 ONNX -> FP16 ONNX with onnxconverter-common, keeping FP32 graph inputs/outputs.

``keep_io_types`` means callers feed and read FP32 exactly as for the FP32 model, so the
same feeds and comparisons apply. Ops in the block list stay FP32; the defaults are the
ones whose FP16 range overflows in practice (reductions feeding normalisation, exponentials).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import onnx
from onnxconverter_common import float16

from harness.export.onnx_export import check_model

#: Ops kept in FP32 on top of onnxconverter-common's own DEFAULT_OP_BLOCK_LIST.
DEFAULT_FP16_BLOCK_LIST: tuple[str, ...] = ()


def convert_fp16(src: Path, out_dir: Path, op_block_list: Sequence[str] = DEFAULT_FP16_BLOCK_LIST) -> Path:
    model = onnx.load(str(src))
    blocked = sorted(set(float16.DEFAULT_OP_BLOCK_LIST) | set(op_block_list))
    converted = float16.convert_float_to_float16(model, keep_io_types=True, op_block_list=blocked,
                                                 disable_shape_infer=False)
    target = out_dir / "model.onnx"
    onnx.save(converted, str(target))
    check_model(target)
    return target


def fp16_settings(op_block_list: Sequence[str] = DEFAULT_FP16_BLOCK_LIST) -> dict:
    import onnxconverter_common

    return {"tool": "onnxconverter_common.float16", "version": onnxconverter_common.__version__,
            "keep_io_types": True, "op_block_list": sorted(set(op_block_list))}
