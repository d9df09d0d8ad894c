"""Side-by-side comparisons: interleaved blocks of calls, ratios with block-bootstrap CIs.

Two numbers measured minutes apart on a shared machine differ by more than most effects
worth claiming (a neighbour starts, the CPU clocks down). Measured in alternating blocks
within one run, drift hits every contender alike and cancels in the ratio. Each round
rotates the order, and every other pass reverses it, so no contender always follows
the same one (cache and frequency after-effects are shared out too).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping

import numpy as np

from harness.core.markdown import table
from harness.perf.stats import bootstrap_ratio_ci

#: ``n`` -> ``n`` latency samples in ms (a block of calls of one contender)
BlockFn = Callable[[int], list[float]]


def round_order(names: list[str], round_index: int) -> list[str]:
    """Rotation by ``round_index``, reversed on every other full cycle of rotations."""
    k = len(names)
    shift = round_index % k
    order = names[shift:] + names[:shift]
    return order[::-1] if (round_index // k) % 2 else order


def interleave(blocks: Mapping[str, BlockFn], rounds: int, per_round: int,
               warmup_rounds: int = 1) -> dict[str, list[float]]:
    """Run every contender's block once per round, in :func:`round_order`; samples per contender."""
    if rounds < 1 or per_round < 1:
        raise ValueError(f"rounds and per_round must be >= 1, got {rounds} and {per_round}")
    names = list(blocks)
    for r in range(warmup_rounds):
        for name in round_order(names, r):
            blocks[name](per_round)
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in round_order(names, r):
            samples = blocks[name](per_round)
            if len(samples) != per_round:
                raise ValueError(f"{name}: block returned {len(samples)} samples, expected {per_round}")
            out[name] += samples
    return out


@dataclass(frozen=True)
class Ratio:
    """``cand / base`` of one comparison; ``lo``/``hi`` the 95% CI (None for exact sizes)."""

    model: str
    label: str
    kind: str  # "latency" | "size"
    base_name: str
    cand_name: str
    base: float
    cand: float
    ratio: float
    lo: float | None = None
    hi: float | None = None

    def reading(self) -> str:
        """The ratio in words. Latency: the change in latency and the speed factor
        (0.62 -> '38% less latency, 1.61x speed'); size: '74% smaller'."""
        if not math.isfinite(self.ratio) or self.ratio <= 0:
            return "-"
        change = abs(1.0 - self.ratio) * 100
        if self.kind == "latency":
            return f"{change:.0f}% {'less' if self.ratio <= 1 else 'more'} latency, {1.0 / self.ratio:.2f}x speed"
        return f"{change:.0f}% {'smaller' if self.ratio <= 1 else 'larger'}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "reading": self.reading()}


def latency_ratio(model: str, label: str, samples: Mapping[str, list[float]], base: str, cand: str,
                  block_size: int) -> Ratio:
    """p50 ratio of two contenders with a block-bootstrap CI (blocks = the interleaved rounds)."""
    b, c = np.asarray(samples[base]), np.asarray(samples[cand])
    ratio, lo, hi = bootstrap_ratio_ci(b, c, np.median, block_size=block_size)
    return Ratio(model, label, "latency", base, cand, float(np.median(b)), float(np.median(c)), ratio, lo, hi)


def size_ratio(model: str, label: str, base_name: str, cand_name: str, base_bytes: int, cand_bytes: int) -> Ratio:
    return Ratio(model, label, "size", base_name, cand_name, float(base_bytes), float(cand_bytes),
                 cand_bytes / base_bytes if base_bytes else float("nan"))


def fmt_value(value: float, kind: str) -> str:
    if kind == "size":
        return f"{value / 2**20:.2f} MiB"
    return f"{value:.3f} ms"


def fmt_ci(r: Ratio) -> str:
    return "exact" if r.lo is None or r.hi is None else f"[{r.lo:.3f}, {r.hi:.3f}]"


def to_markdown(rows: list[Ratio]) -> str:
    return "\n".join(table(["model", "comparison", "base", "candidate", "ratio", "95% CI", "reading"],
                           [[r.model, r.label, fmt_value(r.base, r.kind), fmt_value(r.cand, r.kind), f"{r.ratio:.3f}",
                             fmt_ci(r), r.reading()] for r in rows], align="llrrrll")) + "\n"


def render(rows: list[Ratio], console: Any, title: str) -> None:
    from rich.table import Table

    table = Table(title=title)
    for header, justify in (("model", "left"), ("comparison", "left"), ("base", "right"), ("candidate", "right"),
                            ("ratio", "right"), ("95% CI", "left"), ("reading", "left")):
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        table.add_row(r.model, r.label, fmt_value(r.base, r.kind), fmt_value(r.cand, r.kind), f"{r.ratio:.3f}",
                      fmt_ci(r), r.reading())
    console.print(table)
