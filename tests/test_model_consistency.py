"""A model's tokenizer and limits checked when it is opened (issue 25, item 2).

A tokenizer larger than the model's embedding (vocab 1000 vs 100 rows) printed an 89-line
traceback from ``harness check`` and an ``IndexError`` record from ``harness run``; now both
say, in one line with exit 2 before any case, which two numbers disagree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import UsageError

REPO = Path(__file__).resolve().parents[1]


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "HARNESS_CACHE": str(cache), "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def _harness(*args: str, cache: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; entrypoint()", *args],
                          capture_output=True, text=True, env=_env(cache), cwd=cwd)


def _bert_tiny() -> Path:
    from harness.zoo.base import materialize, resolve

    return materialize(resolve("bert-tiny"))


def _small_embedding_model(tmp_path: Path, rows: int = 100) -> Path:
    """bert-tiny's 1000-id tokenizer beside a BERT whose embedding has ``rows`` rows."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    user = tmp_path / "small-vocab"
    user.mkdir()
    cfg = BertConfig(vocab_size=rows, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,  # type: ignore[call-arg]
                     intermediate_size=64, max_position_embeddings=128, num_labels=2, pad_token_id=0)
    torch.manual_seed(0)
    BertForSequenceClassification(cfg).save_pretrained(str(user), safe_serialization=True)
    for name in _bert_tiny().iterdir():
        if name.name.startswith("tokenizer") or name.name.startswith("special_tokens") or name.name == "vocab.txt":
            shutil.copy(name, user / name.name)
    return user


def _tiny_onnx(path: Path) -> None:
    """A valid ONNX file (input_ids -> logits): the check gets as far as opening the reference."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Cast", ["input_ids"], ["logits"], to=TensorProto.FLOAT)], "g",
                              [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", "s"])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_the_tokenizer_larger_than_the_embedding_is_one_line_from_check_and_run(tmp_path):
    user = _small_embedding_model(tmp_path)
    cache = Path(os.environ.get("HARNESS_CACHE", tmp_path / "cache"))
    _tiny_onnx(tmp_path / "model.onnx")
    check = _harness("check", "--reference", str(user), "--onnx", str(tmp_path / "model.onnx"),
                     "--out", str(tmp_path / "check-out"), cache=cache, cwd=tmp_path)
    run = _harness("run", "--models", str(user), "--precisions", "fp32", "--providers", "ort_cpu",
                   "--out", str(tmp_path / "run-out"), cache=cache, cwd=tmp_path)
    for proc in (check, run):
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
        assert len(lines) == 1, proc.stderr
        assert "1000 token ids" in lines[0] and "100 rows" in lines[0] and "IndexError" not in proc.stderr
        assert lines[0].startswith("harness: error: ")
    assert not (tmp_path / "run-out" / "results.jsonl").exists()  # refused before any case


def test_a_special_token_id_outside_the_embedding_is_named(tmp_path):
    from harness.zoo.consistency import check_tokenizer

    user = tmp_path / "m"
    shutil.copytree(_bert_tiny(), user, ignore=shutil.ignore_patterns(".complete"))
    config = json.loads((user / "config.json").read_text())
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(user), local_files_only=True)
    assert check_tokenizer(user, config, tokenizer).embedding_rows == 1000  # the sound directory passes
    config["eos_token_id"] = 5000
    with pytest.raises(UsageError, match=r"config.json eos_token_id is 5000, outside the model's embedding of "
                                         r"1000 rows"):
        check_tokenizer(user, config, tokenizer)


def test_more_new_tokens_than_positions_is_refused_naming_both_numbers(tmp_path):
    from harness.zoo.consistency import ModelLimits, check_generation

    limits = ModelLimits(1000, "config.json vocab_size", 64, "config.json max_position_embeddings")
    check_generation(tmp_path, limits, 40)  # the translator's own request fits
    with pytest.raises(UsageError, match=r"max_new_tokens 80: .* need 81 positions but .* has 64 "
                                         r"\(config.json max_position_embeddings\)"):
        check_generation(tmp_path, limits, 80)
    with pytest.raises(UsageError, match=r"a 30-token prompt \+ 40 new tokens need 70 positions"):
        check_generation(tmp_path, limits, 40, prompt_tokens=30)


def test_every_zoo_model_is_consistent():
    """The refusals never fire on the harness's own models (negative control)."""
    from harness.zoo.base import ModelCatalog, materialize
    from harness.zoo.consistency import limits_of, tokenizer_size

    for name in ("bert-tiny", "marian-tiny", "llama-tiny", "numbers-en-zh", "minilm-l6"):
        spec = ModelCatalog().resolve(name)
        path = materialize(spec)
        config = json.loads((path / "config.json").read_text())
        limits = limits_of(path, config)
        from transformers import AutoTokenizer

        size = tokenizer_size(AutoTokenizer.from_pretrained(str(path), local_files_only=True))
        assert limits.embedding_rows is not None and size is not None and size <= limits.embedding_rows, name
        assert limits.positions is not None, name


def test_harness_run_refuses_more_new_tokens_than_a_models_positions_before_any_case(tmp_path):
    cache = Path(os.environ.get("HARNESS_CACHE", tmp_path / "cache"))
    proc = _harness("run", "--models", "numbers-en-zh", "--precisions", "fp32", "--providers", "torch_cpu",
                    "--gen-max-new-tokens", "100", "--out", str(tmp_path / "out"), cache=cache, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line == ("harness: error: --gen-max-new-tokens 100: the start token + 100 new tokens need 101 positions "
                    "but numbers-en-zh has 64 (config.json max_position_embeddings)")
    assert not (tmp_path / "out").exists()
