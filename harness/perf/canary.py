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
here under load 16 (14 runs of 20 segments of an ORT MLP, with the element-wise canary of the
time): the between-run spread of the p50 was 9.7 % (log sd), of the median per-segment ratio to
the canary 5.4 %.

The workload is a small float32 MLP in numpy (8 x 256 -> 512 -> 256, ReLU: two matrix
multiplies, about 0.1-0.2 ms a call here): single-threaded whatever BLAS or OpenMP settings say
(numpy's BLAS is held to one thread while a block is timed, :func:`one_blas_thread`), no
allocation per call (preallocated ``out=`` buffers), deterministic input. Why matrix multiplies:
the canary is only worth dividing by where the model's speed moves with it, and the models the
harness times spend their calls in matrix multiplies. Measured here (``scripts/bench_canary_match.py``,
an ONNX Runtime MLP on one thread, 16 fresh processes of 100 calls, six runs): the element-wise
canary this one replaced (``numpy-elementwise-16k/1``) left model / canary spread 8.7 % on average
(11-12 % in three runs), this one 5.6 % (the model alone 8.1 %); in the run where the machine
moved the model most (17.3 %) this one followed it at a slope of 1.21 and left 4.0 %
(docs/perf-gate.md). It is still not the model: its ratio says how the machine moved, not exactly
how far a given model did.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from functools import lru_cache
from typing import Any, Callable, Sequence

import numpy as np
from threadpoolctl import ThreadpoolController

from harness.perf.loop import time_calls

#: names the workload in records: a different workload never compares with this one
WORKLOAD = "numpy-mlp-f32-8x256x512x256/1"
#: calls per canary block (one block before and one after each latency metric)
BLOCK_CALLS = 60
#: a metric's calls per segment when the canary is interleaved, and the canary's calls before each:
#: short blocks, many of them (a segment's ratio to its canary is the unit the gate resamples)
SEGMENT_CALLS = 25
SEGMENT_CANARY_CALLS = 15
#: (rounds, warmup) -> per-call ms: one run of the timing loop (``harness.perf.loop.time_calls``)
Rounds = Callable[[int, int], list[float]]
#: the canary MLP's batch and layer widths
_BATCH, _WIDTHS = 8, (256, 512, 256)


def make_call() -> Callable[[], float]:
    """The canary call: two float32 matrix multiplies with a ReLU between, on preallocated buffers."""
    rng = np.random.default_rng(20261203)
    x = rng.standard_normal((_BATCH, _WIDTHS[0])).astype(np.float32)
    w1, w2 = ((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32) for a, b in zip(_WIDTHS, _WIDTHS[1:]))
    hidden = np.empty((_BATCH, _WIDTHS[1]), np.float32)
    out = np.empty((_BATCH, _WIDTHS[2]), np.float32)

    def call() -> float:
        np.matmul(x, w1, out=hidden)
        np.maximum(hidden, 0.0, out=hidden)
        np.matmul(hidden, w2, out=out)
        return float(out.sum())

    return call


@lru_cache(maxsize=1)
def _blas() -> ThreadpoolController:
    """The thread pools loaded so far, numpy's BLAS among them (it loads with numpy), found once."""
    return ThreadpoolController()


def one_blas_thread() -> AbstractContextManager[Any]:
    """numpy's BLAS held to one thread while a canary block is timed: the same work on a 2-core
    runner and a 64-core one, and no BLAS pool waking beside the runtime's own threads."""
    limiter: AbstractContextManager[Any] = _blas().limit(limits=1, user_api="blas")
    return limiter


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
        with one_blas_thread():
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
