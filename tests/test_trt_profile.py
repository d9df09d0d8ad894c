"""TensorRT shape profiles: built from dynamic axes, passed to the EP, and checked before running.

No TensorRT here: these tests cover everything up to the provider call (profile strings,
the too-small check, skip reasons); the engine build itself needs a GPU.
"""

import numpy as np
import pytest

from harness.runners.base import GraphRef
from harness.runners.ort_runner import OrtBackend
from harness.runners.trt_profile import ShapeProfileError, profile_for
from tests.conftest import variant


def _graph(workspace, model_name, graph_name):
    model = workspace.model(model_name)
    family = workspace.family(model)
    graph = next(g for g in family.graphs(model) if g.name == graph_name)
    return model, family, graph


def test_profile_spans_dynamic_axes_and_formats_for_the_ep(workspace):
    model, family, graph = _graph(workspace, "bert-tiny", "model")
    profile = profile_for(graph, family.export_example(model, graph), max_batch=8, max_seq=64)
    assert profile.min["input_ids"] == (1, 1) and profile.max["input_ids"] == (8, 64)
    assert profile.opt["attention_mask"] == (4, 32)
    options = profile.provider_options()
    assert options["trt_profile_max_shapes"] == "input_ids:8x64,attention_mask:8x64"
    assert options["trt_profile_min_shapes"] == "input_ids:1x1,attention_mask:1x1"


def test_past_axes_start_at_zero_and_static_axes_stay(workspace):
    model, family, graph = _graph(workspace, "llama-tiny", "model")
    profile = profile_for(graph, family.export_example(model, graph), max_batch=4, max_seq=32)
    key = "past_key_values.0.key"
    kv_heads, head_dim = family.export_example(model, graph)[key].shape[1::2]
    assert profile.min[key] == (1, kv_heads, 0, head_dim)
    assert profile.max[key] == (4, kv_heads, 32, head_dim)
    assert profile.max["attention_mask"] == (4, 64)  # past + new tokens


def test_too_small_profile_fails_before_running_with_shape_and_limit(workspace):
    model, family, graph = _graph(workspace, "bert-tiny", "model")
    profile = profile_for(graph, family.export_example(model, graph), max_batch=8, max_seq=16)
    ok = {"input_ids": np.zeros((8, 16), np.int64), "attention_mask": np.ones((8, 16), np.int64)}
    profile.check(ok)
    long = {"input_ids": np.zeros((2, 40), np.int64), "attention_mask": np.ones((2, 40), np.int64)}
    with pytest.raises(ShapeProfileError, match=r"too small: input_ids \(2, 40\) outside \[\(1, 1\), \(8, 16\)\]"):
        profile.check(long)


def test_int8_on_tensorrt_is_skipped_with_a_reason(monkeypatch):
    import harness.runners.ort_runner as ort_runner

    monkeypatch.setattr(ort_runner, "available_providers",
                        lambda: ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"])
    assert "calibration" in OrtBackend.unavailable_reason(variant("bert-tiny", "int8", "ort_trt"))
    assert OrtBackend.unavailable_reason(variant("bert-tiny", "fp16", "ort_trt")) is None


def test_tensorrt_provider_options_carry_profile_fp16_and_engine_cache(workspace, tmp_path):
    model, family, graph = _graph(workspace, "bert-tiny", "model")
    trt, cpu = variant("bert-tiny", "fp16", "ort_trt"), variant("bert-tiny", "fp16", "ort_cpu")
    backend = workspace.backend(trt, model)
    options, profile = backend.provider_options(GraphRef(model, family, graph, trt), tmp_path)
    assert options["trt_fp16_enable"] == "True" and options["trt_engine_cache_enable"] == "True"
    assert options["trt_profile_max_shapes"].startswith("input_ids:8x128")
    assert profile is not None
    cpu_options, cpu_profile = backend.provider_options(GraphRef(model, family, graph, cpu), tmp_path)
    assert cpu_options == {} and cpu_profile is None
