"""Native TensorRT (``trt_native``): engines built from the harness's ONNX artifacts with
NVIDIA's ``tensorrt`` Python API and run without ONNX Runtime.

Build (``harness.runners.trt_engine`` decides, this module applies): the ONNX artifact the
plan names is parsed (``trt.OnnxParser.parse_from_file``, so external weights load), one
optimisation profile with explicit min/opt/max per input -- the same ``profile_for`` ranges the
ORT TensorRT EP is given -- and the plan's builder flags; the serialized engine is a
content-addressed cache entry (``ArtifactCache``: locked build into a temporary directory,
sha256-verified) keyed by the artifact's sha256, the TensorRT version, the GPU and the plan.
The timing cache is one file per TensorRT version and GPU, loaded before and merged after
every build under its lock, so a second engine on the same GPU skips re-timing tactics.

Run: device buffers and the stream are ``torch.cuda`` tensors (torch is a core dependency and
its CUDA wheel ships the runtime), addresses bound with ``set_tensor_address``, work enqueued
with ``execute_async_v3``. Feeds outside the profile are refused before anything is enqueued,
with the whole profile in the message. Timing follows trtexec:

* ``timed_call`` (what the perf suite times): host latency -- host-to-device copies, enqueue,
  device-to-host copies and the stream synchronise, numpy in, numpy out;
* :meth:`TrtGraphRunner.trtexec_timing`: per iteration, host latency, GPU compute (CUDA events
  around ``execute_async_v3`` only), H2D and D2H (events), and the enqueue time (host wall
  time of the ``execute_async_v3`` call), after warmup.

GPU memory is read through NVML (``harness.runners.gpu_memory``) and the engine's own
device-memory size. Where tensorrt or a CUDA device is missing, every variant is skipped
with that reason; nothing here is imported before a variant asks for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.core import Precision, Provider, Variant
from harness.core.cachedir import file_sha256, lock_for
from harness.export.cache import ArtifactCache
from harness.runners import register_backend
from harness.runners.base import Backend, BackendContext, ChildLoad, ChildSpec, Feeds, GraphRef, GraphRunner, TimedCall
from harness.runners.gpu_memory import nvml_process_bytes
from harness.runners.trt_engine import (
    INSTALL_HINT,
    BuildPlan,
    EngineUnsupported,
    GpuInfo,
    build_plan,
    configure,
    engine_parts,
    file_profile,
    graph_profile,
    network_flags,
    onnx_op_types,
    profile_text,
    quantization_kind,
    refuse_outside,
    timing_cache_path,
)
from harness.runners.trt_profile import ShapeProfile, TensorRTSettings
from harness.zoo.base import cache_root

if TYPE_CHECKING:  # pragma: no cover
    from harness.core.runtime import RuntimeSettings
    from harness.export.cache import ArtifactCache, CacheEntry
    from harness.families.base import Family, GraphSpec
    from harness.zoo.loading import LoadedModel

ENGINE_FILE = "engine.plan"
#: builder workspace limit (None: TensorRT's default, the device's memory)
WORKSPACE_BYTES: int | None = None


def tensorrt_version() -> str | None:
    try:
        import tensorrt
    except ImportError:
        return None
    return str(tensorrt.__version__)


def cuda_reason() -> str | None:
    """None when torch sees a CUDA device (buffers, stream and events come from torch.cuda)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a core dependency
        return "torch not installed (CUDA buffers and events come from torch.cuda)"
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False); native TensorRT needs an NVIDIA GPU"
    return None


def gpu_info(device: int = 0) -> GpuInfo:
    import torch

    return GpuInfo(torch.cuda.get_device_name(device), tuple(torch.cuda.get_device_capability(device)))  # type: ignore[arg-type]


def _logger() -> Any:
    import tensorrt as trt

    return trt.Logger(trt.Logger.WARNING)


