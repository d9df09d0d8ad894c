"""PyTorch eager, the other side of every deployment comparison.

FP32 is the reference itself; FP16 is ``.half()`` (what users do before tracing for GPU);
INT8 is ``torch.ao.quantization.quantize_dynamic`` on Linear layers (CPU only).
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import torch

from harness.config import Precision, Variant
from harness.runners import register_backend
from harness.runners.base import Backend, GraphRunner


class TorchGraphRunner(GraphRunner):
    def __init__(self, module: torch.nn.Module, input_names, output_names, device: str, dtype: torch.dtype,
                 fastpath: bool = True) -> None:
        self.module, self.device, self.dtype, self.fastpath = module, device, dtype, fastpath
        self.input_names, self.output_names = list(input_names), list(output_names)

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        args = []
        for name in self.input_names:
            t = torch.from_numpy(np.ascontiguousarray(feeds[name])).to(self.device)
            if t.is_floating_point():
                t = t.to(self.dtype)
            args.append(t)
        previous = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(self.fastpath and previous)
        try:
            with torch.inference_mode():
                outs = self.module(*args)
        finally:
            torch.backends.mha.set_fastpath_enabled(previous)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return {n: (o.float() if o.is_floating_point() else o).cpu().numpy() for n, o in zip(self.output_names, outs)}


def precision_model(model, precision: Precision, device: str, per_channel: bool = False) -> torch.nn.Module:
    """The torch model at ``precision`` on ``device``; memoised per loaded model."""
    key = ("torch-precision", precision.value, device, per_channel and precision is Precision.INT8)
    if key not in model.cache:
        if precision is Precision.FP32 and device == "cpu":
            m = model.model
        else:
            m = copy.deepcopy(model.model)
            if precision is Precision.FP16:
                m = m.half()
            elif precision is Precision.INT8:
                with warnings.catch_warnings():  # deprecation notices, once per model, not actionable
                    warnings.simplefilter("ignore")
                    if per_channel:
                        spec = {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig}
                        m = torch.ao.quantization.quantize_dynamic(m, spec, dtype=torch.qint8)
                    else:
                        m = torch.ao.quantization.quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8)
            m = m.to(device).eval()
        model.cache[key] = m
    return model.cache[key]


@register_backend
class TorchBackend(Backend):
    name = "pytorch"

    @classmethod
    def unavailable_reason(cls, variant: Variant) -> str | None:
        device = variant.provider.device
        if device.startswith("cuda") and not torch.cuda.is_available():
            return "no CUDA device (torch.cuda.is_available() is False)"
        if variant.precision is Precision.INT8 and device != "cpu":
            return "PyTorch dynamic INT8 quantization runs on CPU only"
        return None

    def load(self, model, family, graph, variant) -> GraphRunner:
        device = variant.provider.device
        if self.ctx.intra_op_threads:
            torch.set_num_threads(self.ctx.intra_op_threads)
        m = precision_model(model, variant.precision, device, per_channel=self.ctx.settings.int8_per_channel)
        dtype = torch.float16 if variant.precision is Precision.FP16 else torch.float32
        module = family.module(model, graph, m)
        # nn.TransformerEncoder's fused fast path reads Linear weights directly, which dynamic
        # quantization replaces with packed params: INT8 takes the regular path.
        return TorchGraphRunner(module, graph.input_names, graph.output_names, device, dtype,
                                fastpath=variant.precision is not Precision.INT8)
