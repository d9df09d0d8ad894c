"""ONNX Runtime with any execution provider.

Inputs are cast to the dtypes the session declares (int64 ids, FP32 for FP16 models with
``keep_io_types``), outputs come back as FP32 numpy. Settings that change numbers or speed
(threads, graph optimisation level, provider) are explicit and reported.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from harness.core import Precision, Provider, UsageError, Variant, did_you_mean
from harness.core.cachedir import source_digest
from harness.core.errors import valid_names
from harness.core.quiet import routed_output
from harness.core.runtime import SHARED_OPTIONS, Axis, BackendSettings, RuntimeSettings, runtime_from_dict, setting
from harness.runners import register_backend
from harness.runners.base import (
    Backend,
    BackendContext,
    ChildLoad,
    ChildSpec,
    Feeds,
    GraphRef,
    GraphRunner,
    OnnxExports,
    TimedCall,
)
from harness.runners.gpu_memory import nvml_process_bytes
from harness.runners.trt_profile import TensorRTSettings, profile_for

if TYPE_CHECKING:  # pragma: no cover
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


#: session graph optimisation levels by the names users pass (``disable``: the older spelling)
OPTIMIZATION_LEVELS = {"disabled": _level("ORT_DISABLE_ALL"), "disable": _level("ORT_DISABLE_ALL"),
                       "basic": _level("ORT_ENABLE_BASIC"), "extended": _level("ORT_ENABLE_EXTENDED"),
                       "all": _level("ORT_ENABLE_ALL")}

#: ONNX Runtime graph optimisation levels, by the names users write (``ORT_DISABLE_ALL`` ...)
GRAPH_OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")
EXECUTION_MODES = ("sequential", "parallel")


def graph_level(raw: object, where: str) -> str:
    """One graph optimisation level as users write it (``disable`` is the older spelling)."""
    level = str(raw).strip().lower()
    if level == "disable":
        level = "disabled"
    if level not in GRAPH_OPTIMIZATION_LEVELS:
        raise UsageError(f"{where}: unknown level {raw!r}{did_you_mean(level, GRAPH_OPTIMIZATION_LEVELS)}; "
                         f"valid: {', '.join(GRAPH_OPTIMIZATION_LEVELS)}")
    return level


def _on(raw: object, where: str) -> bool:
    """``on``/``off`` (the option's words) or a TOML boolean."""
    return raw if isinstance(raw, bool) else str(raw).lower() == "on"


def custom_op_library(raw: object, where: str) -> str:
    """A custom-op library as named: an existing regular file, recorded by its absolute path."""
    if raw in (None, ""):
        return ""
    path = Path(str(raw)).expanduser()
    if not path.is_file():
        raise UsageError(f"{where}: {raw}: no such file (a shared library of custom-op kernels)")
    return str(path.resolve())


#: ONNX Runtime's session configuration keys (``onnxruntime_session_options_config_keys.h``, 1.2x-1.3x)
#: that change how a judged or timed session computes, or what it holds in memory. ONNX Runtime
#: accepts any key and ignores one it does not know, so a typo would measure the default silently:
#: the harness refuses keys outside this list.
SESSION_CONFIG_KEYS: tuple[str, ...] = (
    "session.disable_prepacking", "session.use_env_allocators", "session.set_denormal_as_zero",
    "session.disable_quant_qdq", "session.disable_double_qdq_remover", "session.enable_quant_qdq_cleanup",
    "session.disable_aot_function_inlining", "session.disable_cpu_ep_fallback", "session.use_device_allocator_for_initializers",
    "session.inter_op.allow_spinning", "session.intra_op.allow_spinning", "session.force_spinning_stop",
    "session.intra_op_thread_affinities", "session.dynamic_block_base", "session.x64quantprecision",
    "session.qdqisint8allowed", "session.qdq_matmulnbits_accuracy_level", "session.use_deterministic_compute",
    "session.strict_shape_type_inference", "session.allow_released_opsets_only", "session.graph_optimizations_loop_level",
    "session.use_per_session_threads", "session.prepack.enable_parallel",
    "optimization.enable_gelu_approximation", "optimization.disable_specified_optimizers",
    "optimization.enable_cast_chain_elimination", "optimization.minimal_build_optimizations",
    "mlas.disable_kleidiai", "mlas.use_lut_gemm", "mlas.qnbit.force_fp32",
)


def session_config(raw: object, where: str) -> tuple[tuple[str, str], ...]:
    """``["session.intra_op.allow_spinning=0", ...]`` (CLI) or a TOML table -> sorted (key, value)
    pairs, each key one of :data:`SESSION_CONFIG_KEYS` (values are text, as ONNX Runtime takes them)."""
    if raw in (None, "", ()):
        return ()
    pairs: dict[str, str] = {}
    if isinstance(raw, Mapping):
        pairs = {str(k): ("1" if v is True else "0" if v is False else str(v)) for k, v in raw.items()}
    else:
        for entry in [raw] if isinstance(raw, str) else list(raw):  # type: ignore[call-overload]
            if isinstance(entry, (list, tuple)) and len(entry) == 2:  # a repro manifest's [key, value]
                entry = f"{entry[0]}={entry[1]}"
            key, eq, value = str(entry).partition("=")
            if not eq or not key.strip():
                raise UsageError(f"{where}: expected KEY=VALUE like session.intra_op.allow_spinning=0, got {entry!r}")
            pairs[key.strip()] = value.strip()
    for key in pairs:
        if key not in SESSION_CONFIG_KEYS:
            raise UsageError(f"{where}: {key!r} is not a session configuration key the harness knows (ONNX Runtime "
                             f"would ignore it and run with its default){did_you_mean(key, SESSION_CONFIG_KEYS)}; "
                             f"{valid_names(key, SESSION_CONFIG_KEYS)}")
    return tuple(sorted(pairs.items()))


def _mode(raw: object, where: str) -> str:
    mode = str(raw).strip().lower()
    if mode not in EXECUTION_MODES:
        raise UsageError(f"{where}: unknown value {raw!r}; valid: {', '.join(EXECUTION_MODES)}")
    return mode


@BackendSettings.declare
@dataclass(frozen=True)
class OrtSessionSettings(BackendSettings):
    """ONNX Runtime's session options (``ort.SessionOptions``; :func:`session_options` applies them).
    The graph optimisation level decides which fused kernels run (``all`` vs ``disabled`` is where a
    fused attention or LayerNorm changes the last bits) and may be a matrix axis; execution mode,
    memory pattern and arena change latency and peak memory."""

    section: ClassVar[str] = "onnxruntime"
    doc: ClassVar[str] = "ONNX Runtime session options (every ORT provider)"

    graph_optimization: str = setting(
        "all", parse=graph_level, describe=lambda v: f"opt={v}" if v != "all" else None,
        axis=Axis("graph_optimization", "opt", "all", GRAPH_OPTIMIZATION_LEVELS))
    execution_mode: str = setting("sequential", parse=_mode, describe=lambda v: f"exec={v}" if v != "sequential" else None)
    mem_pattern: bool = setting(True, parse=_on, decode=bool, describe=lambda v: None if v else "mem_pattern=off")
    cpu_arena: bool = setting(True, parse=_on, decode=bool, describe=lambda v: None if v else "arena=off")
    #: a shared library of custom-op kernels (onnxruntime-extensions, a vendor's ops): native code,
    #: so it is loaded only when named (``harness.runners.intake`` refuses custom domains otherwise)
    custom_op_library: str = setting("", parse=lambda raw, where: custom_op_library(raw, where),
                                     describe=lambda v: f"custom_ops={Path(v).name}" if v else None)
    #: session configuration entries (``SessionOptions.add_session_config_entry``): spinning, pre-packing,
    #: denormals, GELU approximation... each one a key of :data:`SESSION_CONFIG_KEYS`
    session_config: tuple[tuple[str, str], ...] = setting(
        (), parse=session_config, encode=lambda v: dict(v), decode=lambda v: session_config(v or {}, "record"),
        describe=lambda v: " ".join(f"{k}={x}" for k, x in v) or None)


_BOOL = ("True", "False", "true", "false", "1", "0")
#: the EP options each execution provider accepts (onnxruntime 1.2x-1.3x documentation), with
#: the allowed values where they are an enumeration; what a run declares is checked against
#: this before anything runs, so a typo is one exit-2 line instead of a session error mid-run
_CUDA_OPTIONS: dict[str, tuple[str, ...] | None] = {
    "device_id": None, "gpu_mem_limit": None,
    "arena_extend_strategy": ("kNextPowerOfTwo", "kSameAsRequested"),
    "cudnn_conv_algo_search": ("EXHAUSTIVE", "HEURISTIC", "DEFAULT"),
    "do_copy_in_default_stream": _BOOL, "cudnn_conv_use_max_workspace": _BOOL,
    "cudnn_conv1d_pad_to_nc1d": _BOOL, "enable_cuda_graph": _BOOL,
    "enable_skip_layer_norm_strict_mode": _BOOL, "prefer_nhwc": _BOOL, "use_tf32": _BOOL,
    "use_ep_level_unified_stream": _BOOL, "tunable_op_enable": _BOOL, "tunable_op_tuning_enable": _BOOL,
    "tunable_op_max_tuning_duration_ms": None, "fuse_conv_bias": _BOOL, "sdpa_kernel": None,
}
_TRT_OPTIONS: dict[str, tuple[str, ...] | None] = {
    "device_id": None, "trt_max_workspace_size": None, "trt_max_partition_iterations": None,
    "trt_min_subgraph_size": None, "trt_fp16_enable": _BOOL, "trt_bf16_enable": _BOOL, "trt_int8_enable": _BOOL,
    "trt_int8_calibration_table_name": None, "trt_int8_use_native_calibration_table": _BOOL,
    "trt_dla_enable": _BOOL, "trt_dla_core": None, "trt_dump_subgraphs": _BOOL,
    "trt_engine_cache_enable": _BOOL, "trt_engine_cache_path": None, "trt_engine_cache_prefix": None,
    "trt_timing_cache_enable": _BOOL, "trt_timing_cache_path": None, "trt_force_timing_cache": _BOOL,
    "trt_detailed_build_log": _BOOL, "trt_build_heuristics_enable": _BOOL, "trt_sparsity_enable": _BOOL,
    "trt_builder_optimization_level": ("0", "1", "2", "3", "4", "5"), "trt_auxiliary_streams": None,
    "trt_tactic_sources": None, "trt_extra_plugin_lib_paths": None, "trt_force_sequential_engine_build": _BOOL,
    "trt_context_memory_sharing_enable": _BOOL, "trt_layer_norm_fp32_fallback": _BOOL,
    "trt_cuda_graph_enable": _BOOL, "trt_profile_min_shapes": None, "trt_profile_opt_shapes": None,
    "trt_profile_max_shapes": None, "trt_engine_hw_compatible": _BOOL, "trt_ep_context_file_path": None,
    "trt_dump_ep_context_model": _BOOL, "trt_weight_stripped_engine_enable": _BOOL,
}
_OPENVINO_EP_OPTIONS: dict[str, tuple[str, ...] | None] = {
    "device_type": None, "precision": ("FP32", "FP16", "ACCURACY"), "num_of_threads": None, "num_streams": None,
    "cache_dir": None, "enable_opencl_throttling": _BOOL, "enable_qdq_optimizer": _BOOL,
    "disable_dynamic_shapes": _BOOL, "load_config": None, "model_priority": None,
}


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


def session_options(runtime: "RuntimeSettings | None" = None, *, profile_prefix: str | None = None) -> Any:
    """``ort.SessionOptions`` from the runtime settings: the one place they become ORT's."""
    import onnxruntime as ort

    runtime = runtime or RuntimeSettings()
    session = runtime.of(OrtSessionSettings)
    options = ort.SessionOptions()
    # fatal only: every error ORT would log is also raised, and the harness reports it (explained,
    # under its own header) -- ORT's red log lines used to print above it
    options.log_severity_level = 4
    options.graph_optimization_level = OPTIMIZATION_LEVELS[session.graph_optimization]()
    if runtime.intra_op_threads:
        options.intra_op_num_threads = runtime.intra_op_threads
    if runtime.inter_op_threads:
        options.inter_op_num_threads = runtime.inter_op_threads
    options.execution_mode = (ort.ExecutionMode.ORT_PARALLEL if session.execution_mode == "parallel"
                              else ort.ExecutionMode.ORT_SEQUENTIAL)
    options.enable_mem_pattern = session.mem_pattern
    options.enable_cpu_mem_arena = session.cpu_arena
    if session.custom_op_library:
        options.register_custom_ops_library(session.custom_op_library)
    for key, value in session.session_config:
        options.add_session_config_entry(key, value)
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return options


class OrtGraphRunner(GraphRunner):
    def __init__(self, path: str, provider: str, intra_op_threads: int | None = None,
                 inter_op_threads: int | None = None, provider_options: dict[str, str] | None = None,
                 optimization: str | None = None, profile: "ShapeProfile | None" = None, *,
                 runtime: "RuntimeSettings | None" = None, profile_prefix: str | None = None) -> None:
        import onnxruntime as ort


        runtime = runtime or RuntimeSettings()
        overrides: dict[str, Any] = {}
        if intra_op_threads:
            overrides["intra_op_threads"] = intra_op_threads
        if inter_op_threads:
            overrides["inter_op_threads"] = inter_op_threads
        if optimization:
            overrides["graph_optimization"] = optimization
        runtime = runtime.merged(overrides) if overrides else runtime
        options = session_options(runtime, profile_prefix=profile_prefix)
        self.runtime = runtime
        self.profiling = bool(profile_prefix)
        providers: list[Any] = [(provider, provider_options or {})]
        if provider != "CPUExecutionProvider":
            providers.append("CPUExecutionProvider")
        self.path = path
        self.profile = profile

        with routed_output(f"onnxruntime session for {path}"):  # a refused file: the exception, not ORT's log line
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

    def end_profiling(self) -> str | None:
        """Stop profiling and return the trace file (None when the session was not profiled)."""
        if not self.profiling or self.session is None:
            return None
        self.profiling = False
        return str(self.session.end_profiling())

    def close(self) -> None:
        self.session = None


@register_backend
class OrtBackend(Backend):
    name = "onnxruntime"
    label = "ORT"
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
    #: every shared setting, its session options and, for its TensorRT EP, the TensorRT settings
    runtime_settings = frozenset(SHARED_OPTIONS.values()) | OrtSessionSettings.names() | TensorRTSettings.names()
    provider_option_keys = {
        "CPUExecutionProvider": {"use_arena": _BOOL},
        "CUDAExecutionProvider": _CUDA_OPTIONS,
        "TensorrtExecutionProvider": _TRT_OPTIONS,
        "OpenVINOExecutionProvider": _OPENVINO_EP_OPTIONS,
    }

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

    @classmethod
    def runtime_summary(cls) -> str:
        try:
            import onnxruntime as ort
        except ImportError:
            return "onnxruntime: not installed"
        # the line doctor printed before it listed every backend: kept, so anything reading it still does
        return f"onnxruntime execution providers: {', '.join(available_providers())} (onnxruntime {ort.__version__})"

    @classmethod
    def open_onnx_file(cls, path: Path, provider: Provider, precision: Precision, threads: int | None,
                       runtime: "RuntimeSettings | None" = None, *, profile_prefix: str | None = None) -> GraphRunner:
        options = dict(runtime.options_for(provider.short)) if runtime is not None else {}
        return OrtGraphRunner(str(path), provider.device, threads, provider_options=options, runtime=runtime,
                              profile_prefix=profile_prefix if runtime is not None and runtime.profile else None)

    def __init__(self, ctx: BackendContext) -> None:
        super().__init__(ctx)
        self.exports = OnnxExports(ctx)

    def load(self, ref: GraphRef) -> GraphRunner:
        graph, variant = ref.graph, ref.variant
        entry = self.exports.entry(ref)
        options, profile = self.provider_options(ref, entry.directory)
        runner = OrtGraphRunner(str(entry.path()), variant.provider.device, self.ctx.intra_op_threads,
                                self.ctx.inter_op_threads, provider_options=options, profile=profile,
                                runtime=self.ctx.runtime, profile_prefix=self.profile_prefix(graph))
        if variant.provider.device not in runner.providers[:1]:
            raise RuntimeError(f"{variant.provider.device} was requested but the session runs on {runner.providers}")
        return runner

    def profile_prefix(self, graph: "GraphSpec") -> str | None:
        """Where ORT profiling writes this graph's trace (the case directory), when profiling."""
        if not (self.ctx.runtime.profile and self.ctx.profile_dir is not None):
            return None
        self.ctx.profile_dir.mkdir(parents=True, exist_ok=True)
        return str(self.ctx.profile_dir / f"ort-profile-{graph.name}")

    def provider_options(self, ref: GraphRef, cache_dir: Path) -> tuple[dict[str, str], "ShapeProfile | None"]:
        """Execution-provider settings: the run's declared EP options for this provider; for
        TensorRT also the shape profile (explicit per-input min/opt/max where declared, derived
        from the graph's dynamic axes elsewhere), FP16 and the engine / timing caches."""
        model, family, graph, variant = ref.model, ref.family, ref.graph, ref.variant
        declared = self.ctx.runtime.options_for(variant.provider.short)
        if variant.provider.device != "TensorrtExecutionProvider":
            return declared, None
        profile = self.trt_profile(model, family, graph)
        trt = self.ctx.runtime.of(TensorRTSettings)
        options = {**profile.provider_options(), "trt_engine_cache_enable": "True",
                   "trt_engine_cache_path": trt.trt_engine_cache or str(cache_dir / "trt-engines"),
                   "trt_fp16_enable": "True" if variant.precision is Precision.FP16 else "False"}
        if trt.trt_timing_cache:
            options.update(trt_timing_cache_enable="True", trt_timing_cache_path=trt.trt_timing_cache)
        return {**options, **declared}, profile

    def trt_profile(self, model: "LoadedModel", family: "Family", graph: "GraphSpec") -> "ShapeProfile":
        """The TensorRT profile of ``graph``: derived, with the declared inputs replaced."""
        trt = self.ctx.runtime.of(TensorRTSettings)
        profile = profile_for(graph, family.export_example(model, graph), max_batch=trt.max_batch(self.ctx.batch_size),
                              max_seq=trt.trt_max_seq)
        return profile.with_explicit(trt.trt_profile, graph.name)

    def artifacts(self, ref: GraphRef) -> dict[str, dict[str, Any]]:
        return self.exports.file_infos(ref)

    @classmethod
    def deterministic(cls, variant: Variant) -> bool:
        """The CPU EP's kernels are fixed for a file, a version and the session options."""
        return variant.provider.device == "CPUExecutionProvider"

    def outputs_key(self, ref: GraphRef) -> dict[str, Any] | None:
        """CPU EP only (GPU providers may pick kernels per run): the artifact bytes, the ORT
        version, the session options (optimisation level, threads, execution mode, memory
        settings, EP options) and this module's code decide the outputs. A profiled run
        (``--profile``) always runs: replayed outputs have no trace."""
        variant = ref.variant
        if not self.deterministic(variant) or self.ctx.runtime.profile:
            return None
        import onnxruntime as ort

        files = {name: info["sha256"] for name, info in self.artifacts(ref).items()}
        return {"backend": self.name, "provider": variant.provider.device, "artifacts": files,
                "onnxruntime": ort.__version__, "intra_op_threads": self.ctx.intra_op_threads,
                "inter_op_threads": self.ctx.inter_op_threads, "cpus": os.cpu_count(),
                "session": self.ctx.runtime.as_dict(variant.provider.short),
                "runner": [source_digest(OrtGraphRunner), source_digest(session_options)]}

    # -- fresh-process measurement -----------------------------------------------------------------------
    def child_spec(self, refs: Sequence[GraphRef]) -> ChildSpec:
        """Artifact paths from the cache (built here first if missing, so the child never exports)."""
        variant = refs[0].variant
        return ChildSpec(self.exports.paths(refs), variant.provider.device, self.ctx.intra_op_threads or 0,
                         self.ctx.inter_op_threads or 0, {"runtime": self.ctx.runtime.as_dict(variant.provider.short)})

    @classmethod
    def file_child_spec(cls, paths: Mapping[str, str], variant: Variant, runtime: RuntimeSettings) -> ChildSpec:
        return ChildSpec(dict(paths), variant.provider.device, runtime.intra_op_threads or 0,
                         runtime.inter_op_threads or 0, {"runtime": runtime.as_dict(variant.provider.short)})

    @classmethod
    def child_imports(cls) -> None:
        import onnxruntime  # noqa: F401  (numpy and this module are imported already; never torch)

    @classmethod
    def child_load(cls, spec: ChildSpec) -> ChildLoad:
        """One session per graph, as a deployed service would create them; each call is
        ``session.run`` on prepared feeds, what the in-process latency measurement times too."""
        device = str(spec.device)
        runtime = runtime_from_dict(spec.options.get("runtime") or {})
        provider_options = next(iter(runtime.provider_options.values()), {})
        runners: dict[str, OrtGraphRunner] = {}
        load: dict[str, float] = {}
        for name, path in spec.files().items():
            start = time.perf_counter()
            runners[name] = OrtGraphRunner(str(path), device, spec.threads(), spec.threads("inter_op_threads"),
                                           provider_options=dict(provider_options), runtime=runtime)
            load[name] = (time.perf_counter() - start) * 1000.0
        first = next(iter(runners.values()))
        if first.providers[0] != device:
            raise SystemExit(f"{device} was requested but the session runs on {first.providers}")
        calls = {g: _session_call(r) for g, r in runners.items()}
        gpu = nvml_process_bytes if device in _GPU_PROVIDERS else (lambda: None)
        return ChildLoad(calls, load, {"onnxruntime": session_settings(first.session)}, gpu, dict(runners))


def _session_call(runner: OrtGraphRunner) -> Callable[[Mapping[str, np.ndarray]], Any]:
    """The bare ``session.run`` on prepared feeds: what a fresh-process measurement times."""
    return lambda feeds: runner.session.run(None, runner.prepare(feeds))
