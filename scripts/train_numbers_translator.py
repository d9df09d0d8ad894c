"""Train the numbers-en-zh zoo model: a tiny MarianMT, English number words -> Chinese numerals.

Why: the harness needs a seq2seq model whose output quality is *real* and exactly
checkable offline. Training data is generated on the fly by harness/zoo/numbers.py;
every English source in harness/data/corpora/numbers_en_zh.tsv (the held-out evaluation corpus) is
excluded, so the evaluation measures generalisation, not memorisation.

Deterministic: fixed seeds, deterministic torch algorithms, a fixed thread count, and
a fixed number of steps (no wall-clock cut-off), so the same command on the same
library versions reproduces the same weights.

Usage:
    python scripts/train_numbers_translator.py [--steps N] [--out DIR] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.data.corpus import load_corpus  # noqa: E402
from harness.zoo.numbers import sample_number, to_chinese, to_english  # noqa: E402

DEFAULT_SEED = 1234
DEFAULT_OUT = REPO / "harness" / "zoo" / "models" / "numbers-en-zh"
SPECIAL_TOKENS = ("<pad>", "</s>", "<unk>")  # ids 0, 1, 2 (Marian order: pad, eos, unk)
WORD_BOUNDARY = "\u2581"  # "▁" marks "a space preceded this token", so decoding can restore spaces
# One token per: optional boundary + ASCII word, optional boundary + digit run, or any other
# single character (each Chinese numeral, "-", punctuation).
SPLIT_PATTERN = r"\u2581?[A-Za-z]+|\u2581?[0-9]+|\u2581?[^\u2581]"
MAX_LENGTH = 40  # longest tokenized side is 28 tokens incl. </s> (a 12-digit number)


def held_out_sources(root: Path | None = None) -> frozenset[str]:
    """English sources of the held-out corpus; training must never emit one of them."""
    return frozenset(load_corpus("numbers_en_zh", root=root).sources)


def training_numbers(seed: int, held_out: frozenset[str]) -> Iterator[int]:
    """The endless, deterministic training stream for ``seed``, minus held-out numbers."""
    rng = random.Random(seed)
    while True:
        n = sample_number(rng)
        if to_english(n) not in held_out:
            yield n


def vocabulary_texts() -> list[str]:
    """Texts that between them contain every token either side can produce."""
    texts = []
    for n in range(1000):
        for value in (n, n * 1000 + 1, n * 10**6, n * 10**9 + 10**4):
            texts += [to_english(value), to_chinese(value)]
    return texts


def build_tokenizer():
    """Word-level tokenizer with one shared vocab (English words + Chinese characters).

    Spaces become "▁" on the following token; the Metaspace decoder turns "▁" back into
    a space and joins tokens with nothing, so Chinese decodes without spaces and English
    decodes with its original spacing ("seventy", "-", "five" -> "seventy-five").
    """
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
    eos_id = vocab["</s>"]
    backend.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A $B </s>", special_tokens=[("</s>", eos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=MAX_LENGTH,
    )


def build_model(tokenizer, args: argparse.Namespace):
    """A small Marian from scratch; Marian convention: decoder_start = pad."""
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    config = MarianConfig(
        vocab_size=len(tokenizer),
        d_model=args.d_model,
        encoder_layers=args.layers,
        decoder_layers=args.layers,
        encoder_attention_heads=args.heads,
        decoder_attention_heads=args.heads,
        encoder_ffn_dim=args.d_model * 4,
        decoder_ffn_dim=args.d_model * 4,
        max_position_embeddings=64,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
        forced_eos_token_id=tokenizer.eos_token_id,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
    )
    model = MarianMTModel(config)
    model.generation_config = GenerationConfig(
        max_length=MAX_LENGTH,
        num_beams=1,
        do_sample=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
        forced_eos_token_id=tokenizer.eos_token_id,
    )
    return model


def encode(tokenizer, numbers: list[int]):
    """Source ids, attention mask, and labels (pad -> -100 so padding is not learned)."""
    batch = tokenizer([to_english(n) for n in numbers], padding=True, return_tensors="pt")
    labels = tokenizer(text_target=[to_chinese(n) for n in numbers], padding=True, return_tensors="pt").input_ids
    labels[labels == tokenizer.pad_token_id] = -100
    return batch.input_ids, batch.attention_mask, labels


def translate(model, tokenizer, sources: list[str], batch_size: int = 128) -> list[str]:
    """Greedy HF generate, batched."""
    import torch

    out: list[str] = []
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(sources), batch_size):
            enc = tokenizer(sources[start : start + batch_size], padding=True, return_tensors="pt")
            ids = model.generate(**enc, num_beams=1, do_sample=False)
            out += tokenizer.batch_decode(ids, skip_special_tokens=True)
    return out


@dataclass(frozen=True)
class Recipe:
    """What differs between the numbers models trained on this stream (this translator, the decoder-only
    twin in train_numbers_decoder.py): their tokenizer, model, training batch and greedy decoding."""

    build_tokenizer: Callable[[], Any]
    build_model: Callable[[Any, argparse.Namespace], Any]
    encode: Callable[[Any, list[int]], Any]
    decode: Callable[[Any, Any, list[str]], list[str]]


TRANSLATOR = Recipe(build_tokenizer, build_model, encode, translate)


def exact_match(hyps: list[str], refs: list[str]) -> float:
    return sum(h == r for h, r in zip(hyps, refs, strict=True)) / len(refs)


def lr_at(step: int, args: argparse.Namespace) -> float:
    """Linear warm-up then cosine decay to 2% of the peak; the tail polishes rare cases."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(args: argparse.Namespace, recipe: Recipe | None = None) -> dict:
    import torch

    recipe = recipe or TRANSLATOR

    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(args.threads)
    held_out = held_out_sources()
    tokenizer = recipe.build_tokenizer()
    model = recipe.build_model(tokenizer, args)
    params = sum(p.numel() for p in model.parameters())
    print(f"vocab {len(tokenizer)}  params {params}  held-out {len(held_out)}", flush=True)

    dev_rng = random.Random(args.seed + 1)
    dev = [n for n in (sample_number(dev_rng) for _ in range(400)) if to_english(n) not in held_out][:256]
    stream = training_numbers(args.seed, held_out)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    start = time.perf_counter()
    model.train()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, args)
        input_ids, attention_mask, labels = recipe.encode(tokenizer, [next(stream) for _ in range(args.batch_size)])
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            line = f"step {step + 1}/{args.steps}  loss {loss.item():.4f}  lr {lr_at(step, args):.2e}"
            if (step + 1) % (args.log_every * 5) == 0 or step + 1 == args.steps:
                hyps = recipe.decode(model, tokenizer, [to_english(n) for n in dev])
                line += f"  dev_em {exact_match(hyps, [to_chinese(n) for n in dev]):.4f}"
                model.train()
            print(f"{line}  {time.perf_counter() - start:.0f}s", flush=True)
    wall = time.perf_counter() - start
    model.eval()
    return {"model": model, "tokenizer": tokenizer, "wall_s": wall, "params": params}


