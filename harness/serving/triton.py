"""The Triton model repository of a judged variant: ``model_repository/<name>/<version>/model.onnx``
(or ``model.plan``) and its ``config.pbtxt``.

The configuration is derived, never hand-written: inputs and outputs (names, datatypes,
dynamic dims as -1) from the artifact itself; batching (``max_batch_size``, dynamic batching
with preferred sizes and a queue delay) and instance groups from :class:`TritonSettings`;
the ONNX Runtime backend's optimisation settings (graph level, threads, execution mode, arena,
memory pattern) and, for ``ort_trt``, the TensorRT accelerator (precision mode, engine and
timing caches, the min/opt/max profile the harness judged with) from the variant's
``RuntimeSettings``. Every written file is parsed back with Triton's own model-config protobuf
(``tritonclient.grpc.model_config_pb2``) before the command reports success.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.check.layout import TensorInfo, read_artifact
from harness.core import Precision, UsageError
from harness.runners.ort_runner import OrtSessionSettings
from harness.runners.trt_profile import TensorRTSettings

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Variant
    from harness.core.runtime import RuntimeSettings
    from harness.runners.trt_profile import ShapeProfile

#: numpy dtype names -> Triton's DataType enum names
TRITON_TYPES = {"float32": "TYPE_FP32", "float16": "TYPE_FP16", "float64": "TYPE_FP64", "bfloat16": "TYPE_BF16",
                "int64": "TYPE_INT64", "int32": "TYPE_INT32", "int16": "TYPE_INT16", "int8": "TYPE_INT8",
                "uint8": "TYPE_UINT8", "bool": "TYPE_BOOL"}
#: the harness's graph optimisation levels -> the ONNX Runtime backend's ``optimization.graph.level``
#: (-1 basic, 1 basic + extended, 2 disabled; "all", ORT's default, is the absence of the field)
GRAPH_LEVELS = {"basic": -1, "extended": 1, "disabled": 2}


@dataclass(frozen=True)
class TritonSettings:
    """How Triton schedules the model: one record, from the command line or defaults."""

    max_batch_size: int = 8
    preferred_batch_sizes: tuple[int, ...] = ()  # () = half the maximum and the maximum
    max_queue_delay_us: int = 100
    instances: int = 1
    version: int = 1

    def preferred(self) -> list[int]:
        if self.preferred_batch_sizes:
            return sorted(set(self.preferred_batch_sizes))
        return sorted({s for s in (self.max_batch_size // 2, self.max_batch_size) if s >= 1})

    def validate(self) -> None:
        if self.max_batch_size < 0:
            raise UsageError(f"--max-batch-size: must be >= 0, got {self.max_batch_size}")
        bad = [s for s in self.preferred_batch_sizes if s < 1 or s > max(self.max_batch_size, 1)]
        if bad:
            raise UsageError(f"--preferred-batch-sizes: {bad} outside 1..{self.max_batch_size} (--max-batch-size)")
        if self.instances < 1 or self.version < 1 or self.max_queue_delay_us < 0:
            raise UsageError("--instances and --version must be >= 1, --max-queue-delay-us >= 0")


@dataclass
class ModelEntry:
    """One written model: its folder, the config text, and what was decided and why."""

    name: str
    directory: Path
    config: str
    notes: list[str] = field(default_factory=list)


def _dims(info: TensorInfo, batched: bool) -> list[int]:
    shape = list(info.shape or [])
    if batched:
        shape = shape[1:]
    return [d if isinstance(d, int) else -1 for d in shape]


def _batchable(tensors: tuple[TensorInfo, ...]) -> bool:
    """Triton batches along a leading dimension every input and output leaves dynamic."""
    return all(t.shape and not isinstance(t.shape[0], int) for t in tensors)


def _param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}'


def config_text(name: str, inputs: tuple[TensorInfo, ...], outputs: tuple[TensorInfo, ...], variant: Variant,  # noqa: C901 - one pbtxt section per branch; split when next touched
                runtime: RuntimeSettings, settings: TritonSettings, profile: ShapeProfile | None = None,
                plan: bool = False) -> tuple[str, list[str]]:
    """``config.pbtxt`` (protobuf text format) and notes on what could not be carried over."""
    notes: list[str] = []
    batched = settings.max_batch_size > 0 and _batchable(inputs + outputs)
    if settings.max_batch_size > 0 and not batched:
        notes.append("a tensor has a static leading dimension: max_batch_size 0 (no batching by Triton)")
    max_batch = settings.max_batch_size if batched else 0
    if batched and profile is not None and profile.max:
        limit = min(dims[0] for dims in profile.max.values() if dims)
        if limit < max_batch:  # a batch the TensorRT profile cannot take would fail at run time
            notes.append(f"max_batch_size {max_batch} -> {limit}: the TensorRT profile's largest batch")
            max_batch = limit
            settings = TritonSettings(limit, tuple(b for b in settings.preferred_batch_sizes if b <= limit),
                                      settings.max_queue_delay_us, settings.instances, settings.version)
    lines = [f'name: "{name}"',
             f'platform: "{"tensorrt_plan" if plan else "onnxruntime_onnx"}"',
             f"max_batch_size: {max_batch}"]
    for section, tensors in (("input", inputs), ("output", outputs)):
        for t in tensors:
            if t.dtype not in TRITON_TYPES:
                raise UsageError(f"{name}: {section} {t.name!r} has dtype {t.dtype}, which Triton has no type for")
            lines.append(f'{section} {{ name: "{t.name}" data_type: {TRITON_TYPES[t.dtype]} '
                         f"dims: [ {', '.join(str(d) for d in _dims(t, batched))} ] }}")
    if batched:
        lines.append(f"dynamic_batching {{ preferred_batch_size: [ {', '.join(map(str, settings.preferred()))} ] "
                     f"max_queue_delay_microseconds: {settings.max_queue_delay_us} }}")
    gpu = variant.provider.device != "CPUExecutionProvider"
    lines.append(f"instance_group [ {{ count: {settings.instances} kind: {'KIND_GPU' if gpu else 'KIND_CPU'} }} ]")
    if plan:
        return "\n".join(lines) + "\n", notes
    optimization = []
    session, engine = runtime.of(OrtSessionSettings), runtime.of(TensorRTSettings)
    level = GRAPH_LEVELS.get(session.graph_optimization)
    if level is not None:
        optimization.append(f"graph {{ level: {level} }}")
    if variant.provider.device == "TensorrtExecutionProvider":
        trt = [("precision_mode", "FP16" if variant.precision is Precision.FP16 else "FP32"),
               ("max_workspace_size_bytes", "1073741824"), ("trt_engine_cache_enable", "1")]
        if engine.trt_engine_cache:
            trt.append(("trt_engine_cache_path", engine.trt_engine_cache))
        if engine.trt_timing_cache:
            trt += [("trt_timing_cache_enable", "1"), ("trt_timing_cache_path", engine.trt_timing_cache)]
        if profile is not None:
            trt += sorted(profile.provider_options().items())
        params = " ".join(f'parameters {{ key: "{k}" value: "{v}" }}' for k, v in trt)
        optimization.append(f'execution_accelerators {{ gpu_execution_accelerator: [ {{ name: "tensorrt" {params} }} ] }}')
    elif variant.provider.device == "CUDAExecutionProvider":
        cuda = runtime.options_for(variant.provider.short)
        params = " ".join(f'parameters {{ key: "{k}" value: "{v}" }}' for k, v in sorted(cuda.items()))
        optimization.append(f'execution_accelerators {{ gpu_execution_accelerator: [ {{ name: "cuda" {params} }} ] }}')
    elif runtime.options_for(variant.provider.short):
        notes.append(f"execution-provider options of {variant.provider.short} have no Triton equivalent: left out")
    if optimization:
        lines.append(f"optimization {{ {' '.join(optimization)} }}")
    if runtime.intra_op_threads:
        lines.append(_param("intra_op_thread_count", str(runtime.intra_op_threads)))
    if runtime.inter_op_threads:
        lines.append(_param("inter_op_thread_count", str(runtime.inter_op_threads)))
    lines.append(_param("execution_mode", "1" if session.execution_mode == "parallel" else "0"))
    lines.append(_param("enable_mem_arena", "1" if session.cpu_arena else "0"))
    lines.append(_param("enable_mem_pattern", "1" if session.mem_pattern else "0"))
    return "\n".join(lines) + "\n", notes


def parse_config(text: str, where: str = "config.pbtxt") -> Any:
    """Parse with Triton's own ``ModelConfig`` message (shipped in tritonclient): a field Triton
    does not know, a wrong enum or a malformed value is an error naming the file."""
    try:
        from google.protobuf import text_format
        from tritonclient.grpc import model_config_pb2
    except ImportError as exc:
        raise UsageError(f"{where}: cannot validate without tritonclient and grpcio "
                         f"(pip install 'model-harness[serving]'): {exc}") from None
    config = model_config_pb2.ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise UsageError(f"{where}: not a valid Triton model configuration: {exc}") from None
    return config


def write_model(repository: Path, name: str, onnx: Path, variant: Variant, runtime: RuntimeSettings,
                settings: TritonSettings, profile: ShapeProfile | None = None,
                plan: Path | None = None) -> ModelEntry:
    """``<repository>/<name>/config.pbtxt`` and ``<name>/<version>/model.onnx`` (+ external data),
    or ``model.plan`` when a TensorRT engine is given; the config parsed back before returning."""
    art = read_artifact(onnx)
    text, notes = config_text(name, art.inputs, art.outputs, variant, runtime, settings, profile, plan is not None)
    folder = repository / name
    version = folder / str(settings.version)
    version.mkdir(parents=True, exist_ok=True)
    if plan is not None:
        shutil.copy(plan, version / "model.plan")
    else:
        shutil.copy(onnx, version / "model.onnx")
        data = onnx.with_name(onnx.name + ".data")
        if data.exists():  # external weights travel beside the graph under the name it references
            shutil.copy(data, version / data.name)
    (folder / "config.pbtxt").write_text(text)
    parsed = parse_config((folder / "config.pbtxt").read_text(), str(folder / "config.pbtxt"))
    if parsed.name != name or len(parsed.input) != len(art.inputs) or len(parsed.output) != len(art.outputs):
        raise UsageError(f"{folder / 'config.pbtxt'}: parsed back with other I/O than the artifact's")
    return ModelEntry(name, folder, text, notes)


def repository_name(model: str, precision: str, graph: str, graphs: int) -> str:
    """``<model>-<precision>`` (``-<graph>`` when the model has several graphs)."""
    base = f"{model}-{precision}"
    return base if graphs == 1 else f"{base}-{graph}"
