"""What a native TensorRT engine is built from, and where it is cached -- no GPU needed.

Everything here is decided before TensorRT is touched, so it is unit-tested on machines
without a GPU (``tests/test_tensorrt_native.py``); ``harness.runners.tensorrt_native`` applies
it with NVIDIA's ``tensorrt`` Python API on a GPU machine.

* :func:`build_plan`: which ONNX artifact, which builder flags, strongly or weakly typed, for a
  precision and a TensorRT major version. TensorRT 11 removed every precision-enabling builder
  flag (``BuilderFlag.FP16``/``INT8``) and the INT8 calibrators: a network is always strongly
  typed, so FP16 is the FP16 ONNX artifact and INT8 is explicit Q/DQ. TensorRT 10 builds FP16
  as trtexec ``--fp16`` does (the FP32 file, FP16 flag: the same choice the ORT TensorRT EP's
  ``trt_fp16_enable`` makes), and INT8 from Q/DQ with the INT8 flag. Dynamic quantization
  (``DynamicQuantizeLinear``/``MatMulInteger``, the harness's CPU INT8 recipe) is no TensorRT
  INT8 path in either version; implicit calibration (``IInt8EntropyCalibrator2``) was
  deprecated in 10.1 and removed in 11, so it is not offered.
* :func:`engine_parts`: the cache key of an engine -- the ONNX artifact's sha256, the TensorRT
  version, the GPU (name and compute capability), the plan (flags, typing, profile) and the
  recipe -- so a new driver-independent GPU, TensorRT release, profile or file is a new engine
  and nothing else is. The timing cache is shared by every engine of one TensorRT version on one
  GPU (:func:`timing_cache_path`): tactic timings do not depend on the network's weights.
* :func:`profile_text` / :func:`refuse_outside`: a feed outside the engine's optimisation
  profile is refused *before* anything is enqueued, with the whole profile in the message.
* :func:`file_profile`: the profile of a foreign ONNX file (``harness check``), from its
  symbolic dimensions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.core import Precision
from harness.runners.trt_profile import ShapeProfile, ShapeProfileError, profile_for

if TYPE_CHECKING:  # pragma: no cover
    from harness.families.base import GraphSpec

#: bump when the build code changes what an engine is for the same inputs
ENGINE_RECIPE = 1
#: ONNX ops that mark dynamic (runtime-computed activation scale) quantization
DYNAMIC_QUANT_OPS = frozenset({"DynamicQuantizeLinear", "MatMulInteger", "ConvInteger", "DynamicQuantizeMatMul"})
#: ONNX ops of explicit (static) quantization
QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
INSTALL_HINT = "pip install 'model-harness[gpu]'"


class EngineUnsupported(RuntimeError):
    """The variant has no TensorRT build path (a precise, user-facing reason)."""


@dataclass(frozen=True)
class GpuInfo:
    """The GPU an engine is built for: engines are not portable across compute capabilities."""

    name: str
    capability: tuple[int, int]

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "-", self.name).strip("-").lower() + f"-sm{self.capability[0]}{self.capability[1]}"


@dataclass(frozen=True)
class BuildPlan:
    """How one engine is built: the ONNX artifact it parses, the builder flags it sets, and
    whether the network is strongly typed; the profile is added per graph."""

    source: Precision  # which ONNX artifact of the chain is parsed
    flags: tuple[str, ...]  # trt.BuilderFlag names set on the config
    cleared: tuple[str, ...]  # trt.BuilderFlag names cleared (TF32 for FP32 parity)
    strongly_typed: bool
    note: str = ""
    profile: ShapeProfile | None = field(default=None, compare=False)

    def with_profile(self, profile: ShapeProfile) -> "BuildPlan":
        return BuildPlan(self.source, self.flags, self.cleared, self.strongly_typed, self.note, profile)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source.value, "flags": list(self.flags), "cleared": list(self.cleared),
                               "strongly_typed": self.strongly_typed, "note": self.note}
        if self.profile is not None:
            out["profile"] = profile_dict(self.profile)
        return out


def trt_major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        raise ValueError(f"unreadable TensorRT version {version!r}") from None


def build_plan(precision: Precision, version: str, int8_kind: str | None = None) -> BuildPlan:
    """The build recipe for ``precision`` on TensorRT ``version``; ``int8_kind`` is what the
    INT8 artifact holds (:func:`quantization_kind`). Raises :class:`EngineUnsupported` with the
    reason when there is no TensorRT path."""
    major = trt_major(version)
    if major < 10:
        raise EngineUnsupported(f"TensorRT {version}: the harness needs TensorRT >= 10 (explicit-batch networks, "
                                "execute_async_v3, INT64 I/O)")
    strong = major >= 11
    # FP32 parity: TF32 (on by default on Ampere and later) rounds matmul inputs to 10 mantissa bits
    no_tf32 = ("TF32",)
    if precision is Precision.FP32:
        return BuildPlan(Precision.FP32, (), no_tf32, strong, "FP32 ONNX, TF32 off")
    if precision is Precision.FP16:
        if strong:
            return BuildPlan(Precision.FP16, (), no_tf32, True,
                             "FP16 ONNX artifact, strongly typed (TensorRT 11 has no FP16 builder flag)")
        return BuildPlan(Precision.FP32, ("FP16",), no_tf32, False, "FP32 ONNX + BuilderFlag.FP16 (trtexec --fp16)")
    if precision is Precision.INT4:
        raise EngineUnsupported("INT4 weight-only (MatMulNBits, an ONNX Runtime contrib op) has no TensorRT build "
                                "path here; judge it on an ONNX Runtime provider")
    if int8_kind != "qdq":
        found = {"dynamic": "dynamic quantization (DynamicQuantizeLinear/MatMulInteger)",
                 "none": "no quantization ops", None: "not inspected"}.get(int8_kind, str(int8_kind))
        raise EngineUnsupported(
            f"INT8 on TensorRT needs explicit Q/DQ (static INT8); the INT8 artifact holds {found}, which TensorRT "
            "does not build, and implicit calibration was deprecated in TensorRT 10.1 and removed in 11")
    # the artifact to build from is the precision's own (int8: dynamic quantization, refused above;
    # int8-static: the calibrated Q/DQ export)
    if strong:
        return BuildPlan(precision, (), no_tf32, True, "Q/DQ ONNX, strongly typed")
    return BuildPlan(precision, ("INT8",), no_tf32, False, "Q/DQ ONNX + BuilderFlag.INT8 (trtexec --int8)")


def quantization_kind(op_types: Sequence[str]) -> str:
    """``dynamic``, ``qdq`` or ``none``: what quantization an ONNX graph's ops are."""
    ops = set(op_types)
    if ops & DYNAMIC_QUANT_OPS:
        return "dynamic"
    if ops & QDQ_OPS:
        return "qdq"
    return "none"


