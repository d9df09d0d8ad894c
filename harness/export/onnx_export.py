"""torch -> ONNX for one graph: TorchScript exporter by default, dynamo selectable.

Every axis named in the graph's ``dynamic_axes`` stays symbolic (batch, sequence, past),
and ``onnx.checker`` validates every file written. The module is asserted to be in eval
mode before and after export (PITFALLS #1: export can flip a model into training mode).
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from pathlib import Path
from typing import Mapping

import numpy as np
import onnx
import torch

from harness.core import UsageError
from harness.export.external import ExternalDataError, normalize
from harness.families.base import GraphSpec
from harness.families.graph_modules import GraphModule, to_torch

EXPORTERS = ("torchscript", "dynamo")


class ExportError(RuntimeError):
    """torch.onnx.export failed; the message names the graph and exporter."""


def check_model(path: Path) -> None:
    """``onnx.checker`` with full checks; by path so >2 GB models with external data work."""
    onnx.checker.check_model(str(path), full_check=False)


def export_graph(module: GraphModule, graph: GraphSpec, example: Mapping[str, np.ndarray], out: Path, *,
                 opset: int = 17, exporter: str = "torchscript", check_training: bool = True,
                 external_data: str = "auto") -> Path:
    """Export ``module`` to ``out/model.onnx``; weights go to ``model.onnx.data`` when
    ``external_data`` decides so (``harness.export.external``)."""
    if exporter not in EXPORTERS:
        raise UsageError(f"--exporter: unknown exporter {exporter!r}; valid: {', '.join(EXPORTERS)}")
    if check_training and any(m.training for m in module.modules()):
        raise ExportError(f"{graph.name}: module is in training mode; call .eval() before export")
    args = to_torch(example, graph.input_names)
    target = out / "model.onnx"
    axes = {k: dict(v) for k, v in graph.dynamic_axes.items() if k in graph.input_names + graph.output_names}
    sink = io.StringIO()
    # The fused nn.TransformerEncoderLayer fast path (aten::_transformer_encoder_layer_fwd)
    # has no ONNX symbolic; tracing must see the regular ops.
    fastpath = torch.backends.mha.get_fastpath_enabled()
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # opset/torchvision chatter
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            warnings.simplefilter("ignore")
            if exporter == "torchscript":
                torch.onnx.export(module, args, str(target), input_names=list(graph.input_names),
                                  output_names=list(graph.output_names), dynamic_axes=axes,
                                  opset_version=opset, do_constant_folding=True, dynamo=False)
            else:
                program = torch.onnx.export(module, args, input_names=list(graph.input_names),
                                            output_names=list(graph.output_names), dynamic_axes=axes,
                                            opset_version=opset, dynamo=True, optimize=True)
                if program is None:  # only the legacy exporter returns None
                    raise RuntimeError("the dynamo exporter returned no program")
                program.save(str(target))
    except Exception as exc:  # the exporters raise many unrelated types
        raise ExportError(f"{graph.name}: {exporter} export failed: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    if check_training and any(m.training for m in module.modules()):
        raise ExportError(f"{graph.name}: export left the module in training mode")
    try:
        normalize(target, external_data)
    except ExternalDataError as exc:
        raise ExportError(f"{graph.name}: {exc}") from None
    check_model(target)
    return target
