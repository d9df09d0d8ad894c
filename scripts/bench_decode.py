"""Cached vs uncached decoding speed: tokens/s for exactly N new tokens, PyTorch and ORT.

Why: the KV-cache graphs (decoder_with_past / one step with past) are what deployments
run, and the uncached path (full decoder re-run per step) is the simple one; the gap
between them says what the cache buys and whether an export lost it. EOS is disabled
so every sentence decodes exactly ``--new-tokens`` tokens and the two paths do the same
amount of work. Greedy, FP32, same loop (``harness.generation``) for both backends.

Usage:
    python scripts/bench_decode.py [--models marian-tiny llama-tiny numbers-en-zh]
        [--new-tokens 32] [--sentences 16] [--batch-size 8] [--repeats 3] [--threads 1]

``HARNESS_BENCH_SMOKE=1``: marian-tiny and llama-tiny (both decoders), 2 sentences x 2 tokens, batch
2, 1 repeat (``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core import Precision, RunOptions, Settings, Variant  # noqa: E402
from harness.generation import decode_texts, settings_for_model  # noqa: E402
from harness.judge.generation import select_indices  # noqa: E402
from harness.judge.workspace import Workspace  # noqa: E402
from harness.runners import PROVIDERS
from harness.zoo import registered  # noqa: E402


def measure(ws: Workspace, name: str, provider: str, args: argparse.Namespace) -> dict[bool, float]:
    """Median tokens/s per cache mode over ``repeats`` decodes, cached and uncached
    alternating (so drift on a shared machine hits both), after one warm-up each.

    The time is the decode loop only (``Decoded.seconds``): loading sessions is a one-off.
    """
    model = ws.model(name)
    corpus = ws.corpora.corpus(model)
    texts = [corpus.sources[i] for i in select_indices(len(corpus.sources), args.sentences)]
    variant = Variant(name, Precision.FP32, PROVIDERS[provider])
    backend, family = ws.backend(variant, model), ws.family(model)
    base = settings_for_model(model.model, max_new_tokens=args.new_tokens)
    # no EOS: every sentence decodes exactly --new-tokens tokens in both modes
    modes = {cache: replace(base, use_cache=cache, eos_token_ids=(), forced_eos_token_id=None)
             for cache in (True, False)}
    rates: dict[bool, list[float]] = {True: [], False: []}
    for repeat in range(args.repeats + 1):
        for cache, settings in modes.items():
            out = decode_texts(backend, model, family, variant, texts, settings, args.batch_size, args.threads)
            assert out.new_tokens == len(texts) * args.new_tokens
            if repeat:  # the first round warms up
                rates[cache].append(out.new_tokens / out.seconds)
    return {cache: statistics.median(r) for cache, r in rates.items()}


def main(argv: list[str] | None = None) -> int:
    """Print the table; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    generating = [n for n, s in registered().items() if s.generates]
    parser.add_argument("--models", nargs="+", default=generating)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--sentences", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch and ORT intra-op threads")
    args = parser.parse_args(argv)
    from harness.perf import smoke

    smoke.announce(smoke.shrink(args, models=["marian-tiny", "llama-tiny"], new_tokens=2, sentences=2, batch_size=2, repeats=1))
    ws = Workspace(RunOptions(settings=Settings(threads=args.threads)))
    print(f"greedy FP32, {args.sentences} sentences x {args.new_tokens} new tokens, batch {args.batch_size}, "
          f"{args.threads} thread(s), median of {args.repeats}")
    header = f"| {'model':<14} | {'backend':<9} | {'cached tok/s':>12} | {'uncached tok/s':>14} | {'cached/uncached':>15} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for name in args.models:
        for provider in ("torch_cpu", "ort_cpu"):
            rate = measure(ws, name, provider, args)
            cached, uncached = rate[True], rate[False]
            print(f"| {name:<14} | {provider:<9} | {cached:>12.1f} | {uncached:>14.1f} | {cached / uncached:>14.2f}x |")
    return 0


if __name__ == "__main__":
    from harness.perf import smoke

    raise SystemExit(smoke.finish(main(), verdicts=()))
