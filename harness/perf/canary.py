"""A fixed workload timed beside every latency metric: the machine's own speed, for the gate.

An unpaired comparison (a baseline recorded on another night) cannot tell a slower model from a
slower machine: on the shared 2-core box the same build's p50 moved -39 %, -21 % and -8 % between
runs, and with a neighbour process during the candidate an A/A comparison said REGRESSION twice
in three tries. The canary is the same code on every run and every machine the
harness ships to, timed right before and right after each latency metric, so a baseline and a
candidate carry a second pair of samples that differ only by what the machine did
(``harness.gate.canary`` judges them).

Where the metric is timed by the harness's loop, the canary is also *interleaved* with its calls
(:class:`Interleaved`): a short canary block before every segment of ``SEGMENT_CALLS`` calls, its
median stored with the latency entry (``canary``), so the gate can divide each segment by what the
machine did in that moment (``harness.gate.judge``: canary-adjusted two-run evidence). Measured
here under load 16 (14 runs of 20 segments of an ORT MLP): the between-run spread of the p50 was
9.7 % (log sd), of the median per-segment ratio to the canary 5.4 %.

The workload is numpy element-wise arithmetic on 16 Ki float64 values (about 0.05-0.1 ms a call
here): single-threaded whatever BLAS or OpenMP settings say (no matrix multiply, so no thread
pool to oversubscribe), no allocation per call (preallocated ``out=`` buffers), deterministic
input. It bears on memory bandwidth and scalar throughput like small-batch inference does, but it
is not the model: its ratio says whether the machine moved, not by how much a model would.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np

from harness.perf.loop import time_calls

#: names the workload in records: a different workload never compares with this one
WORKLOAD = "numpy-elementwise-16k/1"
#: calls per canary block (one block before and one after each latency metric)
BLOCK_CALLS = 60
#: a metric's calls per segment when the canary is interleaved, and the canary's calls before each:
#: short blocks, many of them (a segment's ratio to its canary is the unit the gate resamples)
SEGMENT_CALLS = 25
SEGMENT_CANARY_CALLS = 15
#: (rounds, warmup) -> per-call ms: one run of the timing loop (``harness.perf.loop.time_calls``)
Rounds = Callable[[int, int], list[float]]
_SIZE = 16 * 1024


def make_call() -> Callable[[], float]:
    """The canary call: a fixed chain of element-wise ops on preallocated buffers."""
    x = np.linspace(0.0, 8.0, _SIZE)
    y = np.empty_like(x)
    z = np.empty_like(x)

    def call() -> float:
        np.sin(x, out=y)
        np.multiply(y, x, out=z)
        np.exp(np.negative(y, out=y), out=y)
        np.add(y, z, out=z)
        return float(z.sum())

    return call


class Canary:
    """Times canary blocks and keeps their samples for one record (``perf.canary_ms``)."""

    def __init__(self, calls: int = BLOCK_CALLS, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.calls = calls
        self.clock = clock
        self.call = make_call()
        self.samples: list[float] = []
        self.blocks = 0
        for _ in range(5):  # page in the buffers, warm the ufunc loops
            self.call()

    def block(self) -> None:
        """One block of ``calls`` timed calls, each alone, kept for the record's ``canary_ms``."""
        self.samples += self.timed(self.calls)
        self.blocks += 1

    def timed(self, calls: int) -> list[float]:
        """``calls`` canary calls, each timed alone (ms) by the harness's one timing loop (its
        settling calls undo what the model's calls did to the caches)."""
        return time_calls(self.call, calls, clock=self.clock)

    def entry(self) -> dict[str, Any]:
        """What the record keeps: the raw samples (ms), the workload's name and the block count."""
        return {"workload": WORKLOAD, "samples": [round(s, 6) for s in self.samples], "blocks": self.blocks,
                "block_calls": self.calls}


class Interleaved:
    """A metric's timed rounds cut into segments of ``segment`` calls, a canary block of ``calls``
    calls timed right before each; :meth:`entry` says, for the samples finally kept, each segment's
    end and its canary's median (``harness.gate.evidence.CanaryBlocks``)."""

    def __init__(self, canary: Canary, segment: int = SEGMENT_CALLS, calls: int = SEGMENT_CANARY_CALLS) -> None:
        if segment < 1 or calls < 1:
            raise ValueError("segment and canary calls must be >= 1")
        self.canary, self.segment, self.calls = canary, segment, calls
        #: every rounds call: its samples and its segments (canary median, length)
        self.taken: list[tuple[list[float], list[tuple[float, int]]]] = []

    def rounds(self, timed: Rounds) -> Rounds:
        """``timed`` with a canary block before every ``segment`` of its calls (the warmup once, first)."""
        def run(n: int, warmup: int) -> list[float]:
            out: list[float] = []
            segments: list[tuple[float, int]] = []
            while len(out) < n:
                size = min(self.segment, n - len(out))
                median = float(np.median(self.canary.timed(self.calls)))
                out += timed(size, warmup if not out else 0)
                segments.append((median, size))
            self.taken.append((out, segments))
            return out

        return run

    def entry(self, samples: Sequence[float]) -> dict[str, Any] | None:
        """The latency entry's ``canary``: the segments of the rounds whose samples open ``samples``
        (a stopping rule discards its calibration round; a tail sampler appends calls of its own,
        past the last segment), or None when no rounds' samples do."""
        kept = list(samples)
        for first in range(len(self.taken)):
            joined = [s for out, _ in self.taken[first:] for s in out]
            if joined and kept[:len(joined)] == joined:
                segments = [seg for _, segs in self.taken[first:] for seg in segs]
                ends = np.cumsum([size for _, size in segments]).tolist()
                return {"workload": WORKLOAD, "block_calls": self.calls,
                        "block_medians": [round(m, 6) for m, _ in segments], "segment_ends": ends}
        return None
