"""The one timing loop: every latency the harness reports comes from :func:`time_calls`.

The perf suite (``harness.perf.latency``), paired re-timing and ``perf-compare``
(``harness.gate.paired``), the timing children of environment pairs (``harness/perf/envchild.py``)
and the headline and tail sampling all call it -- and the served sweep's workers
(``harness.serving.sweep``) time their requests with its transport-neutral core,
:func:`time_until`, so a number from one is comparable with a number
from another and the loop's measured fidelity (docs/performance.md: harness percentiles within
0.97-1.03 of a bare loop's) holds for all of them. Its version (:data:`LOOP`) is stored with every
latency entry.

Standard library only, deliberately: a timing child runs this file's package from another
environment's interpreter (one that has numpy and a runtime, nothing of the harness's
dependencies), and importing it must not cost a cold start anything.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from typing import Callable, Iterator

Call = Callable[[], object]
Clock = Callable[[], int]


#: Untimed calls after the heap is frozen, before the first timed call, whatever the configured
#: warm-up. Why: whatever ran before the loop (the harness's bookkeeping, pytest, another
#: metric's setup) left the runtime's working set partly out of the CPU caches. Measured on
#: encoder-custom (ORT, 1 thread, 40 blocks of 100 calls) after a full ``gc.collect()`` -- the
#: worst case, which walks 200-500k objects: the first call was 1.52x the median of the rest, the
#: second 1.16x, the third 1.05x, the fourth and fifth within 1.01x -- 1-2 calls per 100 land
#: exactly at p99, which is how version 1 of the loop (collect, then time) read +40 % at p99.
SETTLE_CALLS = 5

#: What the timing loop does, stored with every latency entry (``loop``), so numbers stay
#: comparable across harness versions. Version 2 collected the heap (``gc.collect()``, 0.1-0.25 s
#: and a cold cache per loop) before freezing it; version 3 freezes without collecting. A record
#: without ``loop`` was timed by version 1 (warm-up, then a full collection, then
#: timing -- its p99 carries the collection's cache misses).
LOOP = {
    "version": 3,
    "gc": "frozen (not collected) before warm-up; enabled while timing (young objects only)",
    "settle_calls": SETTLE_CALLS,
    "clock": "perf_counter_ns around each call",
    "outputs": "allocated by the runtime per call, as in a deployment (no I/O binding)",
}


@contextmanager
def quiet_heap() -> Iterator[None]:
    """Freeze the heap for the duration of a timed loop: collections during timing walk only
    the objects made since.

    After ``gc.freeze()`` an automatic collection during timing walks only objects created
    since (a few per call), not the harness's heap, so a generation-2 pass can no longer land
    in the tail; GC stays enabled, as in a deployed process, so a call that leaks cycles is
    still collected. Unfrozen afterwards so the harness's own garbage is collected again.

    Why no ``gc.collect()`` first (loop version 2 had one): freezing is a constant-time splice
    of the collector's lists, while a full collection walks the harness's whole heap (200-500k
    objects: 0.1-0.25 s per timed loop, paid again by every tail-sampling chunk) and leaves the
    runtime's working set out of the caches for the first calls. Garbage that exists when the
    loop starts is simply kept until it ends. pyperf and pytest-benchmark's
    ``--benchmark-disable-gc`` make the same trade differently (they turn the collector off).
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def time_calls(call: Call, rounds: int, warmup: int = 0, *, sync: Call | None = None,
               clock: Clock = time.perf_counter_ns) -> list[float]:
    """``rounds`` latencies in ms, each call timed alone after ``warmup`` untimed calls.

    ``sync`` runs inside the timed region after each call (a device synchronise), so
    asynchronous backends are timed to completion. The clock is read as integer
    nanoseconds (no float rounding); the loop does nothing else between the reads.
    The heap is frozen *before* the untimed calls (at least :data:`SETTLE_CALLS`), so the
    caches are warm when timing starts and no collection of the harness's heap lands in it
    (see :data:`LOOP`).
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    out = [0] * rounds
    with quiet_heap():
        for _ in range(max(warmup, SETTLE_CALLS)):
            call()
            if sync is not None:
                sync()
        if sync is None:
            for i in range(rounds):
                start = clock()
                call()
                out[i] = clock() - start
        else:
            for i in range(rounds):
                start = clock()
                call()
                sync()
                out[i] = clock() - start
    return [ns / 1e6 for ns in out]


#: what :func:`time_until` reports per call: (the call's ns, or None when it raised; the exception;
#: the clock when it returned)
Timed = Callable[[int | None, BaseException | None, int], None]


def time_until(call: Call, stop: Callable[[], bool], record: Timed, *,
               clock: Clock = time.perf_counter_ns) -> None:
    """Calls back to back, each timed alone by the same clock as :func:`time_calls`, until ``stop()``
    says so; every call, answered or failed, is handed to ``record``. The closed loop of one served
    worker (one request in flight): the transport is the caller's ``call``, and a failure is a
    sample of the load (``record`` gets the exception), never raised. No heap freezing here: the
    workers are threads of one process, and the collector is process-wide."""
    while not stop():
        start = clock()
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - a failed call is reported, the loop goes on
            record(None, exc, clock())
            continue
        end = clock()
        record(end - start, None, end)
