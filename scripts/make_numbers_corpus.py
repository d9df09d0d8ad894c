"""Generate harness/data/corpora/numbers_en_zh.tsv: held-out English -> Chinese number pairs.

The corpus is the evaluation set of the numbers-en-zh zoo model, so it must be
reproducible (fixed seed) and the trainer must never see these numbers; the trainer
reads this file and excludes every number in it.

Usage: python scripts/make_numbers_corpus.py [--seed 2024] [--out harness/data/corpora/numbers_en_zh.tsv]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.zoo.numbers import sample_number, to_chinese, to_english  # noqa: E402

DEFAULT_SEED = 2024
# Pairs per digit count: few short numbers (there are only 10 one-digit ones), the
# bulk spread evenly over thousands, millions, and billions.
PER_LENGTH = {1: 3, 2: 9, **{length: 32 for length in range(3, 13)}}


def held_out_numbers(seed: int = DEFAULT_SEED) -> list[int]:
    """The distinct held-out numbers, in file order, for ``seed``."""
    rng = random.Random(seed)
    seen: set[int] = set()
    numbers: list[int] = []
    for length, count in PER_LENGTH.items():
        drawn = 0
        while drawn < count:
            n = sample_number(rng, length=length)
            if n not in seen:
                seen.add(n)
                numbers.append(n)
                drawn += 1
    return numbers


def render_tsv(numbers: list[int]) -> str:
    """One "english<TAB>chinese" line per number."""
    return "".join(f"{to_english(n)}\t{to_chinese(n)}\n" for n in numbers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent.parent / "harness" / "data" / "corpora" / "numbers_en_zh.tsv"
    )
    args = parser.parse_args(argv)
    numbers = held_out_numbers(args.seed)
    args.out.write_text(render_tsv(numbers), encoding="utf-8")
    print(f"wrote {len(numbers)} pairs to {args.out} (seed {args.seed})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
