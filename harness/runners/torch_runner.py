"""PyTorch eager, the other side of every deployment comparison.

FP32 is the reference itself; FP16 is ``.half()`` (what users do before tracing for GPU);
INT8 is ``torch.ao.quantization.quantize_dynamic`` on Linear layers (CPU only).

torch is imported where it is used, not with the module: the provider table is read from
every backend class, and parsing ``--providers`` must not cost a torch import.
"""

from __future__ import annotations

import copy
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from harness.core import Precision, Provider, Variant
from harness.core.cachedir import source_digest
from harness.core.phases import phase
from harness.export.cache import ArtifactCache
from harness.families import family_for
from harness.runners import providers, register_backend
from harness.runners.base import Backend, BackendContext, ChildLoad, ChildSpec, Feeds, GraphRef, GraphRunner, TimedCall
from harness.zoo.base import ModelCatalog, cache_root
from harness.zoo.loading import load_model

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from harness.zoo.loading import LoadedModel

#: weight files a PyTorch deployment ships (its FP16/INT8 copies exist only in memory)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


class TorchGraphRunner(GraphRunner):
    def __init__(self, module: torch.nn.Module, input_names: Sequence[str], output_names: Sequence[str],
                 device: str, dtype: torch.dtype, fastpath: bool = True) -> None:
        self.module, self.device, self.dtype, self.fastpath = module, device, dtype, fastpath
        self.input_names, self.output_names = list(input_names), list(output_names)

    def _tensors(self, feeds: Mapping[str, np.ndarray]) -> list["torch.Tensor"]:
        """The feeds as the module takes them: zero-copy tensors on the device, floats at the
        runner's dtype, in the graph's input order."""
        import torch

        args = []
        for name in self.input_names:
            t = torch.from_numpy(np.ascontiguousarray(feeds[name])).to(self.device)
            if t.is_floating_point():
                t = t.to(self.dtype)
            args.append(t)
        return args

    def _forward(self, args: Sequence["torch.Tensor"]) -> Any:
        """One forward pass, as deployed: inference mode, the MHA fast path as configured, and on
        CUDA the device synchronised so the call is complete when it returns."""
        import torch

        previous = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(self.fastpath and previous)
        try:
            with torch.inference_mode():
                outs = self.module(*args)
        finally:
            torch.backends.mha.set_fastpath_enabled(previous)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        return outs

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outs = self._forward(self._tensors(feeds))
        return {n: (o.float() if o.is_floating_point() else o).cpu().numpy() for n, o in zip(self.output_names, outs)}

    def close(self) -> None:
        """Let go of the module (a released model's weights must not stay alive through a runner)."""
        self.module = None  # type: ignore[assignment]

    def synchronize(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()

    def timed_call(self, feeds: Feeds) -> TimedCall:
        """The forward pass on tensors prepared once outside the timed region (as ONNX Runtime's
        timed call is ``session.run`` on feeds already cast): numpy-to-tensor conversion and the
        FP32 numpy copy of the outputs exist for comparisons, not deployments, and would read as
        model time against the bare ``module(*tensors)`` loop of scripts/bench_fidelity.py. On
        CUDA the call ends with a device synchronise, so queued kernels are timed to completion."""
        args = self._tensors(self.prepare(feeds))
        forward = self._forward
        return lambda: forward(args)


def precision_model(model: "LoadedModel", precision: Precision, device: str,
                    per_channel: bool = False) -> torch.nn.Module:
    """The torch model at ``precision`` on ``device``; memoised on the loaded model's ``derived``
    objects, so it lives as long as the FP32 module it came from (``LoadedModel.release_module``)."""
    key = ("torch-precision", precision.value, device, per_channel and precision is Precision.INT8)
    if key not in model.derived:
        with phase("export"):  # the conversion is this backend's "export"
            model.derived[key] = _convert(model, precision, device, per_channel)
    m_out: torch.nn.Module = model.derived[key]
    return m_out


def _convert(model: "LoadedModel", precision: Precision, device: str, per_channel: bool) -> "torch.nn.Module":
    """The FP32 module itself, or a converted copy (FP16, dynamic INT8) on ``device``.

    The copy never holds a second FP32 set of weights: ``copy.deepcopy`` is handed a memo that
    maps every parameter and buffer to what the copy should hold -- the FP16 tensor, or (INT8,
    where ``quantize_dynamic`` swaps the Linear layers in place) the original tensor shared --
    so the module structure is copied and the weights are converted one tensor at a time. A
    plain ``deepcopy(...).half()`` peaks at two FP32 copies plus the FP16 one (measured: a
    2.2 GB model, 4.4 GB before ``half()`` returns)."""
    import torch

    if precision is Precision.FP32 and device == "cpu":
        return model.model
    source = model.model
    if precision is Precision.FP16:
        m = _copy_with(source, lambda t: t.detach().to(device=device, dtype=torch.float16)
                       if t.is_floating_point() else t.detach().to(device))
    elif precision is Precision.INT8:
        m = _copy_with(source, lambda t: t)  # shared until quantize_dynamic replaces the Linear weights
        with warnings.catch_warnings():  # deprecation notices, once per model, not actionable
            warnings.simplefilter("ignore")
            qconfig = torch.ao.quantization.per_channel_dynamic_qconfig if per_channel else None
            spec: Any = {torch.nn.Linear: qconfig} if per_channel else {torch.nn.Linear}
            m = torch.ao.quantization.quantize_dynamic(  # type: ignore[no-untyped-call]
                m, spec, dtype=torch.qint8, inplace=True)
    else:
        m = _copy_with(source, lambda t: t.detach().to(device))
    return m.to(device).eval()


def _copy_with(module: "torch.nn.Module", convert: "Callable[[torch.Tensor], torch.Tensor]") -> "torch.nn.Module":
    """``copy.deepcopy(module)`` whose parameters and buffers are ``convert(tensor)`` (shared
    parameters stay shared: the memo maps each tensor once)."""
    import torch

    memo: dict[int, Any] = {}
    for p in module.parameters():
        if id(p) not in memo:
            memo[id(p)] = torch.nn.Parameter(convert(p), requires_grad=False)
    for b in module.buffers():
        if id(b) not in memo:
            memo[id(b)] = convert(b)
    return copy.deepcopy(module, memo)


@register_backend
class TorchBackend(Backend):
    name = "pytorch"
    label = "PyTorch eager"
    providers = (Provider("torch_cpu", name, "cpu"), Provider("torch_cuda", name, "cuda", needs_gpu=True))
    runtime_settings = frozenset({"intra_op_threads"})
    uses_torch_module = True

    @classmethod
    def unavailable_reason(cls, variant: Variant) -> str | None:
        import torch

        device = variant.provider.device
        if device.startswith("cuda") and not torch.cuda.is_available():
            return "no CUDA device (torch.cuda.is_available() is False)"
        if variant.precision is Precision.INT8 and device != "cpu":
            return "PyTorch dynamic INT8 quantization runs on CPU only"
        if variant.precision is Precision.INT8_STATIC:
            return ("int8-static is a calibrated QDQ ONNX artifact; PyTorch has no counterpart variant "
                    "here (judge it on an ONNX Runtime provider)")
        if variant.precision is Precision.INT4:
            return ("int4 is a weight-only MatMulNBits ONNX artifact; PyTorch has no counterpart variant "
                    "here (judge it on an ONNX Runtime provider)")
        return None

    @classmethod
    def runtime_summary(cls) -> str:
        import torch

        cuda = torch.cuda.is_available()
        gpus = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())) if cuda else "none"
        return f"torch {torch.__version__}: CUDA available {cuda} (devices: {gpus})"

    @classmethod
    def deterministic(cls, variant: Variant) -> bool:
        """PyTorch's CPU kernels are fixed for a version, a precision recipe and a thread count."""
        return variant.provider.device == "cpu"

    def outputs_key(self, ref: GraphRef) -> dict[str, Any] | None:
        """CPU only: precision recipe, torch version, thread count and this module's code decide
        the outputs (weights, family code and feeds are in the workspace's part of the key)."""
        variant = ref.variant
        if not self.deterministic(variant):
            return None
        import torch

        return {"backend": self.name, "precision": variant.precision.value,
                "per_channel": self.ctx.settings.int8_per_channel and variant.precision is Precision.INT8,
                "torch": torch.__version__, "threads": self.ctx.intra_op_threads or torch.get_num_threads(),
                "runner": source_digest(TorchBackend)}

    def load(self, ref: GraphRef) -> GraphRunner:
        model, family, graph, variant = ref.model, ref.family, ref.graph, ref.variant
        import torch

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

    def shipped_files(self, refs: Sequence[GraphRef]) -> dict[str, int]:
        """The model directory's weight files: FP16 and INT8 are made in memory at load."""
        return {p.name: p.stat().st_size for p in sorted(Path(refs[0].model.path).iterdir())
                if p.suffix in WEIGHT_SUFFIXES}

    # -- fresh-process measurement -----------------------------------------------------------------------
    def child_spec(self, refs: Sequence[GraphRef]) -> ChildSpec:
        """Model name and cache dir: the child loads the weights itself, as a service would."""
        variant = refs[0].variant
        return ChildSpec([r.graph.name for r in refs], None, self.ctx.intra_op_threads or 0,
                         self.ctx.inter_op_threads or 0,
                         {"model": variant.model, "precision": variant.precision.value,
                          "provider": variant.provider.short,
                          "cache": str(self.ctx.cache_dir) if self.ctx.cache_dir else None})

    @classmethod
    def child_imports(cls) -> None:
        import harness.families  # noqa: F401  # deferred: the cold-start child's timed import step (the families' graph modules)
        import harness.zoo.loading  # noqa: F401  # deferred: the cold-start child's timed import step (torch, transformers, loaders)

    @classmethod
    def child_load(cls, spec: ChildSpec) -> ChildLoad:
        """Weights and tokenizer once (``weights``), then every graph's module at the precision.
        Loads the model the way a service would -- the zoo's spec, ``load_model``, the family's
        graphs -- with nothing of the judge (no workspace, no references)."""
        import torch

        from harness.export.artifacts import ExportSettings
        own = spec.options
        variant = Variant(str(own["model"]), Precision(own["precision"]), providers()[str(own["provider"])])
        cache = Path(str(own["cache"])) if own.get("cache") else cache_root()
        start = time.perf_counter()
        model_spec = ModelCatalog().resolve(variant.model)
        model = load_model(model_spec, lazy=True)
        family = family_for(model.family)
        export = ExportSettings(int8_per_channel=model_spec.int8_per_channel)  # the run's default recipe
        ctx = BackendContext(ArtifactCache(cache / "artifacts"), export, spec.threads(),
                             spec.threads("inter_op_threads"), cache_dir=cache)
        backend = cls(ctx)
        load = {"weights": (time.perf_counter() - start) * 1000.0}  # weights and tokenizer, shared by the graphs
        runners: dict[str, GraphRunner] = {}
        for graph in family.graphs(model):
            if graph.name in spec.graphs:
                start = time.perf_counter()
                runners[graph.name] = backend.load(GraphRef(model, family, graph, variant))
                load[graph.name] = (time.perf_counter() - start) * 1000.0
        settings = {"torch": {"num_threads": torch.get_num_threads(),
                              "num_interop_threads": torch.get_num_interop_threads(),
                              "device": variant.provider.device}}
        on_gpu = variant.provider.device.startswith("cuda") and torch.cuda.is_available()
        return ChildLoad({g: r.run for g, r in runners.items()}, load, settings,
                         (lambda: int(torch.cuda.max_memory_allocated())) if on_gpu else (lambda: None))
