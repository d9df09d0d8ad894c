"""Safe intake: a model directory is untrusted input.

Pickle checkpoints are refused unless opted in, and even then only plain tensors load
(``weights_only=True``); a directory's own Python code never runs unless opted in; nothing
is fetched from the Hub. Each refusal is checked to have happened *before* the payload ran
(a sentinel file the payload would write stays absent).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.core import UsageError
from harness.zoo.base import materialize, resolve, spec_for_directory
from harness.zoo.loading import load_model


@pytest.fixture(scope="module")
def bert_dir() -> Path:
    return materialize(resolve("bert-tiny"))


def _copy(src: Path, dst: Path, *, keep_safetensors: bool = True) -> Path:
    shutil.copytree(src, dst, ignore=None if keep_safetensors else shutil.ignore_patterns("*.safetensors"))
    return dst


def _logits(model, text: str = "a padded, real sentence") -> torch.Tensor:
    enc = model.tokenizer([text], return_tensors="pt")
    with torch.no_grad():
        return model.model(**enc).logits


class _Payload:
    """What a malicious checkpoint carries: code that runs on unpickling."""

    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self):
        return (os.system, (f"touch {self.sentinel}",))


def test_pickle_weights_are_refused_unless_opted_in(bert_dir, tmp_path):
    reference = load_model(resolve("bert-tiny"))
    model_dir = _copy(bert_dir, tmp_path / "pickled", keep_safetensors=False)
    torch.save(reference.model.state_dict(), model_dir / "pytorch_model.bin")
    spec = spec_for_directory(model_dir)
    with pytest.raises(UsageError, match=r"no safetensors weights \(found pytorch_model.bin\).*allow_pickle"):
        load_model(spec)
    loaded = load_model(spec, allow_pickle=True)
    _assert_same_model(loaded, reference)
    # the opt-in can come from the spec (a suite config's allow_pickle = true)
    _assert_same_model(load_model(replace(spec, extra={"allow_pickle": True})), reference)


def _assert_same_model(loaded, reference) -> None:
    """The same weights, bit for bit, and the same logits up to float32 kernel noise: tensors from
    torch.load and from safetensors can take different CPU kernel paths (3.7e-9 apart on an AVX2 EPYC)."""
    got, want = loaded.model.state_dict(), reference.model.state_dict()
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    torch.testing.assert_close(_logits(loaded), _logits(reference), rtol=0, atol=1e-6)


def test_opted_in_pickle_still_cannot_run_code(bert_dir, tmp_path):
    model_dir = _copy(bert_dir, tmp_path / "evil", keep_safetensors=False)
    sentinel = tmp_path / "pwned"
    torch.save({"bert.embeddings.word_embeddings.weight": _Payload(sentinel)}, model_dir / "pytorch_model.bin")
    with pytest.raises(UsageError, match=r"pytorch_model.bin: refused: .*weights_only=True"):
        load_model(spec_for_directory(model_dir), allow_pickle=True)
    assert not sentinel.exists()


def test_remote_code_is_refused_unless_trusted(bert_dir, tmp_path):
    model_dir = _copy(bert_dir, tmp_path / "custom")
    sentinel = tmp_path / "imported"
    (model_dir / "modeling_custom.py").write_text(f"open({str(sentinel)!r}, 'w').write('ran')\n")
    config = json.loads((model_dir / "config.json").read_text())
    config["auto_map"] = {"AutoModelForSequenceClassification": "modeling_custom.Custom"}
    (model_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(UsageError, match=r"ships its own Python code \(auto_map.*trust_remote_code"):
        load_model(spec_for_directory(model_dir))
    assert not sentinel.exists()
    # a stray code file without auto_map is refused too: nothing explains why it is there
    del config["auto_map"]
    (model_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(UsageError, match="code files modeling_custom.py"):
        load_model(spec_for_directory(model_dir))
    # opted in, the directory is handed to transformers with trust_remote_code=True
    assert load_model(spec_for_directory(model_dir), trust_remote_code=True).model is not None


def test_hub_names_never_download(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    with pytest.raises(UsageError, match="unknown model 'bert-base-uncased'"):
        resolve("bert-base-uncased")
    code = main(["check", "--reference", "sentence-transformers/all-MiniLM-L6-v2", "--onnx", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "no such directory" in err


def test_corrupt_weights_are_a_usage_error(bert_dir, tmp_path):
    model_dir = _copy(bert_dir, tmp_path / "corrupt")
    weights = next(model_dir.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(UsageError, match="cannot load model"):
        load_model(spec_for_directory(model_dir))
