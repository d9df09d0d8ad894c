"""Cached vs uncached decoding speed: tokens/s for exactly N new tokens, PyTorch and ORT.

Why: the KV-cache graphs (decoder_with_past / one step with past) are what deployments
run, and the uncached path (full decoder re-run per step) is the simple one; the gap
between them says what the cache buys and whether an export lost it. EOS is disabled
so every sentence decodes exactly ``--new-tokens`` tokens and the two paths do the same
amount of work. Greedy, FP32, same loop (``harness.generation``) for both backends.

Usage:
    python scripts/bench_decode.py [--models marian-tiny llama-tiny numbers-en-zh]
        [--new-tokens 32] [--sentences 16] [--batch-size 8] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.config import PROVIDERS, Precision, RunOptions, Variant  # noqa: E402
from harness.generation import decode_texts, settings_for_model  # noqa: E402
from harness.generation_parity import corpus_for, select_indices  # noqa: E402
from harness.workspace import Workspace  # noqa: E402
from harness.zoo import registered  # noqa: E402


def measure(ws: Workspace, name: str, provider: str, use_cache: bool, args: argparse.Namespace) -> tuple[float, int]:
    """Median tokens/s over ``repeats`` decodes (after one warm-up), and the tokens per decode.

    The time is the decode loop only (``Decoded.seconds``): loading sessions is a one-off.
    """
    model = ws.model(name)
    corpus = corpus_for(model)
    texts = [corpus.sources[i] for i in select_indices(len(corpus.sources), args.sentences)]
    settings = replace(settings_for_model(model.model, max_new_tokens=args.new_tokens, use_cache=use_cache),
                       eos_token_ids=(), forced_eos_token_id=None)
    variant = Variant(name, Precision.FP32, PROVIDERS[provider])
    backend = ws.backend(variant, model)
    family = ws.family(model)
    decode_texts(backend, model, family, variant, texts[: args.batch_size], settings, args.batch_size, args.threads)
    rates, tokens = [], 0
    for _ in range(args.repeats):
        out = decode_texts(backend, model, family, variant, texts, settings, args.batch_size, args.threads)
        tokens = out.new_tokens
        rates.append(tokens / out.seconds)
    return statistics.median(rates), tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    generating = [n for n, s in registered().items() if s.generates]
    parser.add_argument("--models", nargs="+", default=generating)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--sentences", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch and ORT intra-op threads")
    args = parser.parse_args(argv)
    ws = Workspace(RunOptions(intra_op_threads=args.threads))
    print(f"greedy FP32, {args.sentences} sentences x {args.new_tokens} new tokens, batch {args.batch_size}, "
          f"{args.threads} thread(s), median of {args.repeats}")
    header = f"| {'model':<14} | {'backend':<9} | {'cached tok/s':>12} | {'uncached tok/s':>14} | {'cached/uncached':>15} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for name in args.models:
        for provider in ("torch_cpu", "ort_cpu"):
            cached, _ = measure(ws, name, provider, True, args)
            uncached, _ = measure(ws, name, provider, False, args)
            print(f"| {name:<14} | {provider:<9} | {cached:>12.0f} | {uncached:>14.0f} | {cached / uncached:>14.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