def build_engine(onnx_path: Path, plan: BuildPlan, out_dir: Path, timing_cache: Path) -> Path:
    """Parse, configure and build one engine into ``out_dir/engine.plan``; merge the timing cache."""
    import tensorrt as trt

    logger = _logger()
    builder = trt.Builder(logger)
    network = builder.create_network(network_flags(trt, plan))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise EngineUnsupported(f"{onnx_path}: the TensorRT ONNX parser refused it ({errors[:400]})")
    config = builder.create_builder_config()
    configure(trt, builder, network, config, plan, WORKSPACE_BYTES)
    timing_cache.parent.mkdir(parents=True, exist_ok=True)
    with lock_for(timing_cache):
        cache = config.create_timing_cache(timing_cache.read_bytes() if timing_cache.is_file() else b"")
        config.set_timing_cache(cache, ignore_mismatch=False)
        serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            raise EngineUnsupported(f"{onnx_path}: TensorRT could not build an engine ({plan.note})")
        tmp = timing_cache.with_suffix(".tmp")
        tmp.write_bytes(memoryview(config.get_timing_cache().serialize()))
        tmp.replace(timing_cache)
    target = out_dir / ENGINE_FILE
    target.write_bytes(memoryview(serialized))
    return target


@dataclass
class TrtTiming:
    """trtexec-style samples (ms) per iteration."""

    host_latency: list[float] = field(default_factory=list)
    gpu_compute: list[float] = field(default_factory=list)
    h2d: list[float] = field(default_factory=list)
    d2h: list[float] = field(default_factory=list)
    enqueue: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[float]]:
        return {"host_latency_ms": self.host_latency, "gpu_compute_ms": self.gpu_compute, "h2d_ms": self.h2d,
                "d2h_ms": self.d2h, "enqueue_ms": self.enqueue}


def _torch_dtype(trt: Any, dtype: Any) -> Any:
    import torch

    table = {trt.DataType.FLOAT: torch.float32, trt.DataType.HALF: torch.float16, trt.DataType.INT32: torch.int32,
             trt.DataType.INT8: torch.int8, trt.DataType.BOOL: torch.bool}
    if hasattr(trt.DataType, "INT64"):
        table[trt.DataType.INT64] = torch.int64
    if hasattr(trt.DataType, "BF16"):
        table[trt.DataType.BF16] = torch.bfloat16
    return table[dtype]


