"""A fixed workload timed beside every latency metric: the machine's own speed, for the gate.

An unpaired comparison (a baseline recorded on another night) cannot tell a slower model from a
slower machine: on the shared 2-core box the same build's p50 moved -39 %, -21 % and -8 % between
runs, and with a neighbour process during the candidate an A/A comparison said REGRESSION twice
in three tries. The canary is the same code on every run and every machine the
harness ships to, timed right before and right after each latency metric, so a baseline and a
candidate carry a second pair of samples that differ only by what the machine did
(``harness.gate.canary`` judges them).

The workload is numpy element-wise arithmetic on 16 Ki float64 values (about 0.05-0.1 ms a call
here): single-threaded whatever BLAS or OpenMP settings say (no matrix multiply, so no thread
pool to oversubscribe), no allocation per call (preallocated ``out=`` buffers), deterministic
input. It bears on memory bandwidth and scalar throughput like small-batch inference does, but it
is not the model: its ratio says whether the machine moved, not by how much a model would.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

#: names the workload in records: a different workload never compares with this one
WORKLOAD = "numpy-elementwise-16k/1"
#: calls per canary block (one block before and one after each latency metric)
BLOCK_CALLS = 60
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
        """One block of ``calls`` timed calls, each alone."""
        clock, call = self.clock, self.call
        out = [0] * self.calls
        for i in range(self.calls):
            start = clock()
            call()
            out[i] = clock() - start
        self.samples += [ns / 1e6 for ns in out]
        self.blocks += 1

    def entry(self) -> dict[str, Any]:
        """What the record keeps: the raw samples (ms), the workload's name and the block count."""
        return {"workload": WORKLOAD, "samples": [round(s, 6) for s in self.samples], "blocks": self.blocks,
                "block_calls": self.calls}