def onnx_op_types(path: Path) -> list[str]:
    """Op types of an ONNX file (graph only: external weights are not read)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return [node.op_type for node in model.graph.node]


def profile_dict(profile: ShapeProfile) -> dict[str, dict[str, list[int]]]:
    return {name: {"min": list(profile.min[name]), "opt": list(profile.opt[name]), "max": list(profile.max[name])}
            for name in profile.max}


def engine_parts(artifact_sha256: str, trt_version: str, gpu: GpuInfo, plan: BuildPlan,
                 workspace_bytes: int | None = None) -> dict[str, Any]:
    """Everything that decides an engine's bytes: the cache key's parts (``ArtifactCache``)."""
    if plan.profile is None:
        raise ValueError("an engine needs its optimisation profile")
    return {"kind": "tensorrt-engine", "artifact": artifact_sha256, "tensorrt": trt_version, "gpu": gpu.name,
            "capability": list(gpu.capability), "plan": plan.as_dict(), "workspace_bytes": workspace_bytes,
            "recipe": ENGINE_RECIPE}


def timing_cache_path(root: Path, trt_version: str, gpu: GpuInfo) -> Path:
    """One timing cache per TensorRT version and GPU, shared by every engine built there."""
    return Path(root) / f"trt{trt_version}-{gpu.slug}.timing"


def profile_text(profile: ShapeProfile) -> str:
    """``input_ids min 1x1 opt 4x64 max 8x128; attention_mask ...``: the engine's whole profile."""
    def dims(shape: Sequence[int]) -> str:
        return "x".join(str(d) for d in shape) or "scalar"

    return "; ".join(f"{n} min {dims(profile.min[n])} opt {dims(profile.opt[n])} max {dims(profile.max[n])}"
                     for n in profile.max)