class TrtGraphRunner(GraphRunner):
    """One deserialized engine, one execution context on profile 0, one CUDA stream."""

    def __init__(self, engine_path: Path, profile: ShapeProfile, device: int = 0) -> None:
        import tensorrt as trt
        import torch

        self.trt, self.torch, self.profile, self.device = trt, torch, profile, device
        self.engine_path = Path(engine_path)
        self.runtime = trt.Runtime(_logger())
        self.engine = self.runtime.deserialize_cuda_engine(Path(engine_path).read_bytes())
        if self.engine is None:
            raise RuntimeError(f"{engine_path}: TensorRT could not deserialize the engine")
        self.context = self.engine.create_execution_context()
        self.stream = torch.cuda.Stream(device=device)  # type: ignore[no-untyped-call]
        self.context.set_optimization_profile_async(0, self.stream.cuda_stream)
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        is_input = {n: self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT for n in names}
        self.input_names = [n for n in names if is_input[n]]
        self.output_names = [n for n in names if not is_input[n]]
        self._dtypes = {n: _torch_dtype(trt, self.engine.get_tensor_dtype(n)) for n in names}

    # -- staging ----------------------------------------------------------------------------------------
    def prepare(self, feeds: Feeds) -> dict[str, np.ndarray]:
        """Host arrays in the engine's input dtypes, checked against the profile (refused here,
        before anything is enqueued)."""
        refuse_outside(self.profile, feeds)
        out: dict[str, np.ndarray] = {}
        for name in self.input_names:
            want = self.torch.empty((), dtype=self._dtypes[name]).numpy().dtype
            out[name] = np.ascontiguousarray(np.asarray(feeds[name]).astype(want, copy=False))
        return out

    def _bind(self, host: Mapping[str, np.ndarray]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Device buffers for one call: inputs uploaded on the stream, outputs allocated at the
        shapes the context infers from the input shapes; every address bound."""
        torch = self.torch
        inputs: dict[str, Any] = {}
        with torch.cuda.stream(self.stream):
            for name in self.input_names:
                tensor = torch.from_numpy(host[name]).to(f"cuda:{self.device}", non_blocking=True)
                inputs[name] = tensor
                self.context.set_input_shape(name, tuple(tensor.shape))
                self.context.set_tensor_address(name, tensor.data_ptr())
            outputs: dict[str, Any] = {}
            for name in self.output_names:
                shape = tuple(self.context.get_tensor_shape(name))
                outputs[name] = torch.empty(shape, dtype=self._dtypes[name], device=f"cuda:{self.device}")
                self.context.set_tensor_address(name, outputs[name].data_ptr())
        return inputs, outputs

    def _enqueue(self) -> None:
        if not self.context.execute_async_v3(self.stream.cuda_stream):
            raise RuntimeError("TensorRT execute_async_v3 failed")

    def _fetch(self, outputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        with self.torch.cuda.stream(self.stream):
            host = {n: t.to("cpu", non_blocking=False) for n, t in outputs.items()}
        self.stream.synchronize()
        return {n: (t.float() if t.is_floating_point() else t).numpy() for n, t in host.items()}

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        _, outputs = self._bind(self.prepare(feeds))
        self._enqueue()
        return self._fetch(outputs)

    def synchronize(self) -> None:
        self.stream.synchronize()

    def timed_call(self, feeds: Feeds) -> TimedCall:
        """Host latency, as trtexec's "Latency": H2D + enqueue + D2H + synchronise."""
        host = self.prepare(feeds)

        def call() -> object:
            _, outputs = self._bind(host)
            self._enqueue()
            return self._fetch(outputs)
        return call

    def trtexec_timing(self, feeds: Feeds, iterations: int = 100, warmup: int = 10) -> TrtTiming:
        """Per-iteration host latency, GPU compute, H2D, D2H (CUDA events) and enqueue time."""
        torch = self.torch
        host = self.prepare(feeds)
        timing = TrtTiming()
        for i in range(warmup + iterations):
            events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            start = time.perf_counter()
            events[0].record(self.stream)
            _, outputs = self._bind(host)
            events[1].record(self.stream)
            enqueue_start = time.perf_counter()
            self._enqueue()
            enqueue = (time.perf_counter() - enqueue_start) * 1000.0
            events[2].record(self.stream)
            with torch.cuda.stream(self.stream):
                fetched = {n: t.to("cpu", non_blocking=True) for n, t in outputs.items()}
            events[3].record(self.stream)
            self.stream.synchronize()
            latency = (time.perf_counter() - start) * 1000.0
            del fetched
            if i >= warmup:
                timing.host_latency.append(latency)
                timing.h2d.append(events[0].elapsed_time(events[1]))
                timing.gpu_compute.append(events[1].elapsed_time(events[2]))
                timing.d2h.append(events[2].elapsed_time(events[3]))
                timing.enqueue.append(enqueue)
        return timing

    def memory(self) -> dict[str, int | None]:
        """The engine's activation memory and what NVML says this process holds."""
        size = getattr(self.engine, "device_memory_size_v2", None) or getattr(self.engine, "device_memory_size", None)
        return {"engine_device_memory_bytes": int(size) if size is not None else None,
                "nvml_process_bytes": nvml_process_bytes(self.device)}

    def close(self) -> None:
        self.context = None
        self.engine = None


@register_backend
class TensorRTBackend(Backend):
    name = "tensorrt"
    label = "TensorRT"
    providers = (Provider("trt_native", name, "cuda:0", needs_gpu=True),)
    #: executes ONNX files (builds engines from them), so ``harness check`` files can stand in
    runs_onnx_files = True
    #: the derived profile's limits (the engine is built for them); explicit profiles and caches
    #: are ONNX Runtime's TensorRT EP's (``ort_trt``)
    runtime_settings = frozenset({"trt_max_batch", "trt_max_seq"})

    @classmethod
    def unavailable_reason(cls, variant: Variant) -> str | None:
        version = tensorrt_version()
        if version is None:
            return f"tensorrt not installed ({INSTALL_HINT})"
        reason = cuda_reason()
        if reason:
            return reason
        try:  # INT8 of the harness's own chain: the artifact is dynamic quantization until static Q/DQ exists
            build_plan(variant.precision, version, int8_kind=artifact_kind(variant.precision))
        except EngineUnsupported as exc:
            return str(exc)
        return None

    @classmethod
    def runtime_summary(cls) -> str:
        version = tensorrt_version()
        if version is None:
            return f"tensorrt: not installed ({INSTALL_HINT})"
        reason = cuda_reason()
        if reason:
            return f"tensorrt {version}: {reason}"
        gpu = gpu_info()
        return f"tensorrt {version}: GPU {gpu.name} (sm {gpu.capability[0]}.{gpu.capability[1]})"

    @classmethod
    def open_onnx_file(cls, path: Path, provider: Provider, precision: Precision, threads: int | None,
                       runtime: "RuntimeSettings | None" = None, *, profile_prefix: str | None = None) -> GraphRunner:
        """A foreign file (``harness check``): an engine built from the file itself, profile
        from its symbolic dims (batch 1..8, sequence 1..128), cached under the harness cache."""
        import onnx  # graph only: the inputs' shapes

        version = tensorrt_version()
        if version is None or cuda_reason():
            raise EngineUnsupported(f"tensorrt not available: {cuda_reason() or INSTALL_HINT}")
        graph = onnx.load(str(path), load_external_data=False).graph
        initializers = {i.name for i in graph.initializer}
        inputs = [(i.name, [d.dim_value if d.HasField("dim_value") else d.dim_param for d in i.type.tensor_type.shape.dim])
                  for i in graph.input if i.name not in initializers]
        profile = file_profile(inputs, max_batch=8, max_seq=128)
        kind = quantization_kind([n.op_type for n in graph.node])
        plan = build_plan(precision, version, int8_kind=kind)
        return load_engine(ArtifactCache(cache_root() / "artifacts"), Path(path), plan.with_profile(profile),
                           f"check-{Path(path).stem}", cache_root())

    def __init__(self, ctx: BackendContext) -> None:
        super().__init__(ctx)
        self._engines: dict[str, dict[str, Any]] = {}

    def _plan(self, ref: GraphRef) -> BuildPlan:
        model, family, graph, variant = ref.model, ref.family, ref.graph, ref.variant
        version = tensorrt_version() or "0"
        plan = build_plan(variant.precision, version, int8_kind=artifact_kind(variant.precision))
        limits = self.ctx.runtime.of(TensorRTSettings)
        profile = graph_profile(graph, family.export_example(model, graph),
                                max_batch=limits.max_batch(self.ctx.batch_size), max_seq=limits.trt_max_seq)
        return plan.with_profile(profile)

    def _source(self, model: "LoadedModel", family: "Family", graph: "GraphSpec", plan: BuildPlan) -> "CacheEntry":
        from harness.export.artifacts import onnx_artifact

        return onnx_artifact(model, family, graph, plan.source, self.ctx.settings, self.ctx.cache)

    def load(self, ref: GraphRef) -> GraphRunner:
        return self._load(ref)

    def _load(self, ref: GraphRef) -> TrtGraphRunner:
        model, family, graph, variant = ref.model, ref.family, ref.graph, ref.variant
        plan = self._plan(ref)
        source = self._source(model, family, graph, plan)
        if plan.source in INT8_ARTIFACT_KINDS:  # the artifact itself must be Q/DQ (never build a dynamic-quant graph)
            build_plan(variant.precision, tensorrt_version() or "0",
                       int8_kind=quantization_kind(onnx_op_types(source.path())))
        label = f"{model.name}-{graph.name}-{variant.precision.value}"
        runner = load_engine(self.ctx.cache, source.path(), plan, label, self.ctx.cache_dir or source.directory.parent,
                             source.files.get("model.onnx"))
        self._engines[graph.name] = {"plan": plan.as_dict(), "engine": str(runner.engine_path),
                                     "profile": profile_text(plan.profile) if plan.profile else ""}
        return runner

    def artifacts(self, ref: GraphRef) -> dict[str, dict[str, Any]]:
        model, family, graph = ref.model, ref.family, ref.graph
        plan = self._plan(ref)
        source = self._source(model, family, graph, plan)
        out: dict[str, dict[str, Any]] = {}
        for name, digest in source.files.items():
            p = source.path(name)
            out[f"{graph.name}/{name}"] = {"path": str(p), "sha256": digest, "bytes": p.stat().st_size}
        engine = self._engines.get(graph.name)
        if engine is not None:
            path = Path(engine["engine"])
            out[f"{graph.name}/{ENGINE_FILE}"] = {"path": str(path), "bytes": path.stat().st_size,
                                                  "tensorrt": {"version": tensorrt_version(), **engine}}
        return out

    def shipped_files(self, refs: Sequence[GraphRef]) -> dict[str, int]:
        """A TensorRT deployment ships the engines, not the ONNX files."""
        out: dict[str, int] = {}
        for ref in refs:
            runner = self._load(ref)
            out[f"{ref.graph.name}/{ENGINE_FILE}"] = runner.engine_path.stat().st_size
            runner.close()
        return out

    # -- fresh-process measurement -----------------------------------------------------------------------
    def child_spec(self, refs: Sequence[GraphRef]) -> ChildSpec:
        """Engine paths (built here first) and their profiles: the child deserializes, never builds."""
        graphs_spec: dict[str, Any] = {}
        for ref in refs:
            runner = self._load(ref)
            profile = runner.profile
            graphs_spec[ref.graph.name] = {"engine": str(runner.engine_path),
                                       "min": {k: list(v) for k, v in profile.min.items()},
                                       "opt": {k: list(v) for k, v in profile.opt.items()},
                                       "max": {k: list(v) for k, v in profile.max.items()}}
            runner.close()
        return ChildSpec(graphs_spec)

    @classmethod
    def child_imports(cls) -> None:
        import tensorrt  # noqa: F401
        import torch  # noqa: F401  (CUDA buffers, stream and events)

    @classmethod
    def child_load(cls, spec: ChildSpec) -> ChildLoad:
        runners: dict[str, TrtGraphRunner] = {}
        load: dict[str, float] = {}
        for name, info in spec.files().items():
            profile = ShapeProfile({k: tuple(v) for k, v in info["min"].items()},
                                   {k: tuple(v) for k, v in info["opt"].items()},
                                   {k: tuple(v) for k, v in info["max"].items()})
            start = time.perf_counter()
            runners[name] = TrtGraphRunner(Path(info["engine"]), profile)
            load[name] = (time.perf_counter() - start) * 1000.0
        first = next(iter(runners.values()))
        return ChildLoad({g: r.run for g, r in runners.items()}, load,
                         {"tensorrt": {"version": tensorrt_version(), **first.memory()}}, nvml_process_bytes)


#: what the harness's quantized artifacts are: ``int8`` is dynamic quantization (which TensorRT
#: does not build: skipped with that reason), ``int8-static`` the calibrated Q/DQ export (built
#: with explicit quantization). ``load`` re-checks the file's own ops before any build.
INT8_ARTIFACT_KINDS: dict[Precision, str] = {Precision.INT8: "dynamic", Precision.INT8_STATIC: "qdq"}


def artifact_kind(precision: Precision) -> str | None:
    return INT8_ARTIFACT_KINDS.get(precision)


def load_engine(cache: "ArtifactCache", onnx_path: Path, plan: BuildPlan, label: str, cache_root: Path,
                onnx_sha256: str | None = None) -> TrtGraphRunner:
    """The engine of ``onnx_path`` under ``plan`` from the cache (built on a miss), loaded."""
    version = tensorrt_version()
    assert version is not None and plan.profile is not None
    gpu = gpu_info()
    parts = engine_parts(onnx_sha256 or file_sha256(onnx_path), version, gpu, plan, WORKSPACE_BYTES)
    timing = timing_cache_path(Path(cache_root) / "trt-timing", version, gpu)
    entry = cache.get_or_build(f"{label}-trt{version}-{gpu.slug}", parts,
                               lambda tmp: build_engine(onnx_path, plan, tmp, timing))
    return TrtGraphRunner(entry.path(ENGINE_FILE), plan.profile)