def evaluate_held_out(model, tokenizer, recipe: Recipe | None = None) -> dict:
    """Exact match and sacrebleu (tokenize="zh") on the whole held-out corpus."""
    import sacrebleu

    corpus = load_corpus("numbers_en_zh")
    hyps = (recipe or TRANSLATOR).decode(model, tokenizer, corpus.sources)
    bleu = sacrebleu.corpus_bleu(hyps, [corpus.references], tokenize="zh").score
    wrong = [(s, h, r) for s, h, r in zip(corpus.sources, hyps, corpus.references) if h != r]
    return {"pairs": len(hyps), "exact_match": exact_match(hyps, corpus.references), "bleu": bleu, "wrong": wrong}


def save(result: dict, metrics: dict, args: argparse.Namespace) -> None:
    """HF-format model dir plus training.json (what the tests replay)."""
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    result["model"].save_pretrained(out)
    tokenizer = result["tokenizer"]
    tokenizer.save_pretrained(out)
    # transformers 5 no longer writes this file; older loaders and tools still read it.
    special = {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"}
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n", encoding="utf-8")
    write_training_record(out, args, HYPERPARAMETERS, result, metrics, training_markdown)


HYPERPARAMETERS = ("seed", "steps", "batch_size", "threads", "d_model", "layers", "heads", "lr", "warmup")


def write_training_record(out: Path, args: argparse.Namespace, hyperparameters: tuple[str, ...], result: dict,
                          metrics: dict, markdown: Callable[[dict, str], str]) -> None:
    """training.json (what the tests replay) and TRAINING.md, from the run's arguments and measurements.

    Shared by every numbers model's training script, so each records the same fields the same way.
    """
    record = {
        **{name: getattr(args, name) for name in hyperparameters},
        "training_examples": args.steps * args.batch_size,
        "params": result["params"],
        "wall_s": round(result["wall_s"], 1),
        "held_out_pairs": metrics["pairs"],
        "held_out_exact_match": metrics["exact_match"],
        "held_out_bleu": round(metrics["bleu"], 2),
        "versions": library_versions(),
    }
    (out / "training.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    (out / "TRAINING.md").write_text(markdown(record, reproduce_command(args)), encoding="utf-8")


def training_markdown(record: dict, command: str) -> str:
    """TRAINING.md: how to reproduce the model and what it measured, from the actual run."""
    versions = ", ".join(f"{k} {v}" for k, v in record["versions"].items())
    return f"""# numbers-en-zh

A tiny MarianMT trained from scratch to translate English number words (British style,
0 to 999,999,999,999) into Chinese numerals, e.g. "six hundred and seventy-five thousand
and eleven" -> "六十七万五千零一十一". Its outputs are exactly checkable, so the harness
can gate real translation quality (exact match, BLEU) across export and precision changes.

## Reproduce

```
{command}
```

Deterministic for a given library version and thread count: seed {record["seed"]},
`torch.use_deterministic_algorithms(True)`, `torch.set_num_threads({record["threads"]})`, fixed step count.

## Data

* Training pairs are generated on the fly by `harness/zoo/numbers.py`
  (`sample_number`: digit count uniform in 1..12, extra zero digits), rendered with
  `to_english` / `to_chinese`: {record["steps"]} steps x batch {record["batch_size"]}
  = {record["training_examples"]:,} examples.
* Every English source in `harness/data/corpora/numbers_en_zh.tsv` ({record["held_out_pairs"]} pairs)
  is excluded from the stream (`training_numbers()` in the script; the test suite replays
  the stream to confirm).

## Model

MarianMTModel, d_model {record["d_model"]}, {record["layers"]} encoder + {record["layers"]} decoder
layers, {record["heads"]} heads, FFN {record["d_model"] * 4}, no dropout, shared and tied embeddings,
{record["params"]:,} parameters, fp32 safetensors. AdamW, peak lr {record["lr"]}, {record["warmup"]} warm-up
steps, cosine decay to 2% of peak, gradient clipping 1.0.

## Tokenizer

Word-level `tokenizer.json` (the `tokenizers` library), one vocabulary for English words
and Chinese characters: `<pad>`=0, `</s>`=1, `<unk>`=2. Spaces become a "▁" prefix on the
next token, "-" and every Chinese character are separate tokens, and `</s>` is appended to
every sequence. The Metaspace decoder joins tokens without separators and turns "▁" back
into a space, so `batch_decode(ids, skip_special_tokens=True)` gives Chinese with no spaces
and English with its original spacing.

```python
tok = AutoTokenizer.from_pretrained(MODEL_DIR)
batch = tok(sources, padding=True, return_tensors="pt")
labels = tok(text_target=targets, padding=True, return_tensors="pt").input_ids
```

Config: pad_token_id 0, eos_token_id 1, decoder_start_token_id 0 (Marian convention),
generation max_length {MAX_LENGTH}, greedy.

## Measured

* Training wall time: {record["wall_s"]:.0f} s on a 2-core CPU shared with other jobs
  (wall time varies with load; the loss curve does not).
* Held-out exact match (greedy, HF generate, num_beams=1): {record["held_out_exact_match"]:.4f}
  on {record["held_out_pairs"]} pairs.
* Held-out corpus BLEU (sacrebleu, tokenize="zh"): {record["held_out_bleu"]:.2f}.
* Versions: {versions}.
"""


def library_versions() -> dict[str, str]:
    import sacrebleu
    import tokenizers
    import torch
    import transformers

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "sacrebleu": sacrebleu.__version__,
    }


def training_parser(description: str, seed: int, out: Path, steps: int, lr: float, warmup: int,
                    layers: int) -> argparse.ArgumentParser:
    """The options every numbers model's training takes, with that model's defaults (it adds its own)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seed", type=int, default=seed)
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=lr)
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--layers", type=int, default=layers)
    parser.add_argument("--heads", type=int, default=4)
    # One thread: on a shared 2-core machine two intra-op threads ran ~5x slower per step
    # (each op waits for the slower thread), while the loss curve was identical.
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=100)
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--no-save", action="store_true", help="train and evaluate only")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = training_parser(__doc__.splitlines()[0], DEFAULT_SEED, DEFAULT_OUT, steps=3500, lr=1e-3, warmup=200,
                             layers=2)
    parser.add_argument("--d-model", type=int, default=128)
    return parser.parse_args(argv)


def reproduce_command(args: argparse.Namespace) -> str:
    """The run's command with every hyperparameter explicit, so changed defaults cannot hide."""
    flags = ("seed", "steps", "batch_size", "lr", "warmup", "d_model", "layers", "heads", "threads")
    parts = [f"--{flag.replace('_', '-')} {getattr(args, flag)}" for flag in flags]
    return "python scripts/train_numbers_translator.py " + " ".join(parts)


def run(args: argparse.Namespace, recipe: Recipe, save_to: Callable[[dict, dict, argparse.Namespace], None]) -> int:
    """Train ``recipe``, report it on the held-out corpus, save it unless ``--no-save``."""
    result = train(args, recipe)
    metrics = evaluate_held_out(result["model"], result["tokenizer"], recipe)
    print(
        f"held-out: {metrics['pairs']} pairs  exact_match {metrics['exact_match']:.4f}  "
        f"bleu {metrics['bleu']:.2f}  wall {result['wall_s']:.0f}s",
        flush=True,
    )
    for source, hyp, ref in metrics["wrong"][:20]:
        print(f"  WRONG {source!r}: {hyp!r} != {ref!r}")
    if not args.no_save:
        save_to(result, metrics, args)
        print(f"saved to {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv), TRANSLATOR, save)


if __name__ == "__main__":
    raise SystemExit(main())
