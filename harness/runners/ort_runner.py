"""ONNX Runtime with any execution provider.

Inputs are cast to the dtypes the session declares (int64 ids, FP32 for FP16 models with
``keep_io_types``), outputs come back as FP32 numpy. Settings that change numbers or speed
(threads, graph optimisation level, provider) are explicit and reported.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from harness.core import Precision, Provider, Variant
from harness.core.phases import phase
from harness.runners import register_backend
from harness.runners.base import Backend, BackendContext, ChildLoad, Feeds, GraphRunner, TimedCall

if TYPE_CHECKING:  # pragma: no cover
    from harness.export.cache import CacheEntry
    from harness.families.base import Family, GraphSpec
    from harness.runners.trt_profile import ShapeProfile
    from harness.zoo.loading import LoadedModel

_ORT_TYPES: dict[str, type[np.generic]] = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_,
}


def _level(name: str) -> Callable[[], Any]:
    def get() -> Any:
        import onnxruntime as ort

        return getattr(ort.GraphOptimizationLevel, name)
    return get


#: session graph optimisation levels by the names users pass
OPTIMIZATION_LEVELS = {"disable": _level("ORT_DISABLE_ALL"), "basic": _level("ORT_ENABLE_BASIC"),
                       "extended": _level("ORT_ENABLE_EXTENDED"), "all": _level("ORT_ENABLE_ALL")}


def available_providers() -> list[str]:
    import onnxruntime as ort

    return list(ort.get_available_providers())


def session_settings(session: Any) -> dict[str, Any]:
    """The live session settings that change speed or memory (arena, memory pattern, threads)."""
    o = session.get_session_options()
    return {
        "enable_cpu_mem_arena": o.enable_cpu_mem_arena, "enable_mem_pattern": o.enable_mem_pattern,
        "enable_mem_reuse": o.enable_mem_reuse, "execution_mode": str(o.execution_mode),
        "graph_optimization_level": str(o.graph_optimization_level),
        "intra_op_num_threads": o.intra_op_num_threads, "inter_op_num_threads": o.inter_op_num_threads,
        "providers": session.get_providers(), "provider_options": session.get_provider_options(),
    }


#: execution providers that run on a GPU, whose memory the child reads through NVML
_GPU_PROVIDERS = frozenset({"CUDAExecutionProvider", "TensorrtExecutionProvider"})


def nvml_process_bytes() -> int | None:
    """GPU memory this process holds (ONNX Runtime has no peak counter of its own)."""
    import os

    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == os.getpid():
                return int(proc.usedGpuMemory or 0)
    except Exception:  # no pynvml, no driver: unknown, not zero
        return None
    return None


class OrtGraphRunner(GraphRunner):
    def __init__(self, path: str, provider: str, intra_op_threads: int | None = None,
                 inter_op_threads: int | None = None, provider_options: dict[str, str] | None = None,
                 optimization: str = "all", profile: "ShapeProfile | None" = None) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = OPTIMIZATION_LEVELS[optimization]()
        if intra_op_threads:
            options.intra_op_num_threads = intra_op_threads
        if inter_op_threads:
            options.inter_op_num_threads = inter_op_threads
        providers: list[Any] = [(provider, provider_options or {})]
        if provider != "CPUExecutionProvider":
            providers.append("CPUExecutionProvider")
        self.path = path
        self.profile = profile
        self.session: Any = ort.InferenceSession(path, options, providers=providers)
        self.providers: list[str] = self.session.get_providers()
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self._types = {i.name: _ORT_TYPES.get(i.type) for i in self.session.get_inputs()}

    def prepare(self, feeds: Feeds) -> dict[str, np.ndarray]:
        """This graph's inputs cast to the dtypes the session declares (int64 ids, FP32 for
        ``keep_io_types`` FP16 models): what ``session.run`` takes, so timing can exclude it."""
        out: dict[str, np.ndarray] = {}
        for n in self.input_names:
            wanted = self._types.get(n)
            value = np.asarray(feeds[n])
            out[n] = value.astype(wanted) if wanted is not None and value.dtype != wanted else feeds[n]
        return out

    def timed_call(self, feeds: Feeds) -> TimedCall:
        """``session.run`` on feeds already cast to the session's input types, as
        onnxruntime_perf_test times it: the FP32 copy of every output that :meth:`run` makes
        exists for comparisons, not deployments."""
        prepared = self.prepare(feeds)
        run = self.session.run
        return lambda: run(None, prepared)

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.profile is not None:
            self.profile.check(feeds)
        outs = self.session.run(None, self.prepare(feeds))
        return {n: (o.astype(np.float32) if np.issubdtype(o.dtype, np.floating) else o)
                for n, o in zip(self.output_names, outs)}

    def close(self) -> None:
        self.session = None


@register_backend
class OrtBackend(Backend):
    name = "onnxruntime"
    providers = (
        Provider("ort_cpu", name, "CPUExecutionProvider"),
        Provider("ort_cuda", name, "CUDAExecutionProvider", needs_gpu=True),
        Provider("ort_trt", name, "TensorrtExecutionProvider", needs_gpu=True),
        Provider("ort_openvino", name, "OpenVINOExecutionProvider"),
        Provider("ort_dml", name, "DmlExecutionProvider", needs_gpu=True),
        Provider("ort_coreml", name, "CoreMLExecutionProvider"),
    )

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

    def __init__(self, ctx: BackendContext) -> None:
        super().__init__(ctx)
        #: entries this backend (one case: the judge makes one per case) built rather than found in
        #: the cache; their files are recorded with ``cache_hit: false``
        self._built: set[Path] = set()

    def _entry(self, model: "LoadedModel", family: "Family", graph: "GraphSpec", variant: Variant) -> "CacheEntry":
        # imported here: exporting needs torch, running a built artifact must not (cold-start
        # and memory children load only onnxruntime)
        from harness.export.artifacts import onnx_artifact

        with phase("export"):
            entry = onnx_artifact(model, family, graph, variant.precision, self.ctx.settings, self.ctx.cache)
        if entry.built:
            self._built.add(entry.directory)
        return entry

    def load(self, model: "LoadedModel", family: "Family", graph: "GraphSpec", variant: Variant) -> GraphRunner:
        entry = self._entry(model, family, graph, variant)
        options, profile = self.provider_options(model, family, graph, variant, entry.directory)
        runner = OrtGraphRunner(str(entry.path()), variant.provider.device, self.ctx.intra_op_threads,
                                self.ctx.inter_op_threads, provider_options=options, profile=profile)
        if variant.provider.device not in runner.providers[:1]:
            raise RuntimeError(f"{variant.provider.device} was requested but the session runs on {runner.providers}")
        return runner

    def provider_options(self, model: "LoadedModel", family: "Family", graph: "GraphSpec", variant: Variant,
                         cache_dir: Path) -> tuple[dict[str, str], "ShapeProfile | None"]:
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

    def artifacts(self, model: "LoadedModel", family: "Family", graph: "GraphSpec",
                  variant: Variant) -> dict[str, dict[str, Any]]:
        entry = self._entry(model, family, graph, variant)
        hit = entry.directory not in self._built  # found in the cache, not exported for this case
        out = {}
        for name, digest in entry.files.items():
            p = entry.path(name)
            out[f"{graph.name}/{name}"] = {"path": str(p), "sha256": digest, "bytes": p.stat().st_size,
                                           "cache_hit": hit}
        return out

    def outputs_key(self, model: "LoadedModel", family: "Family", graph: "GraphSpec",
                    variant: Variant) -> dict[str, Any] | None:
        """CPU EP only (GPU providers may pick kernels per run): the artifact bytes, the ORT
        version, the thread settings and this module's code decide the outputs."""
        if variant.provider.device != "CPUExecutionProvider":
            return None
        import os

        import onnxruntime as ort

        from harness.core.cachedir import source_digest

        files = {name: info["sha256"] for name, info in self.artifacts(model, family, graph, variant).items()}
        return {"backend": self.name, "provider": variant.provider.device, "artifacts": files,
                "onnxruntime": ort.__version__, "intra_op_threads": self.ctx.intra_op_threads,
                "inter_op_threads": self.ctx.inter_op_threads, "cpus": os.cpu_count(),
                "runner": source_digest(OrtGraphRunner)}

    # -- fresh-process measurement -----------------------------------------------------------------------
    def child_spec(self, model: "LoadedModel", family: "Family", graphs: Sequence["GraphSpec"],
                   variant: Variant) -> dict[str, Any]:
        """Artifact paths from the cache (built here first if missing, so the child never exports)."""
        paths = {g.name: self.artifacts(model, family, g, variant)[f"{g.name}/model.onnx"]["path"] for g in graphs}
        return {"device": variant.provider.device, "graphs": paths,
                "intra_op_threads": self.ctx.intra_op_threads or 0, "inter_op_threads": self.ctx.inter_op_threads or 0}

    @classmethod
    def child_imports(cls) -> None:
        import onnxruntime  # noqa: F401  (numpy and this module are imported already; never torch)

    @classmethod
    def child_load(cls, spec: Mapping[str, Any]) -> ChildLoad:
        """One session per graph, as a deployed service would create them; each call is
        ``session.run`` on prepared feeds, what the in-process latency measurement times too."""
        device = str(spec["device"])
        runners: dict[str, OrtGraphRunner] = {}
        load: dict[str, float] = {}
        for name, path in dict(spec["graphs"]).items():
            start = time.perf_counter()
            runners[name] = OrtGraphRunner(str(path), device, int(spec.get("intra_op_threads") or 0) or None,
                                           int(spec.get("inter_op_threads") or 0) or None)
            load[name] = (time.perf_counter() - start) * 1000.0
        first = next(iter(runners.values()))
        if first.providers[0] != device:
            raise SystemExit(f"{device} was requested but the session runs on {first.providers}")
        calls = {g: _session_call(r) for g, r in runners.items()}
        gpu = nvml_process_bytes if device in _GPU_PROVIDERS else (lambda: None)
        return ChildLoad(calls, load, {"onnxruntime": session_settings(first.session)}, gpu)


def _session_call(runner: OrtGraphRunner) -> Callable[[Mapping[str, np.ndarray]], Any]:
    """The bare ``session.run`` on prepared feeds: what a fresh-process measurement times."""
    return lambda feeds: runner.session.run(None, runner.prepare(feeds))
