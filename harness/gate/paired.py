"""Paired, interleaved A/B: time the baseline and the candidate in alternating blocks.

A baseline recorded on another night carries that night's noise: with a baseline recorded
while the machine was busy, the unpaired gate (``gate.compare``) said INCONCLUSIVE to a real
+30% slowdown 3 times out of 3. Timing both builds in the same session, in
alternating blocks (A B, then B A, order drawn per pair), makes machine drift hit both
sides of every pair alike; the comparison is then on *per-pair ratios*, where the drift
cancels -- the standard way to compare two builds on shared hardware (what ``perf stat
--repeat`` users, Chromium's pinpoint and Go's benchstat with interleaving do).

Statistics per latency statistic (p50, p90, ...): the statistic of each block, the ratio
candidate/baseline per pair, a Wilcoxon signed-rank test on the log ratios and a
bootstrap (resampling pairs) interval of their median. The verdict uses the *same rule* as
the unpaired gate (``gate.compare.decide``: significant, and the whole interval beyond the
metric's ``min_effect``), so only the noise handling differs, not the bar.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harness.gate.compare import Verdict, decide, latency_stat, merge_policies
from harness.metrics.spec import MetricPolicy
from harness.perf.loop import time_calls

#: fewer pairs than this cannot reach significance with the signed-rank test at alpha 0.01
MIN_PAIRS = 8
#: statistics judged by default (the gated latency ones; p99 needs blocks of >= 1000 calls)
DEFAULT_STATS = ("p50", "p90")


@dataclass(frozen=True)
class PairedSamples:
    """Per-call latencies (ms), shape (pairs, block) for each side; ``first`` says which side ran
    first in each pair (``"A"``/``"B"``). ``groups``, when given, says which *process pair* timed
    each pair (``harness.gate.envpair``): the pairs of one group share whatever their two
    processes brought (memory layout, cache aliasing, thread placement), so the verdict is over
    groups, not pairs (:func:`judge_paired`)."""

    a: np.ndarray
    b: np.ndarray
    first: tuple[str, ...]
    groups: tuple[int, ...] = ()

    def __add__(self, other: "PairedSamples") -> "PairedSamples":
        """Both sets of pairs, in order; the other's groups numbered after this one's."""
        if bool(self.groups) != bool(other.groups):
            raise ValueError("cannot join samples judged per process pair with samples judged per block pair")
        offset = (max(self.groups) + 1) if self.groups else 0
        groups = self.groups + tuple(g + offset for g in other.groups)
        return PairedSamples(np.vstack([self.a, other.a]), np.vstack([self.b, other.b]), self.first + other.first,
                             groups)


def interleave(call_a: Callable[[], Any], call_b: Callable[[], Any], *, pairs: int = 30, block: int = 50,
               warmup: int = 20, seed: int = 0, clock: Callable[[], int] = time.perf_counter_ns) -> PairedSamples:
    """Time ``pairs`` pairs of blocks of ``block`` calls each, A and B in an order drawn per pair
    (so neither side always runs first, after the other's caches).

    Each block is one run of the harness's timing loop (``harness.perf.loop.time_calls``: heap
    frozen, a few settling calls, then each call timed alone), the loop the perf suite records
    with, so a paired number and a recorded one are measured alike; its settling calls also undo
    what the other side's block did to the caches, for both sides."""
    if pairs < 1 or block < 1:
        raise ValueError("pairs and block must be >= 1")
    rng = np.random.default_rng(seed)
    for _ in range(warmup):
        call_a()
        call_b()
    a = np.empty((pairs, block))
    b = np.empty((pairs, block))
    first: list[str] = []
    for i in range(pairs):
        if rng.random() < 0.5:
            a[i], b[i] = time_calls(call_a, block, clock=clock), time_calls(call_b, block, clock=clock)
            first.append("A")
        else:
            b[i], a[i] = time_calls(call_b, block, clock=clock), time_calls(call_a, block, clock=clock)
            first.append("B")
    return PairedSamples(a, b, tuple(first))


@dataclass(frozen=True)
class PairedRow:
    """One statistic's paired verdict (``ratio``: median of per-pair candidate/baseline ratios)."""

    stat: str
    base: float
    cand: float
    ratio: float
    ci_lo: float
    ci_hi: float
    p_value: float
    pairs: int
    verdict: Verdict
    reason: str
    advisory: bool

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdict"] = self.verdict.value
        return out


def _block_stat(samples: np.ndarray, stat: Any) -> np.ndarray:
    if callable(stat):
        return np.asarray([stat(row) for row in samples], dtype=float)
    return np.asarray(np.percentile(samples, stat, axis=1), dtype=float)


def judge_paired(samples: PairedSamples, stats: Sequence[str] = DEFAULT_STATS,
                 policies: Mapping[str, MetricPolicy] | None = None, *, seed: int = 0,
                 resamples: int = 4000) -> list[PairedRow]:
    """A verdict per statistic from paired blocks (see the module docstring)."""
    from scipy.stats import wilcoxon

    pols = merge_policies(policies)
    rng = np.random.default_rng(seed)
    rows = []
    for name in stats:
        stat = latency_stat(name)
        if stat is None or name not in pols:
            raise ValueError(f"unknown latency statistic {name!r}; use pNN or mean")
        pol = pols[name]
        base, cand = _block_stat(samples.a, stat), _block_stat(samples.b, stat)
        n = len(base)
        ok = (base > 0) & (cand > 0)
        logs, unit = _units(np.log(cand[ok] / base[ok]), np.asarray(samples.groups)[ok] if samples.groups else None)
        overall_b, overall_c = float(np.median(base)), float(np.median(cand))
        if logs.size < MIN_PAIRS:
            rows.append(PairedRow(name, overall_b, overall_c, float(math.exp(np.median(logs))) if logs.size else
                                  math.nan, math.nan, math.nan, math.nan, n, Verdict.INCONCLUSIVE,
                                  f"too few {unit}: {logs.size} < {MIN_PAIRS}", pol.advisory))
            continue
        ratio = float(math.exp(np.median(logs)))
        boot = np.median(logs[rng.integers(0, logs.size, size=(resamples, logs.size))], axis=1)
        lo, hi = (float(math.exp(q)) for q in np.quantile(boot, [pol.alpha / 2, 1 - pol.alpha / 2]))
        p_value = 1.0 if np.all(logs == 0) else float(wilcoxon(logs).pvalue)
        verdict, reason = decide(ratio, lo, hi, p_value, pol)
        counted = f"{n} pairs" if unit == "pairs" else f"{n} pairs in {logs.size} {unit}"
        rows.append(PairedRow(name, overall_b, overall_c, ratio, lo, hi, p_value, n, verdict,
                              f"paired, {counted}: {reason}", pol.advisory))
    return rows


def _units(logs: np.ndarray, groups: np.ndarray | None) -> tuple[np.ndarray, str]:
    """The log ratios the verdict is over, and what one is: a pair's, or -- when the pairs come in
    groups (process pairs) -- the median of a group's pairs, so that a bias the two processes of
    one group share counts once, as noise between groups, not once per pair as a difference."""
    if groups is None:
        return logs, "pairs"
    return np.asarray([np.median(logs[groups == g]) for g in np.unique(groups)]), "process pairs"


def exit_code(rows: Sequence[PairedRow]) -> int:
    """1 when a gated (non-advisory) statistic is a REGRESSION, else 0."""
    return 1 if any(r.verdict is Verdict.REGRESSION and not r.advisory for r in rows) else 0
