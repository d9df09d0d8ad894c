"""The gate fails when it must: the known export failure modes, reproduced on purpose.

Each test builds the broken artifact the way practitioners accidentally do, then proves the
harness's verdict is a failure -- and, where it matters, that the correct export passes
under the same conditions (so the failure is caused by the fault, not by the setup).
"""

import numpy as np
import pytest
import torch

from harness.case.pipeline import numeric_parity
from harness.core import Precision, RunOptions, Settings
from harness.families.seq2seq import Seq2SeqFamily
from harness.judge.numeric import GateFailure, lint_result, run_graph_parity
from harness.judge.workspace import Workspace
from harness.runners.ort_runner import OrtGraphRunner
from tests.conftest import variant


def test_decoder_without_encoder_attention_mask_fails_fp32_on_padded_batches(workspace):
    good = numeric_parity(workspace, variant("marian-tiny"))
    assert good.passed, good.failures
    bad = numeric_parity(workspace, variant("marian-tiny"), family=Seq2SeqFamily(encoder_mask=False))
    failed = {(f.graph, f.output) for f in bad.failures}
    assert ("decoder", "logits") in failed and ("decoder_with_past", "logits") in failed
    assert ("encoder", "last_hidden_state") not in failed  # the encoder is fine; the fault is localised
    with pytest.raises(GateFailure, match=r"decoder/logits: norm_max_abs = .* worst element at batch=\d+"):
        bad.assert_ok()


def test_missing_encoder_mask_is_invisible_without_padding():
    """PITFALLS #4: equal-length inputs hide the fault -- why the corpus must mix lengths."""
    ws = Workspace(RunOptions(settings=Settings(samples=1, batch_size=1)))
    result = numeric_parity(ws, variant("marian-tiny"), family=Seq2SeqFamily(encoder_mask=False))
    assert result.passed


def test_model_exported_in_training_mode_fails(workspace, tmp_path):
    model = workspace.model("marian-tiny")
    family = workspace.family(model)
    graph = family.graphs(model)[0]  # encoder; dropout 0.1 in the config
    module = family.module(model, graph).train()
    example = family.export_example(model, graph)
    path = tmp_path / "encoder.onnx"
    try:
        torch.onnx.export(module, tuple(torch.from_numpy(example[n]) for n in graph.input_names), str(path),
                          input_names=list(graph.input_names), output_names=list(graph.output_names),
                          dynamic_axes={k: dict(v) for k, v in graph.dynamic_axes.items()}, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, dynamo=False)
    finally:
        model.model.eval()
    batches = []
    for texts in workspace.batches(model):
        feeds = family.feeds(model, graph, texts)
        ref = workspace.refs.reference(model, family, graph, feeds)
        batches.append((feeds, ref, family.valid_masks(graph, feeds, ref)))
    # Static: the training-mode Dropout is in the artifact whatever runtime loads it.
    lint = lint_result(graph.name, str(path))
    assert lint.metrics["training_mode_ops"] >= 1 and lint.failures()
    assert "Dropout" in lint.failures()[0].where
    # Numeric: where the runtime keeps the graph as exported (no graph optimisations),
    # dropout is live and parity fails. (onnxruntime's default optimisations delete Dropout,
    # which is exactly why the static check exists.)
    raw = OrtGraphRunner(str(path), "CPUExecutionProvider", optimization="disable")
    failures = [f for o in run_graph_parity(raw, graph, batches, Precision.FP32) for f in o.failures()]
    assert {f.metric for f in failures} >= {"norm_max_abs", "cosine"}


def test_correct_export_has_no_training_mode_ops(workspace):
    result = numeric_parity(workspace, variant("marian-tiny"))
    lints = [o for o in result.outputs if o.output == "artifact"]
    assert len(lints) == 3 and all(o.metrics["training_mode_ops"] == 0 for o in lints)


def test_missing_dynamic_axis_is_caught():
    """TorchScript bakes nn.MultiheadAttention's batch size into a Reshape: the artifact
    crashes on any other batch, so the case errors instead of passing silently."""
    ws = Workspace(RunOptions(settings=Settings(samples=16, batch_size=8, exporter="torchscript"),
                              given={"exporter": "torchscript"}))
    with pytest.raises(Exception, match="Reshape"):
        numeric_parity(ws, variant("encoder-custom"))
    default = Workspace(RunOptions(settings=Settings(samples=16, batch_size=8)))  # the model's own default: dynamo
    assert numeric_parity(default, variant("encoder-custom")).passed


def test_worst_location_points_into_the_corpus(workspace):
    bad = numeric_parity(workspace, variant("marian-tiny"), family=Seq2SeqFamily(encoder_mask=False))
    worst = next(o for o in bad.outputs if o.graph == "decoder" and o.output == "logits").worst
    batch, position, index = worst.index
    texts = workspace.texts(workspace.model("marian-tiny"))
    assert 0 <= batch < len(texts) and 0 <= index < 1000
    assert np.isfinite(worst.abs_err) and worst.abs_err > 0
