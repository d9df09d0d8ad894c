"""The committed numbers-llama decoder must load offline and really answer.

Its INT8/INT4 tolerances are measured on it because its answers are known: if the weights, the
tokenizer's prompt template or the held-out split regressed, those tolerances would mean nothing.
"""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

import torch
import transformers

from harness.data.corpus import load_corpus
from harness.zoo.base import resolve
from harness.zoo.numbers import to_english
from tests.scripts_module import load_script

REPO = Path(__file__).resolve().parent.parent
MODEL_DIR = REPO / "harness" / "zoo" / "models" / "numbers-llama"


def test_the_zoo_entry_is_the_committed_directory_small_and_complete():
    spec = resolve("numbers-llama")
    assert spec.path == MODEL_DIR and spec.family == "causal_lm" and spec.corpus == "numbers_en_zh"
    size = sum(p.stat().st_size for p in MODEL_DIR.iterdir())
    assert size < 1 * 2**20  # ~0.5 MB: well under a few MB
    record = json.loads((MODEL_DIR / "training.json").read_text(encoding="utf-8"))
    assert record["held_out_exact_match"] == 1.0 and record["held_out_pairs"] == 332
    config = json.loads((MODEL_DIR / "config.json").read_text(encoding="utf-8"))
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (4, 2)  # GQA


def test_it_answers_held_out_prompts_from_left_padded_batches():
    torch.set_num_threads(1)
    tok = transformers.AutoTokenizer.from_pretrained(MODEL_DIR, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(MODEL_DIR, local_files_only=True).eval()
    corpus = load_corpus("numbers_en_zh")
    assert corpus.references is not None
    sources, refs = corpus.sources[:48], corpus.references[:48]
    answers = load_script("train_numbers_decoder").complete(model, tok, sources, batch_size=16)
    assert answers == refs
    # negative control: the prompt template matters (without the <zh> marker the model does not answer)
    enc = tok(sources[:8], padding=True, return_tensors="pt", add_special_tokens=False)
    out = model.generate(**enc, max_new_tokens=8, do_sample=False)
    assert tok.batch_decode(out[:, enc.input_ids.shape[1]:], skip_special_tokens=True) != refs[:8]


def test_training_never_sees_a_held_out_number():
    script = load_script("train_numbers_decoder")
    shared = load_script("train_numbers_translator")  # the stream both numbers models train on
    held_out = shared.held_out_sources()
    stream = shared.training_numbers(script.DEFAULT_SEED, held_out)
    assert not any(to_english(n) in held_out for n in islice(stream, 20000))
