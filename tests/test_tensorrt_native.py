"""Native TensorRT (``trt_native``) without a GPU: everything decided before TensorRT runs.

No GPU and no tensorrt here (nor in CI). These tests cover the build plans per TensorRT major
version, what the INT8 artifact is, the engine cache key and its cache discipline (a fake
build behind the seam), the timing-cache path, the refusal of out-of-profile shapes with the
profile in the message, the profile and flags applied to a builder config (a stand-in
``tensorrt`` module records the calls), foreign files' profiles, and the exact skip reasons.
The engine build and the CUDA run themselves need ``scripts/gpu_check.sh`` on a GPU machine.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.core import Precision
from harness.runners import tensorrt_native, trt_engine
from harness.runners.tensorrt_native import TensorRTBackend
from harness.runners.trt_engine import (
    BuildPlan,
    EngineUnsupported,
    GpuInfo,
    build_plan,
    configure,
    engine_parts,
    file_profile,
    network_flags,
    profile_text,
    quantization_kind,
    refuse_outside,
    timing_cache_path,
)
from harness.runners.trt_profile import ShapeProfileError, profile_for
from tests.conftest import variant

H200 = GpuInfo("NVIDIA H200", (9, 0))


def _bert_graph(workspace):
    model = workspace.model("bert-tiny")
    family = workspace.family(model)
    (graph,) = family.graphs(model)
    return model, family, graph


# --------------------------------------------------------------------------- build plans


def test_tensorrt_10_builds_with_builder_flags_and_11_strongly_typed():
    fp16_10 = build_plan(Precision.FP16, "10.13.0")
    assert (fp16_10.source, fp16_10.flags, fp16_10.strongly_typed) == (Precision.FP32, ("FP16",), False)
    fp16_11 = build_plan(Precision.FP16, "11.4.0.106")
    assert (fp16_11.source, fp16_11.flags, fp16_11.strongly_typed) == (Precision.FP16, (), True)
    for version in ("10.13.0", "11.4.0"):
        fp32 = build_plan(Precision.FP32, version)
        assert fp32.source is Precision.FP32 and fp32.flags == () and fp32.cleared == ("TF32",)
    assert build_plan(Precision.INT8, "10.13.0", int8_kind="qdq").flags == ("INT8",)
    assert build_plan(Precision.INT8, "11.0.0", int8_kind="qdq").flags == ()
    with pytest.raises(EngineUnsupported, match=r"TensorRT 8.6.1: the harness needs TensorRT >= 10"):
        build_plan(Precision.FP32, "8.6.1")


def test_dynamic_int8_has_no_tensorrt_path_with_the_reason():
    with pytest.raises(EngineUnsupported) as info:
        build_plan(Precision.INT8, "10.13.0", int8_kind="dynamic")
    assert str(info.value) == (
        "INT8 on TensorRT needs explicit Q/DQ (static INT8); the INT8 artifact holds dynamic quantization "
        "(DynamicQuantizeLinear/MatMulInteger), which TensorRT does not build, and implicit calibration was "
        "deprecated in TensorRT 10.1 and removed in 11")


def _qdq_onnx(path: Path) -> Path:
    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.1])
    zero = helper.make_tensor("z", TensorProto.INT8, [], [0])
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
        "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [scale, zero])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_int8_artifacts_are_told_apart_by_their_ops(workspace, tmp_path):
    from harness.export.artifacts import onnx_artifact

    model, family, graph = _bert_graph(workspace)
    settings = workspace.runtimes.settings_for(model)
    int8 = onnx_artifact(model, family, graph, Precision.INT8, settings, workspace.runtimes.artifacts)
    fp32 = onnx_artifact(model, family, graph, Precision.FP32, settings, workspace.runtimes.artifacts)
    assert quantization_kind(trt_engine.onnx_op_types(int8.path())) == "dynamic"  # the harness's CPU recipe
    assert quantization_kind(trt_engine.onnx_op_types(fp32.path())) == "none"
    assert quantization_kind(trt_engine.onnx_op_types(_qdq_onnx(tmp_path / "q.onnx"))) == "qdq"


# --------------------------------------------------------------------------- profiles


def test_the_engine_profile_is_the_ort_tensorrt_eps_profile(workspace):
    model, family, graph = _bert_graph(workspace)
    example = family.export_example(model, graph)
    engine = trt_engine.graph_profile(graph, example, max_batch=8, max_seq=64)
    assert engine == profile_for(graph, example, max_batch=8, max_seq=64)
    assert profile_text(engine) == ("input_ids min 1x1 opt 4x32 max 8x64; "
                                    "attention_mask min 1x1 opt 4x32 max 8x64")


def test_shapes_outside_the_profile_are_refused_before_running_with_the_profile(workspace):
    model, family, graph = _bert_graph(workspace)
    profile = trt_engine.graph_profile(graph, family.export_example(model, graph), max_batch=8, max_seq=16)
    refuse_outside(profile, {"input_ids": np.zeros((8, 16), np.int64), "attention_mask": np.ones((8, 16), np.int64)})
    with pytest.raises(ShapeProfileError) as info:
        refuse_outside(profile, {"input_ids": np.zeros((2, 40), np.int64),
                                 "attention_mask": np.ones((2, 40), np.int64)})
    assert str(info.value) == (
        "TensorRT engine refuses these inputs before running: input_ids (2, 40) outside [(1, 1), (8, 16)]; "
        "attention_mask (2, 40) outside [(1, 1), (8, 16)]. Engine profile: input_ids min 1x1 opt 4x8 max 8x16; "
        "attention_mask min 1x1 opt 4x8 max 8x16 (raise --harness-trt-max-batch / --harness-trt-max-seq and rebuild)")


def test_foreign_files_get_ranges_for_every_symbolic_dim():
    profile = file_profile([("tokens", ["b", "t"]), ("past_key", ["batch", 4, "past_sequence", 16]),
                            ("flags", [3])], max_batch=8, max_seq=128)
    assert (profile.min["tokens"], profile.max["tokens"]) == ((1, 1), (8, 128))
    assert (profile.min["past_key"], profile.max["past_key"]) == ((1, 4, 0, 16), (8, 4, 128, 16))
    assert profile.min["flags"] == profile.max["flags"] == (3,)


# --------------------------------------------------------------------------- applying a plan (stand-in tensorrt)


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self.calls.append((name, *args))


def _fake_trt() -> SimpleNamespace:
    flags = SimpleNamespace(FP16="FP16", INT8="INT8", TF32="TF32")
    return SimpleNamespace(BuilderFlag=flags, MemoryPoolType=SimpleNamespace(WORKSPACE="WORKSPACE"),
                           NetworkDefinitionCreationFlag=SimpleNamespace(STRONGLY_TYPED=1))


def _network(*names: str) -> SimpleNamespace:
    return SimpleNamespace(num_inputs=len(names), get_input=lambda i: SimpleNamespace(name=names[i]))


def test_configure_sets_min_opt_max_per_input_and_the_flags(workspace):
    model, family, graph = _bert_graph(workspace)
    profile = trt_engine.graph_profile(graph, family.export_example(model, graph), max_batch=4, max_seq=32)
    plan = build_plan(Precision.FP16, "10.13.0").with_profile(profile)
    builder, config = SimpleNamespace(), _Recorder()
    trt_profile = _Recorder()
    builder.create_optimization_profile = lambda: trt_profile
    configure(_fake_trt(), builder, _network("input_ids", "attention_mask"), config, plan, workspace_bytes=1 << 30)
    assert trt_profile.calls == [("set_shape", "input_ids", (1, 1), (2, 16), (4, 32)),
                                 ("set_shape", "attention_mask", (1, 1), (2, 16), (4, 32))]
    assert config.calls == [("add_optimization_profile", trt_profile), ("set_flag", "FP16"), ("clear_flag", "TF32"),
                            ("set_memory_pool_limit", "WORKSPACE", 1 << 30)]
    with pytest.raises(EngineUnsupported, match=r"no optimisation-profile range for network input\(s\) \['token_type_ids'\]"):
        configure(_fake_trt(), builder, _network("input_ids", "token_type_ids"), _Recorder(), plan)
    assert network_flags(_fake_trt(), build_plan(Precision.FP16, "11.0.0")) == 2
    assert network_flags(_fake_trt(), plan) == 0


# --------------------------------------------------------------------------- engine cache (fake build behind the seam)


def test_engine_key_covers_artifact_tensorrt_gpu_and_plan(workspace):
    model, family, graph = _bert_graph(workspace)
    example = family.export_example(model, graph)
    plan = build_plan(Precision.FP16, "10.13.0").with_profile(profile_for(graph, example, max_batch=8, max_seq=128))
    base = engine_parts("a" * 64, "10.13.0", H200, plan)
    assert engine_parts("a" * 64, "10.13.0", H200, plan) == base
    others = [engine_parts("b" * 64, "10.13.0", H200, plan), engine_parts("a" * 64, "10.14.0", H200, plan),
              engine_parts("a" * 64, "10.13.0", GpuInfo("NVIDIA A100-SXM4-80GB", (8, 0)), plan),
              engine_parts("a" * 64, "10.13.0", GpuInfo("NVIDIA H200", (9, 1)), plan),
              engine_parts("a" * 64, "10.13.0", H200, build_plan(Precision.FP32, "10.13.0").with_profile(plan.profile)),
              engine_parts("a" * 64, "10.13.0", H200,
                           plan.with_profile(profile_for(graph, example, max_batch=8, max_seq=64)))]
    from harness.export.cache import cache_key

    keys = {cache_key(p) for p in [base, *others]}
    assert len(keys) == 1 + len(others)
    # the timing cache is per TensorRT version and GPU, shared by every engine built there
    assert timing_cache_path(Path("/c"), "10.13.0", H200) == Path("/c/trt10.13.0-nvidia-h200-sm90.timing")


def test_engines_are_built_once_per_key_into_the_locked_cache(workspace, tmp_path, monkeypatch):
    from harness.export.cache import ArtifactCache

    built: list[Path] = []

    def fake_build(onnx_path: Path, plan: BuildPlan, out_dir: Path, timing: Path) -> Path:
        built.append(out_dir)
        assert out_dir.name.startswith(".") and ".tmp-" in out_dir.name  # a temporary directory, renamed when done
        (out_dir / "engine.plan").write_bytes(b"engine for " + onnx_path.name.encode())
        return out_dir / "engine.plan"

    class FakeRunner:
        def __init__(self, path: Path, profile) -> None:
            self.engine_path, self.profile = Path(path), profile

    gpus = iter([H200, H200, GpuInfo("NVIDIA L4", (8, 9))])
    monkeypatch.setattr(tensorrt_native, "tensorrt_version", lambda: "10.13.0")
    monkeypatch.setattr(tensorrt_native, "gpu_info", lambda device=0: next(gpus))
    monkeypatch.setattr(tensorrt_native, "build_engine", fake_build)
    monkeypatch.setattr(tensorrt_native, "TrtGraphRunner", FakeRunner)
    onnx_path = _qdq_onnx(tmp_path / "m.onnx")
    plan = build_plan(Precision.FP16, "10.13.0").with_profile(file_profile([("x", ["batch", 4])], max_batch=8,
                                                                            max_seq=128))
    cache = ArtifactCache(tmp_path / "artifacts")
    first = tensorrt_native.load_engine(cache, onnx_path, plan, "m-model-fp16", tmp_path)
    again = tensorrt_native.load_engine(cache, onnx_path, plan, "m-model-fp16", tmp_path)
    other_gpu = tensorrt_native.load_engine(cache, onnx_path, plan, "m-model-fp16", tmp_path)
    assert len(built) == 2 and first.engine_path == again.engine_path != other_gpu.engine_path
    assert first.engine_path.parent.name.startswith("m-model-fp16-trt10.13.0-nvidia-h200-sm90-")
    assert first.engine_path.read_bytes() == b"engine for m.onnx"


# --------------------------------------------------------------------------- skip reasons


def test_skip_reasons_are_exact(monkeypatch):
    monkeypatch.setattr(tensorrt_native, "tensorrt_version", lambda: None)
    assert TensorRTBackend.unavailable_reason(variant("bert-tiny", "fp16", "trt_native")) == \
        "tensorrt not installed (pip install 'model-harness[gpu]')"
    assert TensorRTBackend.runtime_summary() == "tensorrt: not installed (pip install 'model-harness[gpu]')"
    monkeypatch.setattr(tensorrt_native, "tensorrt_version", lambda: "10.13.0")
    monkeypatch.setattr(tensorrt_native, "cuda_reason", lambda: None)
    assert TensorRTBackend.unavailable_reason(variant("bert-tiny", "fp16", "trt_native")) is None
    assert TensorRTBackend.unavailable_reason(variant("bert-tiny", "fp32", "trt_native")) is None
    assert TensorRTBackend.unavailable_reason(variant("bert-tiny", "int8", "trt_native")).startswith(
        "INT8 on TensorRT needs explicit Q/DQ (static INT8); the INT8 artifact holds dynamic quantization")


def test_without_a_gpu_the_cuda_reason_is_given(monkeypatch):
    import torch

    if torch.cuda.is_available():  # pragma: no cover - GPU machines run scripts/gpu_check.sh instead
        pytest.skip("a CUDA device is present: the no-GPU reason cannot show here")
    monkeypatch.setattr(tensorrt_native, "tensorrt_version", lambda: "10.13.0")
    assert TensorRTBackend.unavailable_reason(variant("bert-tiny", "fp16", "trt_native")) == \
        "no CUDA device (torch.cuda.is_available() is False); native TensorRT needs an NVIDIA GPU"


def test_the_provider_is_declared_once_and_runs_onnx_files():
    from harness.runners import PROVIDERS, backends

    assert PROVIDERS["trt_native"].backend == "tensorrt" and PROVIDERS["trt_native"].needs_gpu
    assert backends()["tensorrt"].runs_onnx_files and TensorRTBackend.fresh_process_reason(
        variant("bert-tiny", "fp16", "trt_native")) is None


def test_static_int8_builds_from_its_own_qdq_artifact_and_dynamic_int8_is_skipped_with_why():
    from harness.runners.tensorrt_native import artifact_kind

    plan = build_plan(Precision.INT8_STATIC, "10.13.0", int8_kind=artifact_kind(Precision.INT8_STATIC))
    assert (plan.source, plan.flags) == (Precision.INT8_STATIC, ("INT8",))  # the calibrated Q/DQ file
    assert build_plan(Precision.INT8_STATIC, "11.0.0", int8_kind="qdq").strongly_typed
    with pytest.raises(EngineUnsupported, match="dynamic quantization"):
        build_plan(Precision.INT8, "10.13.0", int8_kind=artifact_kind(Precision.INT8))
