"""Per-call latency sampling: warmup, then every call timed on its own.

Why per call: percentiles (what users wait for at p90/p99) only exist if each call is
timed alone; a loop timed as a whole (pytest-benchmark's calibrated iterations, asv's
``number``) yields a mean and hides the tail. Raw samples are returned, and kept in the
record, so any statistic can be recomputed later and the gate can test significance.

Two engines produce the same samples: the harness's own loop (``time_calls``) and
pytest-benchmark's ``pedantic`` with one call per round, used where a test owns the
``benchmark`` fixture so its tooling (``--benchmark-json``, its table) sees the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.core import UsageError

# the one timing loop lives in harness.perf.loop (standard library only, for timing children);
# re-exported here, where the perf suite's engines use it
from harness.perf.loop import LOOP as LOOP
from harness.perf.loop import SETTLE_CALLS as SETTLE_CALLS
from harness.perf.loop import Call, quiet_heap
from harness.perf.loop import time_calls as time_calls
from harness.perf.stats import summarize
from harness.settings.options import option

if TYPE_CHECKING:  # pragma: no cover
    from harness.runners.base import GraphRunner


@dataclass(frozen=True)
class PerfSettings:
    """How much to measure; every field is recorded next to the numbers it produced."""

    # defaults are the option table's (``--harness-perf-samples`` ...): declared there once
    samples: int = option("perf_samples").default
    warmup: int = option("perf_warmup").default
    batch_sizes: tuple[int, ...] = option("perf_batch_sizes").default
    seq_lens: tuple[int, ...] = option("perf_seq_lens").default
    repeats: int = option("perf_repeats").default  # fresh processes for cold start and memory (pyperf/asv style)
    new_tokens: int = option("perf_new_tokens").default  # generation: tokens per timed generation
    tail_seconds: int = option("perf_tail_seconds").default  # extra timing for a p99 interval (harness.perf.tail)
    time_budget: int = option("perf_time_budget").default  # seconds per latency case (harness.perf.stopping)

    def __post_init__(self) -> None:
        """Each field held to its option row's limits (the table declares them, not this class)."""
        for f in fields(self):
            row = option(f"perf_{f.name}")
            value = getattr(self, f.name)
            if row.parse([str(v) for v in value] if isinstance(value, tuple) else value, row.pytest_flag) is None:
                raise UsageError(f"{row.pytest_flag}: needs at least one value")

    @classmethod
    def from_options(cls, values: Mapping[str, Any]) -> "PerfSettings":
        """From parsed option values (``{"perf_samples": 50, ...}``): each field is the option
        ``perf_<field>``; options not given keep the table's defaults."""
        given: dict[str, Any] = {f.name: values[f"perf_{f.name}"] for f in fields(cls)
                                 if values.get(f"perf_{f.name}") is not None}
        typed: dict[str, Any] = {name: tuple(v) if isinstance(v, list) else v for name, v in given.items()}
        return cls(**typed)

    def as_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "warmup": self.warmup, "batch_sizes": list(self.batch_sizes),
                "seq_lens": list(self.seq_lens), "repeats": self.repeats, "new_tokens": self.new_tokens,
                "tail_seconds": self.tail_seconds, "time_budget": self.time_budget}


def parse_sizes(text: str | Sequence[str] | None, option: str) -> tuple[int, ...] | None:
    """``"1,8 32"`` -> (1, 8, 32); None when the option was not given."""
    if text is None:
        return None
    items = [text] if isinstance(text, str) else list(text)
    out: list[int] = []
    for item in items:
        for part in item.replace(",", " ").split():
            try:
                out.append(int(part))
            except ValueError:
                raise UsageError(f"{option}: {part!r} is not an integer") from None
    return tuple(dict.fromkeys(out))


# --------------------------------------------------------------------------- timing

class HarnessEngine:
    """The harness's own loop (:func:`time_calls`)."""

    name = "harness"

    def __init__(self, sync: Call | None = None) -> None:
        self.sync = sync

    def __call__(self, call: Call, rounds: int, warmup: int) -> list[float]:
        return time_calls(call, rounds, warmup, sync=self.sync)


class BenchmarkEngine:
    """pytest-benchmark's ``pedantic`` with ``iterations=1``: one call per round, so its
    per-round durations are per-call samples. The fixture allows one use per test."""

    name = "pytest-benchmark"

    def __init__(self, fixture: Any, sync: Call | None = None) -> None:
        self.fixture, self.sync, self.used = fixture, sync, False

    def __call__(self, call: Call, rounds: int, warmup: int) -> list[float]:
        if self.used:
            raise RuntimeError("the pytest-benchmark fixture can time one metric per test")
        self.used = True
        target = call if self.sync is None else (lambda: (call(), self.sync()))  # type: ignore[misc]
        with quiet_heap():  # the same heap and warm-up order as time_calls (LOOP)
            self.fixture.pedantic(target, rounds=rounds, iterations=1, warmup_rounds=max(warmup, SETTLE_CALLS))
        return [float(s) * 1000.0 for s in self.fixture.stats.stats.data]


def engine_for(benchmark_fixture: Any | None, sync: Call | None = None) -> HarnessEngine | BenchmarkEngine:
    """pytest-benchmark when its fixture is there and enabled, else the harness loop."""
    if benchmark_fixture is not None and not getattr(benchmark_fixture, "disabled", True):
        return BenchmarkEngine(benchmark_fixture, sync)
    return HarnessEngine(sync)


# --------------------------------------------------------------------------- what is timed


def timed_call(runner: "GraphRunner", feeds: Mapping[str, np.ndarray]) -> Call:
    """The callable one timed call executes: the runner's own ``timed_call``.

    The runner decides what a deployed call is (ONNX Runtime: ``session.run`` on feeds
    already cast to the session's input types, as onnxruntime_perf_test does; PyTorch:
    ``run()``, numpy in and out, synchronised on CUDA), so timing never asks which backend
    it has.
    """
    return runner.timed_call(feeds)


# --------------------------------------------------------------------------- records


def latency_key(*, graph: str | None = None, batch_size: int | None = None, seq_len: int | None = None,
                **tags: object) -> str:
    """``latency_ms`` or ``latency_ms[graph=decoder,bs=8,seq=64,...]``: every key starting with
    ``latency_ms`` is one latency metric with raw samples (what the gate compares)."""
    parts = [f"graph={graph}"] if graph else []
    if batch_size is not None:
        parts.append(f"bs={batch_size}")
    if seq_len is not None:
        parts.append(f"seq={seq_len}")
    parts += [f"{k}={v}" for k, v in tags.items()]
    return f"latency_ms[{','.join(parts)}]" if parts else "latency_ms"


def latency_entry(samples_ms: Sequence[float], *, warmup: int, engine: str, items_per_call: int = 1,
                  **context: object) -> dict[str, Any]:
    """One latency metric as recorded: raw samples, the summary, and what was timed.

    ``throughput`` is items (sequences, tokens) per second at the mean latency: the
    summary's calls/s times the items each call processes.
    """
    stats = summarize(samples_ms)
    summary = stats.as_dict()
    return {
        "samples": [round(float(s), 6) for s in samples_ms],
        "warmup": warmup,
        "summary": summary,
        "engine": engine,
        "loop": LOOP,
        "items_per_call": items_per_call,
        "throughput": stats.throughput_per_s * items_per_call,
        **context,
    }
