"""``harness check`` is the run pipeline with another artifact source.

The pieces that make it so, tested on their own: the families say how a foreign file is
judged (no family-name switches in ``harness/check``), the workspace gets its pre-built
source at construction and serves it only to backends that run ONNX files, and the
embedding judgement is one function the suite and the check share.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.core import Precision, RunOptions, Settings, Variant
from harness.families import family_for
from harness.families.base import CheckedGraph, CheckMode, PromptThenStep
from harness.runners import PROVIDERS
from harness.runners.base import GraphRef
from harness.runners.prebuilt import (
    CacheSplitRunner,
    MappedRunner,
    PrebuiltBackend,
    PrebuiltGraphs,
    runs_onnx_files,
)

ROOT = Path(__file__).resolve().parents[1]


# -- families own the check modes -------------------------------------------------------------------------
def test_seq2seq_settles_a_single_files_role_from_its_inputs():
    fam = family_for("seq2seq")
    assert fam.artifact_role("model", ["input_ids", "attention_mask"]) == "encoder"
    assert fam.artifact_role("model", ["decoder_input_ids", "encoder_outputs", "mask"]) == "decoder"
    assert fam.artifact_role("model", ["input_ids", "past_key_values.0.decoder.key"]) == "decoder_with_past"
    assert fam.artifact_role("model", ["input_ids", "use_cache_branch", "past.0.key"]) == "merged"
    assert fam.artifact_role("decoder", ["input_ids", "use_cache_branch"]) == "decoder"  # optimum's name wins
    assert family_for("encoder").artifact_role("model", ["use_cache_branch"]) == "model"


def test_families_say_which_reference_graphs_a_file_is_judged_against():
    seq2seq, lm, enc = family_for("seq2seq"), family_for("causal_lm"), family_for("encoder")
    assert seq2seq.check_modes("merged", True) == [CheckMode("decoder", "decoder", "merged_decoder"),
                                                   CheckMode("decoder_with_past", "decoder_with_past",
                                                         "merged_decoder_with_past")]
    assert seq2seq.check_modes("decoder_with_past", True) == [
        CheckMode("decoder_with_past", "decoder_with_past", "decoder_with_past")]
    assert [m.key for m in lm.check_modes("model", True)] == ["model_prefill", "model_step"]
    assert [m.mode for m in lm.check_modes("decoder", False)] == ["prefill"]
    assert [m.mode for m in lm.check_modes("decoder_with_past", True)] == ["step"]
    assert enc.check_modes("encoder", False) == [CheckMode("model", "model", "model")]
    assert enc.implicit_inputs == ("position_ids",) and enc.pads_static_sequence
    assert set(seq2seq.implicit_inputs) == {"encoder_hidden_states", "past"} and not seq2seq.pads_static_sequence
    assert lm.implicit_inputs == () and not lm.pads_static_sequence


class _Fake(MappedRunner):
    def __init__(self, name: str) -> None:
        super().__init__(None, {"input_ids": "input_ids"}, {"logits": "logits"}, {}, name)  # type: ignore[arg-type]


def test_families_assemble_the_decoding_runners():
    seq2seq, lm = family_for("seq2seq"), family_for("causal_lm")
    enc, dec, past = _Fake("e"), _Fake("d"), _Fake("p")
    runners, cached, why = seq2seq.decoding_runners({"encoder": CheckedGraph(enc, False, "e.onnx")})
    assert runners == {} and "needs the encoder and decoder" in why
    runners, cached, why = seq2seq.decoding_runners({"encoder": CheckedGraph(enc, False, "e.onnx"),
                                                     "decoder": CheckedGraph(dec, True, "d.onnx"),
                                                     "decoder_with_past": CheckedGraph(past, True, "p.onnx")})
    assert why == "" and cached and runners == {"encoder": enc, "decoder": dec, "decoder_with_past": past}
    runners, cached, why = lm.decoding_runners({"prefill": CheckedGraph(dec, True, "d.onnx"),
                                                "step": CheckedGraph(past, True, "p.onnx")})
    assert cached and runners["model"] == PromptThenStep(dec, past)  # named by the family, served as one runner:
    source = PrebuiltGraphs([], "CPUExecutionProvider", 1, {})
    source.serve(runners)
    split = source.runner("model")
    assert isinstance(split, CacheSplitRunner) and (split.prefill, split.step) == (dec, past)
    runners, cached, _ = lm.decoding_runners({"prefill": CheckedGraph(dec, True, "m.onnx"),
                                              "step": CheckedGraph(past, True, "m.onnx")})
    assert cached and runners == {"model": past}  # one file serves both: its cached view
    runners, cached, _ = lm.decoding_runners({"prefill": CheckedGraph(dec, False, "d.onnx")})
    assert not cached and runners == {"model": dec}
    assert "does not generate" in family_for("encoder").decoding_runners({})[2]


def test_check_code_has_no_family_or_backend_name_switches():
    """Families and backends own their behaviour; ``harness check`` asks them."""
    pattern = re.compile(r"""(family(\.name)?|\.backend|family_name)\s*(==|!=|\bin\b)|==\s*["'](onnxruntime|seq2seq|"""
                         r"""causal_lm|encoder)["']""")
    files = sorted((ROOT / "harness" / "check").glob("*.py")) + [ROOT / "harness" / "cli" / "check.py",
                                                                   ROOT / "harness" / "suites" / "test_artifact_parity.py",
                                                                   ROOT / "harness" / "suites" / "test_embedding_parity.py"]
    hits = [f"{f.name}:{n}: {line.strip()}" for f in files
            for n, line in enumerate(f.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []


# -- the workspace gets its artifact source at construction ---------------------------------------------------
def _identity_onnx(path: Path) -> Path:
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_backends_declare_whether_they_run_onnx_files():
    from harness.runners import backends

    known = backends()
    assert runs_onnx_files(known["onnxruntime"]) and not runs_onnx_files(known["pytorch"])
    assert "prebuilt" not in known  # it stands in for ONNX variants; it has no provider of its own


def test_workspace_serves_prebuilt_files_only_to_backends_that_run_onnx(tmp_path):
    from harness.judge.workspace import Workspace

    path = _identity_onnx(tmp_path / "id.onnx")
    source = PrebuiltGraphs([path], "CPUExecutionProvider", 1, {"id.onnx": {"path": str(path)}})
    try:
        ws = Workspace(RunOptions(settings=Settings(samples=8, batch_size=4)), source=source)
        model = ws.model("bert-tiny")
        family = ws.family(model)
        (graph,) = family.graphs(model)
        onnx_variant = Variant("bert-tiny", Precision.FP32, PROVIDERS["ort_cpu"])
        backend = ws.backend(onnx_variant, model)
        assert isinstance(backend, PrebuiltBackend)
        assert not isinstance(ws.backend(Variant("bert-tiny", Precision.FP32, PROVIDERS["torch_cpu"]), model),
                              PrebuiltBackend)  # the reference stays PyTorch
        with pytest.raises(KeyError, match="no artifact provides the 'model' graph"):
            backend.load(GraphRef(model, family, graph, onnx_variant))
        runner = MappedRunner(source.session(path), {"input_ids": "x"}, {"logits": "y"}, {}, "id.onnx")
        source.serve({"model": runner})
        assert backend.load(GraphRef(model, family, graph, onnx_variant)) is runner
        assert backend.artifacts(GraphRef(model, family, graph, onnx_variant)) == {"id.onnx": {"path": str(path)}}
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        assert np.array_equal(runner.run({"input_ids": x})["logits"], x)
        assert not isinstance(Workspace(RunOptions()).backend(onnx_variant, model), PrebuiltBackend)
    finally:
        source.close()


def test_an_unloadable_file_is_a_usage_error_naming_it(tmp_path):
    from harness.core import UsageError

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07not onnx")
    with pytest.raises(UsageError, match="bad.onnx: onnxruntime cannot load it"):
        PrebuiltGraphs([bad], "CPUExecutionProvider", 1, {})


def test_parity_batches_reuse_the_memoised_reference():
    from harness.judge.workspace import Workspace

    ws = Workspace(RunOptions(settings=Settings(samples=8, batch_size=4)))
    model = ws.model("bert-tiny")
    family = ws.family(model)
    (graph,) = family.graphs(model)
    first = ws.refs.parity_batches(model, family, graph)
    keys = ws.refs.held(model)
    assert len(first) == 2 and len(keys) == 2
    again = ws.refs.parity_batches(model, family, graph, ws.batches(model, 4))
    assert ws.refs.held(model) == keys  # same feeds: no new reference run
    assert all(a[1] is b[1] for a, b in zip(first, again))
    halves = ws.refs.parity_batches(model, family, graph, ws.batches(model, 2))
    assert len(halves) == 4 and len(ws.refs.held(model)) == 6


# -- one embedding judgement ----------------------------------------------------------------------------
def test_embedding_parity_names_the_sentence_that_moved_most():
    from harness.families.pooling import Pooling
    from harness.judge.embedding import embedding_parity

    rng = np.random.default_rng(0)
    hidden = [rng.normal(size=(3, 5, 8)).astype(np.float32) for _ in range(2)]
    masks = [np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])] * 2
    batches = [({"attention_mask": m}, {"last_hidden_state": h}, {}) for m, h in zip(masks, hidden)]
    pooling = Pooling("mean", True)
    same = embedding_parity("model", pooling, batches, [{"last_hidden_state": h} for h in hidden], Precision.FP32)
    assert same.output.metrics["embedding_cosine_min"] > 0.999999 and not same.output.failures()
    moved = [h.copy() for h in hidden]
    moved[1][1, :, :] = rng.normal(size=(5, 8))  # sentence 4 of the corpus (batch 1, row 1)
    moved[0][0, 3:, :] += 100.0  # padding: must not count
    judged = embedding_parity("model", pooling, batches, [{"last_hidden_state": h} for h in moved], Precision.FP32)
    (failure, *_) = judged.output.failures()
    assert judged.worst_row == 4 and "worst element at sentence 4" in failure.message()
    assert judged.cosines[0] > 0.999999
    assert judged.describe_worst([f"s{i}" for i in range(6)]).startswith("sentence 4 (cosine")
    with pytest.raises(ValueError, match="1 variant outputs for 2 batches"):
        embedding_parity("model", pooling, batches, [{"last_hidden_state": hidden[0]}], Precision.FP32)
