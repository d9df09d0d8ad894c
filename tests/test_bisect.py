"""harness bisect: per-tensor comparison of a reduced-precision graph against FP32."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import harness.judge.workspace  # noqa: F401  (import native stacks once, see tests/test_plugin.py)
from harness.cli import main
from harness.core import Precision
from harness.debug.bisect import bisect_graph, bisect_tolerance

TINY = {"norm_max_abs": 1e-7}
LOOSE = {"norm_max_abs": 10.0, "cosine": -1.0}


def _mlp(path: Path, w2_delta: float = 0.0, extra_identity: bool = False) -> Path:
    """x -> MatMul(W1) -> Add(b) -> Relu -> MatMul(W2) -> y, optionally with W2 perturbed
    (the injected fault) or an Identity inserted before the second MatMul (a renamed tensor)."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    w2 = rng.standard_normal((8, 3)).astype(np.float32)
    w2[2, 1] += w2_delta
    relu_out = "relu_out"
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["mm1_out"], name="matmul1"),
             helper.make_node("Add", ["mm1_out", "B"], ["add_out"], name="add"),
             helper.make_node("Relu", ["add_out"], [relu_out], name="relu")]
    if extra_identity:
        nodes.append(helper.make_node("Identity", [relu_out], ["relu_copy"], name="inserted"))
        relu_out = "relu_copy"
    nodes.append(helper.make_node("MatMul", [relu_out, "W2"], ["y"], name="matmul2"))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
                              [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(b, "B"),
                               numpy_helper.from_array(w2, "W2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


FEEDS = {"x": np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)}


def test_perturbed_initializer_names_exactly_that_matmul(tmp_path):
    ref = _mlp(tmp_path / "ref.onnx")
    bad = _mlp(tmp_path / "bad.onnx", w2_delta=0.5)
    result = bisect_graph(ref, bad, FEEDS, {"norm_max_abs": 1e-3})
    first = result.first_divergent
    assert (first.node, first.op_type, first.tensor) == ("matmul2", "MatMul", "y")
    assert [t.tensor for t in result.tensors] == ["mm1_out", "add_out", "relu_out", "y"]  # weights skipped
    assert all(t.metrics["max_abs"] == 0.0 for t in result.tensors[:3])
    assert [t.node for t in result.path()][-1] == "matmul2"
    assert result.path()[0].node == "matmul1"


def test_identical_graphs_have_no_divergent_node(tmp_path):
    ref = _mlp(tmp_path / "ref.onnx")
    result = bisect_graph(ref, ref, FEEDS, TINY)
    assert result.first_divergent is None and result.path() == []
    assert len(result.tensors) == 4 and {t.metrics["max_abs"] for t in result.tensors} == {0.0}


def test_tensors_without_counterpart_are_unmatched(tmp_path):
    ref = _mlp(tmp_path / "ref.onnx")
    cand = _mlp(tmp_path / "cand.onnx", extra_identity=True)
    result = bisect_graph(ref, cand, FEEDS, TINY)
    assert result.unmatched == ["relu_copy"] and result.missing == []
    assert result.first_divergent is None


def _mask_add(path: Path, fill: float) -> Path:
    """x + fill, the shape of an additive attention mask filled with finfo.min (or FP16's clamp)."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "M"], ["y"], name="mask_add")], "mask",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        [numpy_helper.from_array(np.array([0, 0, fill, fill], dtype=np.float32), "M")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_clamped_mask_constants_are_not_a_divergence(tmp_path):
    ref = _mask_add(tmp_path / "ref.onnx", float(np.finfo(np.float32).min))
    clamped = _mask_add(tmp_path / "clamped.onnx", -1e4)
    wrong_sign = _mask_add(tmp_path / "wrong.onnx", 1e4)
    assert bisect_graph(ref, clamped, FEEDS, TINY).first_divergent is None
    assert bisect_graph(ref, wrong_sign, FEEDS, TINY).first_divergent.node == "mask_add"


def test_unknown_tolerance_metric_is_rejected(tmp_path):
    ref = _mlp(tmp_path / "ref.onnx")
    with pytest.raises(ValueError, match="unknown tensor metric"):
        bisect_graph(ref, ref, FEEDS, {"kl": 1.0})
    assert bisect_tolerance(Precision.INT8, {"cosine": 0.5}).as_dict()["cosine"] == {"threshold": 0.5, "op": ">="}


@pytest.fixture(scope="module")
def bert_fp16(workspace):
    from harness.export.artifacts import onnx_artifact

    model = workspace.model("bert-tiny")
    family = workspace.family(model)
    graph = family.graphs(model)[0]
    settings = workspace.runtimes.settings_for(model)
    paths = [onnx_artifact(model, family, graph, p, settings, workspace.runtimes.artifacts).path()
             for p in (Precision.FP32, Precision.FP16)]
    return paths, family.feeds(model, graph, workspace.batches(model)[0])


def test_bert_tiny_fp16_tensor_metrics_and_tolerance(bert_fp16):
    (fp32, fp16), feeds = bert_fp16
    strict = bisect_graph(fp32, fp16, feeds, TINY)
    assert len(strict.tensors) > 50
    assert all({"norm_max_abs", "cosine"} <= set(t.metrics) for t in strict.tensors)
    assert strict.unmatched  # the keep_io_types cast onnxconverter-common inserts
    first = strict.first_divergent
    assert first is not None and first.order == min(t.order for t in strict.tensors if t.diverges)
    assert strict.path()[-1] is first
    assert bisect_graph(fp32, fp16, feeds, LOOSE).first_divergent is None
    # the default rule: FP16 noise (measured max 1.4e-3) stays under the gate's 1e-2, masks included
    default = bisect_graph(fp32, fp16, feeds, bisect_tolerance(Precision.FP16))
    assert default.first_divergent is None
    assert 0 < max(t.error for t in default.tensors) < 1e-2


def test_cli_exit_codes(tmp_path, capsys):
    args = ["bisect", "--models", "bert-tiny", "--precisions", "fp16", "--samples", "4"]
    assert main(args + ["--out", str(tmp_path / "ok")]) == 0
    report = json.loads((tmp_path / "ok" / "bisect.json").read_text())
    assert report["first_divergent"] is None and report["graph"] == "model" and report["counts"]["compared"] > 50
    assert main(args + ["--tolerance", "norm_max_abs=1e-7", "--out", str(tmp_path / "bad")]) == 1
    report = json.loads((tmp_path / "bad" / "bisect.json").read_text())
    assert report["first_divergent"]["node"] and report["path"][-1]["tensor"] == report["first_divergent"]["tensor"]
    assert "first divergent node" in (tmp_path / "bad" / "bisect.md").read_text()


@pytest.mark.parametrize("argv, message", [
    (["--models", "bert-tyni", "--precisions", "fp16"], "did you mean 'bert-tiny'"),
    (["--models", "bert-tiny", "--precisions", "fp32"], "fp32 is the reference"),
    (["--models", "bert-tiny", "--precisions", "int8", "--tolerance", "kl=1"], "unknown metric 'kl'"),
    (["--models", "bert-tiny", "--precisions", "int8", "--graph", "decoder"], "has no graph 'decoder'"),
])
def test_cli_bad_usage_is_exit_2_one_line(argv, message, capsys, tmp_path):
    assert main(["bisect", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("harness: error:") and message in err[0]
    assert not (tmp_path / "bisect.json").exists()