def refuse_outside(profile: ShapeProfile, feeds: Mapping[str, np.ndarray]) -> None:
    """Raise before running when a feed's shape is outside the profile, naming the profile."""
    problems = profile.violations(feeds)
    if problems:
        raise ShapeProfileError("TensorRT engine refuses these inputs before running: " + "; ".join(problems)
                                + f". Engine profile: {profile_text(profile)} "
                                "(raise --harness-trt-max-batch / --harness-trt-max-seq and rebuild)")


def file_profile(inputs: Sequence[tuple[str, Sequence[int | str | None]]], *, max_batch: int,
                 max_seq: int) -> ShapeProfile:
    """The profile of a foreign ONNX file from its inputs' dims (int: static, str: symbolic).

    A symbolic dim named like the harness's axes keeps that meaning (``batch``, ``*sequence*``,
    ``past_*``); any other symbolic dim is the batch when it is the first, else a sequence axis
    (``b``, ``t`` of a hand-written export), so a file's dynamic axes always get a range."""
    axes: dict[str, dict[int, str]] = {}
    example: dict[str, np.ndarray] = {}
    for name, dims in inputs:
        named: dict[int, str] = {}
        shape: list[int] = []
        for index, dim in enumerate(dims):
            if isinstance(dim, int) and dim > 0:
                shape.append(dim)
                continue
            text = str(dim or "")
            if text == "batch" or "sequence" in text:
                named[index] = text
            else:
                named[index] = "batch" if index == 0 else ("past_sequence" if "past" in text else "sequence")
            shape.append(1)
        axes[name] = named
        example[name] = np.empty(shape, dtype=np.int8)
    graph = SimpleNamespace(input_names=[n for n, _ in inputs], dynamic_axes=axes)
    return profile_for(graph, example, max_batch=max_batch, max_seq=max_seq)  # type: ignore[arg-type]


def graph_profile(graph: "GraphSpec", example: Mapping[str, np.ndarray], *, max_batch: int,
                  max_seq: int) -> ShapeProfile:
    """The engine's optimisation profile: the same ``profile_for`` the ORT TensorRT EP's
    ``trt_profile_*_shapes`` come from, so both TensorRT paths build for the same ranges."""
    return profile_for(graph, example, max_batch=max_batch, max_seq=max_seq)


# --------------------------------------------------------------------------- applying a plan (GPU side)


def configure(trt: Any, builder: Any, network: Any, config: Any, plan: BuildPlan,
              workspace_bytes: int | None = None) -> Any:
    """Set ``plan`` on a TensorRT builder config: one optimisation profile with min/opt/max of
    every network input, the builder flags, TF32 cleared. ``trt`` is the ``tensorrt`` module
    (a stand-in in tests). Returns the profile object."""
    if plan.profile is None:
        raise ValueError("an engine needs its optimisation profile")
    profile = builder.create_optimization_profile()
    names = [network.get_input(i).name for i in range(network.num_inputs)]
    missing = [n for n in names if n not in plan.profile.max]
    if missing:
        raise EngineUnsupported(f"no optimisation-profile range for network input(s) {missing}; "
                                f"profile covers {sorted(plan.profile.max)}")
    for name in names:
        profile.set_shape(name, tuple(plan.profile.min[name]), tuple(plan.profile.opt[name]),
                          tuple(plan.profile.max[name]))
    config.add_optimization_profile(profile)
    for flag in plan.flags:
        config.set_flag(getattr(trt.BuilderFlag, flag))
    for flag in plan.cleared:
        if hasattr(trt.BuilderFlag, flag):
            config.clear_flag(getattr(trt.BuilderFlag, flag))
    if workspace_bytes:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_bytes))
    return profile


def network_flags(trt: Any, plan: BuildPlan) -> int:
    """Network-definition flags: STRONGLY_TYPED where the plan is (TensorRT 10 opt-in; 11 always)."""
    flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    return (1 << int(flag)) if plan.strongly_typed and flag is not None else 0
