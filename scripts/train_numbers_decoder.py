"""Train the numbers-llama zoo model: a tiny decoder-only Llama, English number words -> Chinese numerals.

Why: INT8 and INT4 tolerances only mean something on a model whose weights carry real
structure (a random-weight LM has near-flat logits, so greedy paths flip on any noise and
a quantized file looks broken when it is not). This model answers a prompt
``<s> six hundred and five <zh>`` with ``六百零五</s>``: every held-out prompt has a known right
answer, so a quantized export is judged on the numerals it gets right, not only on drift.

It is the decoder-only twin of ``numbers-en-zh`` (scripts/train_numbers_translator.py): the same
number renderers, the same word-level vocabulary and the same held-out exclusion (every English
source of harness/data/corpora/numbers_en_zh.tsv is kept out of training), with Llama's
conventions: ``<s>`` starts the prompt, a ``<zh>`` marker ends it, ``</s>`` ends the answer,
prompts are left-padded, grouped-query attention (4 query heads, 2 key/value heads), so GQA
exporters (onnxruntime-genai's GroupQueryAttention) and cache layouts are exercised too.

Deterministic: fixed seeds, deterministic torch algorithms, a fixed thread count, and a fixed
number of steps (no wall-clock cut-off).

Usage:
    python scripts/train_numbers_decoder.py [--steps N] [--out DIR] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from train_numbers_translator import (  # noqa: E402
    SPLIT_PATTERN,
    WORD_BOUNDARY,
    Recipe,
    run,
    training_parser,
    vocabulary_texts,
    write_training_record,
)

from harness.zoo.numbers import to_chinese, to_english  # noqa: E402

DEFAULT_SEED = 4321
DEFAULT_OUT = REPO / "harness" / "zoo" / "models" / "numbers-llama"
#: ids 0..4; ``<zh>`` ends every prompt (the tokenizer's template appends it), so a prompt
#: tokenized the ordinary way is exactly what the model continues
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>", "<zh>")
MAX_NEW_TOKENS = 32  # longest held-out answer: 27 numerals + </s>
MAX_POSITIONS = 128


def build_tokenizer():
    """Word-level tokenizer over the translator's vocabulary with Llama's specials, left padding."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    normalizer = normalizers.Sequence([normalizers.Strip(), normalizers.Replace(Regex(r"\s+"), WORD_BOUNDARY)])
    pre_tokenizer = pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated")
    pieces: set[str] = set()
    for text in vocabulary_texts():
        pieces.update(piece for piece, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *sorted(pieces)])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.normalizer = normalizer
    backend.pre_tokenizer = pre_tokenizer
    backend.decoder = decoders.Metaspace(replacement=WORD_BOUNDARY, prepend_scheme="never")
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A <zh>", special_tokens=[("<s>", vocab["<s>"]), ("<zh>", vocab["<zh>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        additional_special_tokens=["<zh>"],
        padding_side="left",
        model_max_length=MAX_POSITIONS,
    )


def build_model(tokenizer, args: argparse.Namespace):
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(  # type: ignore[call-arg]
        vocab_size=len(tokenizer),
        hidden_size=args.hidden,
        intermediate_size=args.hidden * 2,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        max_new_tokens=MAX_NEW_TOKENS,
        num_beams=1,
        do_sample=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model


def encode(tokenizer, numbers: list[int]):
    """``<s> en <zh> zh </s>``, right-padded for training; loss on the answer and its ``</s>`` only."""
    import torch

    prompts = tokenizer([to_english(n) for n in numbers]).input_ids
    answers = tokenizer([to_chinese(n) for n in numbers], add_special_tokens=False).input_ids
    rows = [p + a + [tokenizer.eos_token_id] for p, a in zip(prompts, answers, strict=True)]
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for i, (row, prompt) in enumerate(zip(rows, prompts, strict=True)):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
        labels[i, len(prompt) : len(row)] = torch.tensor(row[len(prompt) :])
    return ids, mask, labels


def complete(model, tokenizer, sources: list[str], batch_size: int = 128) -> list[str]:
    """Greedy HF generate from left-padded prompts; the answer text only."""
    import torch

    out: list[str] = []
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(sources), batch_size):
            enc = tokenizer(sources[start : start + batch_size], padding=True, return_tensors="pt")
            ids = model.generate(**enc, num_beams=1, do_sample=False, max_new_tokens=MAX_NEW_TOKENS)
            out += tokenizer.batch_decode(ids[:, enc.input_ids.shape[1] :], skip_special_tokens=True)
    return out


DECODER = Recipe(build_tokenizer, build_model, encode, complete)


HYPERPARAMETERS = ("seed", "steps", "batch_size", "lr", "warmup", "hidden", "layers", "heads", "kv_heads", "threads")


def save(result: dict, metrics: dict, args: argparse.Namespace) -> None:
    """HF-format model dir plus training.json (what the tests replay) and TRAINING.md."""
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    result["model"].save_pretrained(out)
    result["tokenizer"].save_pretrained(out)
    write_training_record(out, args, HYPERPARAMETERS, result, metrics, training_markdown)


def training_markdown(record: dict, command: str) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in record["versions"].items())
    return f"""# numbers-llama

A tiny decoder-only Llama trained from scratch to continue an English number (British
style, 0 to 999,999,999,999) with its Chinese numerals: `<s> six hundred and five <zh>` ->
`六百零五</s>`. Its answers are exactly checkable, so INT8 and INT4 exports are judged on the
numerals they get right, not only on drift from PyTorch.

## Reproduce

```
{command}
```

Deterministic for a given library version and thread count (seed {record["seed"]},
`torch.use_deterministic_algorithms(True)`, fixed step count).

## Data

Training pairs come from `harness/zoo/numbers.py` ({record["steps"]} steps x batch {record["batch_size"]}
= {record["training_examples"]:,} examples); every English source of
`harness/data/corpora/numbers_en_zh.tsv` ({record["held_out_pairs"]} pairs) is excluded. Loss is on the
answer and its `</s>` only.

## Model

LlamaForCausalLM, hidden {record["hidden"]}, {record["layers"]} layers, {record["heads"]} query heads,
{record["kv_heads"]} key/value heads (grouped-query attention), FFN {record["hidden"] * 2}, untied
embeddings, {record["params"]:,} parameters, fp32 safetensors. Word-level tokenizer (the translator's
vocabulary) with `<pad>`=0, `<s>`=1, `</s>`=2, `<unk>`=3, `<zh>`=4; the template is `<s> $A <zh>`;
left padding.

## Measured

* Training wall time: {record["wall_s"]:.0f} s, one thread, on a 2-core CPU shared with other jobs.
* Held-out exact match (greedy, left-padded batches of 128): {record["held_out_exact_match"]:.4f}
  on {record["held_out_pairs"]} pairs; corpus BLEU (sacrebleu, tokenize="zh") {record["held_out_bleu"]:.2f}.
* Versions: {versions}.
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = training_parser(__doc__.splitlines()[0], DEFAULT_SEED, DEFAULT_OUT, steps=1500, lr=3e-3, warmup=100,
                             layers=3)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--kv-heads", type=int, default=2)
    return parser.parse_args(argv)


def reproduce_command(args: argparse.Namespace) -> str:
    parts = [f"--{flag.replace('_', '-')} {getattr(args, flag)}" for flag in HYPERPARAMETERS]
    return "python scripts/train_numbers_decoder.py " + " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv), DECODER, save)


if __name__ == "__main__":
    raise SystemExit(main())
