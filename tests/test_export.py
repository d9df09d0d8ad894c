"""Export: dynamic axes really dynamic, checker-valid artifacts, eval mode preserved, cache reused."""

from pathlib import Path

import numpy as np
import onnx
import pytest

from harness.core import Precision
from harness.export.artifacts import ExportSettings, onnx_artifact
from harness.export.onnx_export import ExportError, export_graph
from harness.runners.base import GraphRef
from harness.runners.ort_runner import OrtGraphRunner
from tests.conftest import variant


def test_graph_contract_and_dynamic_axes(workspace):
    model = workspace.model("marian-tiny")
    family = workspace.family(model)
    graph = next(g for g in family.graphs(model) if g.name == "decoder_with_past")
    entry = onnx_artifact(model, family, graph, Precision.FP32, ExportSettings(), workspace.runtimes.artifacts)
    proto = onnx.load(str(entry.path()))
    inputs = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in proto.graph.input}
    assert list(inputs) == list(graph.input_names)
    assert [o.name for o in proto.graph.output] == list(graph.output_names)
    assert inputs["input_ids"][0] == "batch" and inputs["encoder_attention_mask"][1] == "encoder_sequence"
    assert inputs["past_key_values.0.decoder.key"][2] == "past_decoder_sequence"
    assert not model.model.training, "export must leave the reference model in eval mode"


@pytest.mark.parametrize("batch,length", [(1, 3), (5, 40)])
def test_exported_encoder_runs_at_other_shapes(workspace, batch, length):
    model = workspace.model("bert-tiny")
    family = workspace.family(model)
    graph = family.graphs(model)[0]
    entry = onnx_artifact(model, family, graph, Precision.FP32, ExportSettings(), workspace.runtimes.artifacts)
    runner = OrtGraphRunner(str(entry.path()), "CPUExecutionProvider")
    ids = np.full((batch, length), 7, dtype=np.int64)
    out = runner.run({"input_ids": ids, "attention_mask": np.ones_like(ids)})
    assert out["logits"].shape == (batch, 5)


def test_second_request_reuses_the_cached_artifact(workspace):
    model = workspace.model("bert-tiny")
    family = workspace.family(model)
    graph = family.graphs(model)[0]
    first = onnx_artifact(model, family, graph, Precision.INT8, ExportSettings(), workspace.runtimes.artifacts)
    second = onnx_artifact(model, family, graph, Precision.INT8, ExportSettings(), workspace.runtimes.artifacts)
    assert not second.built and second.directory == first.directory


def test_int8_and_fp16_artifacts_are_smaller_and_valid(workspace):
    model = workspace.model("marian-tiny")
    family = workspace.family(model)
    graph = family.graphs(model)[0]
    sizes = {}
    calibration = tuple(workspace.corpora.calibration_texts(model))  # int8-static: sentences after the judged ones
    for precision in Precision:
        entry = onnx_artifact(model, family, graph, precision, ExportSettings(calibration_texts=calibration),
                              workspace.runtimes.artifacts)
        onnx.checker.check_model(str(entry.path()))
        sizes[precision] = entry.path().stat().st_size
    assert sizes[Precision.INT8] < sizes[Precision.FP16] < sizes[Precision.FP32]
    assert sizes[Precision.INT8_STATIC] < sizes[Precision.FP32]


def test_export_refuses_a_module_in_training_mode(workspace, tmp_path):
    model = workspace.model("bert-tiny")
    family = workspace.family(model)
    graph = family.graphs(model)[0]
    module = family.module(model, graph).train()
    try:
        with pytest.raises(ExportError, match="training mode"):
            export_graph(module, graph, family.export_example(model, graph), tmp_path)
    finally:
        model.model.eval()
    assert not model.model.training


def test_variant_ids_in_artifacts(workspace):
    backend = workspace.backend(variant("bert-tiny", "fp16"), workspace.model("bert-tiny"))
    model = workspace.model("bert-tiny")
    family = workspace.family(model)
    arts = backend.artifacts(GraphRef(model, family, family.graphs(model)[0], variant("bert-tiny", "fp16")))
    assert set(arts) == {"model/model.onnx", "model/fp16_report.json"}
    info = arts["model/model.onnx"]
    assert len(info["sha256"]) == 64 and info["bytes"] > 0


def test_fp16_block_list_keeps_ops_in_fp32_and_changes_the_cache_key(workspace):
    model = workspace.model("bert-tiny")
    family = workspace.family(model)
    graph = family.graphs(model)[0]
    plain = onnx_artifact(model, family, graph, Precision.FP16, ExportSettings(), workspace.runtimes.artifacts)
    blocked = onnx_artifact(model, family, graph, Precision.FP16, ExportSettings(fp16_op_block_list=("Softmax",)),
                            workspace.runtimes.artifacts)
    assert plain.directory != blocked.directory

    def softmax_types(path):
        proto = onnx.load(str(path))
        types = {vi.name: vi.type.tensor_type.elem_type for vi in proto.graph.value_info}
        return {types.get(n.output[0]) for n in proto.graph.node if n.op_type == "Softmax"}

    assert softmax_types(blocked.path()) == {onnx.TensorProto.FLOAT}
    assert onnx.TensorProto.FLOAT16 in softmax_types(plain.path())


def test_dynamo_exporter_is_selectable(workspace):
    model = workspace.model("bert-tiny")
    family = workspace.family(model)
    graph = family.graphs(model)[0]
    entry = onnx_artifact(model, family, graph, Precision.FP32, ExportSettings(exporter="dynamo"), workspace.runtimes.artifacts)
    runner = OrtGraphRunner(str(entry.path()), "CPUExecutionProvider")
    feeds = family.feeds(model, graph, ["a short one", "and a somewhat longer sentence to pad against"])
    ref = workspace.refs.reference(model, family, graph, feeds)
    np.testing.assert_allclose(runner.run(feeds)["logits"], ref["logits"], atol=1e-5)


def _cpu_has_vnni() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return True
    return "vnni" in flags


@pytest.mark.skipif(not _cpu_has_vnni(), reason="CPU without VNNI: ONNX Runtime's U8S8 INT8 kernels (AVX2 VPMADDUBSW) "
                    "saturate, and per-channel weights measured 2.9x the per-tensor error here (rel_l2 0.075 vs 0.026)")
def test_int8_per_channel_is_a_separate_artifact_and_at_least_as_accurate(workspace):
    from harness.case.pipeline import numeric_parity
    from harness.judge.workspace import Workspace

    per_tensor = numeric_parity(workspace, variant("bert-tiny", "int8"))
    from dataclasses import replace

    options = replace(workspace.options, settings=replace(workspace.options.settings, int8_per_channel=True))
    channel_ws = Workspace(options)
    per_channel = numeric_parity(channel_ws, variant("bert-tiny", "int8"))
    key = "model/model.onnx"
    assert per_tensor.artifacts[key]["sha256"] != per_channel.artifacts[key]["sha256"]
    assert per_channel.metrics()["model.logits.rel_l2"] <= per_tensor.metrics()["model.logits.rel_l2"] * 1.5
    torch_channel = numeric_parity(channel_ws, variant("bert-tiny", "int8", "torch_cpu"))
    assert torch_channel.passed
