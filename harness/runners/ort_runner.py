"""ONNX Runtime with any execution provider.

Inputs are cast to the dtypes the session declares (int64 ids, FP32 for FP16 models with
``keep_io_types``), outputs come back as FP32 numpy. Settings that change numbers or speed
(threads, graph optimisation level, provider) are explicit and reported.
"""

from __future__ import annotations

import numpy as np
from typing import TYPE_CHECKING, Mapping

from harness.config import Precision, Variant
from harness.runners import register_backend
from harness.runners.base import Backend, GraphRunner

if TYPE_CHECKING:  # pragma: no cover
    from harness.runners.trt_profile import ShapeProfile

_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_,
}


def _level(name: str):
    def get():
        import onnxruntime as ort

        return getattr(ort.GraphOptimizationLevel, name)
    return get


#: session graph optimisation levels by the names users pass
OPTIMIZATION_LEVELS = {"disable": _level("ORT_DISABLE_ALL"), "basic": _level("ORT_ENABLE_BASIC"),
                       "extended": _level("ORT_ENABLE_EXTENDED"), "all": _level("ORT_ENABLE_ALL")}


def available_providers() -> list[str]:
    import onnxruntime as ort

    return list(ort.get_available_providers())


class OrtGraphRunner(GraphRunner):
    def __init__(self, path: str, provider: str, intra_op_threads: int | None = None,
                 inter_op_threads: int | None = None, provider_options: dict | None = None,
                 optimization: str = "all", profile: "ShapeProfile | None" = None) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = OPTIMIZATION_LEVELS[optimization]()
        if intra_op_threads:
            options.intra_op_num_threads = intra_op_threads
        if inter_op_threads:
            options.inter_op_num_threads = inter_op_threads
        providers: list = [(provider, provider_options or {})]
        if provider != "CPUExecutionProvider":
            providers.append("CPUExecutionProvider")
        self.path = path
        self.profile = profile
        self.session = ort.InferenceSession(path, options, providers=providers)
        self.providers = self.session.get_providers()
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self._types = {i.name: _ORT_TYPES.get(i.type) for i in self.session.get_inputs()}

    def prepare(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """This graph's inputs cast to the dtypes the session declares (int64 ids, FP32 for
        ``keep_io_types`` FP16 models): what ``session.run`` takes, so timing can exclude it."""
        return {n: (np.asarray(feeds[n]).astype(self._types[n]) if self._types.get(n)
                    and np.asarray(feeds[n]).dtype != self._types[n] else feeds[n]) for n in self.input_names}

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.profile is not None:
            self.profile.check(feeds)
        outs = self.session.run(None, self.prepare(feeds))
        return {n: (o.astype(np.float32) if np.issubdtype(o.dtype, np.floating) else o)
                for n, o in zip(self.output_names, outs)}

    def close(self) -> None:
        self.session = None  # type: ignore[assignment]


@register_backend
class OrtBackend(Backend):
    name = "onnxruntime"
    #: executes ONNX files: pre-built artifacts (``harness check``) can stand in for its exports
    runs_onnx_files = True

    @classmethod
    def unavailable_reason(cls, variant: Variant) -> str | None:
        try:
            installed = available_providers()
        except ImportError:
            return "onnxruntime not installed"
        if variant.provider.device not in installed:
            return f"{variant.provider.device} not available; installed: {installed}"
        if variant.provider.device == "TensorrtExecutionProvider" and variant.precision is Precision.INT8:
            return "INT8 on TensorRT needs a calibration table; dynamic-quantized ONNX is not a TensorRT INT8 path"
        return None

    def _entry(self, model, family, graph, variant):
        # imported here: exporting needs torch, running a built artifact must not (cold-start
        # and memory children load only onnxruntime)
        from harness.export.artifacts import onnx_artifact

        return onnx_artifact(model, family, graph, variant.precision, self.ctx.settings, self.ctx.cache)

    def load(self, model, family, graph, variant) -> GraphRunner:
        entry = self._entry(model, family, graph, variant)
        options, profile = self.provider_options(model, family, graph, variant, entry.directory)
        runner = OrtGraphRunner(str(entry.path()), variant.provider.device, self.ctx.intra_op_threads,
                                self.ctx.inter_op_threads, provider_options=options, profile=profile)
        if variant.provider.device not in runner.providers[:1]:
            raise RuntimeError(f"{variant.provider.device} was requested but the session runs on {runner.providers}")
        return runner

    def provider_options(self, model, family, graph, variant, cache_dir) -> tuple[dict, "ShapeProfile | None"]:
        """Execution-provider settings; for TensorRT: the shape profile, FP16 and engine cache."""
        if variant.provider.device != "TensorrtExecutionProvider":
            return {}, None
        from harness.runners.trt_profile import profile_for

        profile = profile_for(graph, family.export_example(model, graph), max_batch=self.ctx.trt_max_batch,
                              max_seq=self.ctx.trt_max_seq)
        options = {**profile.provider_options(), "trt_engine_cache_enable": "True",
                   "trt_engine_cache_path": str(cache_dir / "trt-engines"),
                   "trt_fp16_enable": "True" if variant.precision is Precision.FP16 else "False"}
        return options, profile

    def artifacts(self, model, family, graph, variant) -> dict[str, dict]:
        entry = self._entry(model, family, graph, variant)
        out = {}
        for name, digest in entry.files.items():
            p = entry.path(name)
            out[f"{graph.name}/{name}"] = {"path": str(p), "sha256": digest, "bytes": p.stat().st_size,
                                           "cache_hit": not entry.built}
        return out

