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
the unpaired gate (``gate.judge.decide``: significant, and the whole interval beyond the
metric's ``min_effect``), so only the noise handling differs, not the bar.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harness.gate.compare import merge_policies
from harness.gate.evidence import Evidence, EvidenceKind
from harness.gate.judge import judge
from harness.gate.policy import MIN_PAIRS as MIN_PAIRS  # re-exported: callers size their pairs by it
from harness.gate.row import Row, Verdict
from harness.metrics.spec import MetricPolicy
from harness.perf.loop import time_calls

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


def judge_paired(samples: PairedSamples, stats: Sequence[str] = DEFAULT_STATS,
                 policies: Mapping[str, MetricPolicy] | None = None, *, seed: int = 0,
                 resamples: int = 4000, variant: str = "", metric: str = "") -> list[Row]:
    """A verdict per statistic from paired blocks: the one judge on ``PAIRED`` evidence
    (``harness.gate.judge``; the module docstring says why pairs)."""
    evidence = Evidence(EvidenceKind.PAIRED, variant, metric, tuple(stats), samples.a, samples.b,
                        groups=samples.groups, seed=seed, resamples=resamples)
    return judge(evidence, merge_policies(policies))


def exit_code(rows: Sequence[Row]) -> int:
    """1 when a gated (non-advisory) statistic is a REGRESSION, else 0."""
    return 1 if any(r.verdict is Verdict.REGRESSION and not r.advisory for r in rows) else 0
