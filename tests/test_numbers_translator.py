"""The committed numbers-en-zh model must load offline and really translate.

It is the zoo's one model with checkable output quality, so a silent regression in it
(or in the held-out split) would make every downstream quality gate meaningless.
"""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

import pytest

from harness.data.corpus import load_corpus
from harness.zoo.numbers import to_chinese, to_english
from tests.scripts_module import load_script

REPO = Path(__file__).resolve().parent.parent
MODEL_DIR = REPO / "harness" / "zoo" / "models" / "numbers-en-zh"
REQUIRED_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "training.json",
    "TRAINING.md",
)

import sacrebleu  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """On a busy 2-core machine two intra-op threads made generation ~10x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def record() -> dict:
    return json.loads((MODEL_DIR / "training.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tokenizer():
    return transformers.AutoTokenizer.from_pretrained(MODEL_DIR, local_files_only=True)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = transformers.MarianMTModel.from_pretrained(MODEL_DIR, local_files_only=True)
    return m.eval()


def test_model_dir_is_complete_and_small() -> None:
    for name in REQUIRED_FILES:
        assert (MODEL_DIR / name).is_file(), name
    size = sum(p.stat().st_size for p in MODEL_DIR.iterdir())
    assert size < 10 * 2**20


def test_tokenizer_round_trips_without_spaces(tokenizer, model) -> None:
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id) == (0, 1, 2)
    config = model.config
    assert config.pad_token_id == tokenizer.pad_token_id
    assert config.eos_token_id == tokenizer.eos_token_id
    assert config.decoder_start_token_id == tokenizer.pad_token_id  # Marian convention
    assert config.vocab_size == len(tokenizer)
    assert model.generation_config.max_length >= 30

    sources = [to_english(675011), to_english(10)]
    batch = tokenizer(sources, padding=True, return_tensors="pt")
    assert batch.input_ids.shape[0] == 2 and (batch.input_ids[1] == tokenizer.pad_token_id).any()
    assert batch.input_ids[0, -1].item() == tokenizer.eos_token_id
    assert tokenizer.batch_decode(batch.input_ids, skip_special_tokens=True) == sources

    targets = [to_chinese(675011), to_chinese(10)]
    labels = tokenizer(text_target=targets, padding=True, return_tensors="pt").input_ids
    assert labels.shape[1] == len(targets[0]) + 1  # one token per character, plus </s>
    decoded = tokenizer.batch_decode(labels, skip_special_tokens=True)
    assert decoded == targets and all(" " not in d for d in decoded)
    assert tokenizer.unk_token_id in tokenizer("seven zillion").input_ids


def test_held_out_quality(model, tokenizer, record) -> None:
    corpus = load_corpus("numbers_en_zh")
    hyps: list[str] = []
    with torch.inference_mode():
        for start in range(0, len(corpus.sources), 176):
            enc = tokenizer(corpus.sources[start : start + 176], padding=True, return_tensors="pt")
            ids = model.generate(**enc, num_beams=1, do_sample=False)
            hyps += tokenizer.batch_decode(ids, skip_special_tokens=True)
    refs = corpus.references
    assert refs is not None and len(hyps) == len(refs) >= 300
    wrong = [(s, h, r) for s, h, r in zip(corpus.sources, hyps, refs) if h != r]
    exact = 1 - len(wrong) / len(refs)
    assert exact >= 0.99, wrong[:5]
    bleu = sacrebleu.corpus_bleu(hyps, [refs], tokenize="zh").score
    assert bleu >= 99.0
    # TRAINING.md / training.json must describe this model, not an earlier one.
    assert abs(exact - record["held_out_exact_match"]) < 1e-9


def test_training_stream_excludes_held_out(record) -> None:
    script = load_script("train_numbers_translator")
    held_out = script.held_out_sources()
    assert held_out == frozenset(load_corpus("numbers_en_zh").sources)
    held_out_ints = set(load_script("make_numbers_corpus").held_out_numbers())  # the corpus's numbers, as ints
    assert {to_english(n) for n in held_out_ints} == held_out
    used = record["steps"] * record["batch_size"]
    trained = list(islice(script.training_numbers(record["seed"], held_out), used))
    assert len(trained) == used
    assert not set(trained) & held_out_ints
    # The filter does real work: the unfiltered stream soon draws held-out numbers.
    unfiltered = script.training_numbers(record["seed"], frozenset())
    assert any(n in held_out_ints for n in islice(unfiltered, used))


def test_training_stream_is_deterministic() -> None:
    script = load_script("train_numbers_translator")
    a = list(islice(script.training_numbers(5, frozenset()), 200))
    b = list(islice(script.training_numbers(5, frozenset()), 200))
    assert a == b and a != list(islice(script.training_numbers(6, frozenset()), 200))
    assert {len(str(n)) for n in a} >= set(range(2, 13))
