"""Which latency metrics a variant gets, and measuring them.

* ``latency_ms``: the model's entry graph at the first batch size x first sequence length
  that fits the model (the number baselines gate on; its shape is stored in the entry);
* ``latency_ms[bs=B,seq=S]``: every other configured bucket of the entry graph;
* ``latency_ms[graph=G]``: every other graph (decoder steps) on the family's own feeds
  for the first batch size.

The primary metric is timed by pytest-benchmark when the test holds its fixture, the rest
by the harness loop; each entry names its engine.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from harness.families.shaped_feeds import family_feeds, max_positions, shapeable, shaped_feeds
from harness.perf import contention
from harness.perf.canary import Canary, Interleaved
from harness.perf.measure import HarnessEngine, PerfSettings, latency_entry, latency_key, time_calls, timed_call
from harness.perf.stopping import StoppingRule, fixed_rounds, sample
from harness.perf.tail import DEFAULT_TAIL_TARGET, sample_for_tail

if TYPE_CHECKING:  # pragma: no cover
    from harness.families import Family, GraphSpec
    from harness.runners.base import GraphRunner
    from harness.zoo.loading import LoadedModel

Engine = Callable[[Callable[[], object], int, int], list[float]]


@dataclass(frozen=True)
class Point:
    """One latency metric to measure: a graph fed a fixed batch."""

    key: str
    graph: "GraphSpec"
    feeds: dict[str, np.ndarray]
    batch_size: int
    seq_len: int | None


def plan(model: "LoadedModel", family: "Family", texts: Sequence[str],
         settings: PerfSettings) -> tuple[list[Point], list[str]]:
    """The metrics to measure, and why any configured bucket was left out."""
    graphs = family.graphs(model)
    entry, others = graphs[0], graphs[1:]
    first_bs = settings.batch_sizes[0]
    points: list[Point] = []
    skipped: list[str] = []
    if shapeable(entry):
        limit = max_positions(model)
        for bs in settings.batch_sizes:
            for seq in settings.seq_lens:
                if limit is not None and seq > limit:
                    skipped.append(f"bs={bs},seq={seq}: longer than the model's {limit} positions")
                    continue
                key = latency_key(batch_size=bs, seq_len=seq) if points else "latency_ms"
                points.append(Point(key, entry, shaped_feeds(model, family, entry, texts, bs, seq), bs, seq))
        if not points:
            raise ValueError(f"{model.name}: no configured sequence length fits ({'; '.join(skipped)})")
    else:  # fed by something other than token ids: the family's own feeds
        points.append(Point("latency_ms", entry, family_feeds(model, family, entry, texts, first_bs), first_bs, None))
    for graph in others:
        feeds = family_feeds(model, family, graph, texts, first_bs)
        points.append(Point(latency_key(graph=graph.name), graph, feeds, first_bs, None))
    return points, skipped


def feeds_by_graph(points: Sequence[Point]) -> dict[str, dict[str, np.ndarray]]:
    """One batch per graph (the first planned): what a fresh-process child runs."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for p in points:
        out.setdefault(p.graph.name, p.feeds)
    return out


def measure(runners: dict[str, "GraphRunner"], points: Sequence[Point], settings: PerfSettings,
            first_engine: Engine | None = None, sync: Callable[[], object] | None = None,
            canary: Canary | None = None, tail_target: float = DEFAULT_TAIL_TARGET) -> dict[str, Any]:
    """Time every point; the first with ``first_engine`` (pytest-benchmark) if given.

    After ``settings.samples`` calls each point keeps timing, with the harness loop, until its
    p99 interval is narrower than ``tail_target`` or ``settings.tail_seconds`` are spent
    (harness.perf.tail); the entry's ``tail`` says which, and how wide the interval is.

    With ``canary`` (``harness.perf.canary``), a canary block is timed right before and right
    after each point, and the result holds its samples as ``canary_ms``: what the machine did
    while this record's numbers were taken, for an unpaired comparison (``harness.gate.canary``);
    where the harness's loop times a point, the canary is also interleaved with its calls
    (``harness.perf.canary.Interleaved``) and the entry keeps each segment's canary as ``canary``.
    """
    loop = HarnessEngine(sync)
    out: dict[str, Any] = {}
    started = time.perf_counter()
    for index, p in enumerate(points):
        engine = first_engine if (index == 0 and first_engine is not None) else loop
        if canary is not None:
            canary.block()
        # the case's time budget, shared out among the metrics still to time (harness.perf.stopping)
        left = settings.time_budget - (time.perf_counter() - started)
        budget = max(left, 0.0) / (len(points) - index) if settings.time_budget else None
        call = timed_call(runners[p.graph.name], p.feeds)
        interleaved = Interleaved(canary) if canary is not None and isinstance(engine, HarnessEngine) else None
        with contention.probe() as machine:  # counters read around the loops, none inside
            first, stop = _sample(engine, call, settings, budget, loop.sync, interleaved)
            # a metric the budget already cut gets no extra tail timing (its p99 stays advisory)
            samples, tail = sample_for_tail(first, functools.partial(loop, call, warmup=0), target=tail_target,
                                            budget_s=0 if stop["stopped"] == "budget" else settings.tail_seconds)
        if canary is not None:
            canary.block()
        name = getattr(engine, "name", "custom")
        if len(samples) > len(first) and name != loop.name:
            name = f"{name}+{loop.name}"  # the tail's extra calls come from the harness loop
        out[p.key] = latency_entry(samples, warmup=settings.warmup, engine=name,
                                   items_per_call=p.batch_size, graph=p.graph.name, batch_size=p.batch_size,
                                   seq_len=p.seq_len if p.seq_len is not None else _seq_of(p.feeds),
                                   tail=tail.as_dict(), stopping=stop,
                                   contention=machine.result.as_dict() if machine.result else None,
                                   **({"canary": segments} if interleaved is not None
                                      and (segments := interleaved.entry(samples)) is not None else {}))
    if canary is not None:
        out["canary_ms"] = canary.entry()
    return out


def _sample(engine: Engine, call: Callable[[], object], settings: PerfSettings, budget_s: float | None,
            sync: Callable[[], object] | None,
            interleaved: Interleaved | None = None) -> tuple[list[float], dict[str, Any]]:
    """One metric's samples under the stopping rule, and what stopped it (recorded as ``stopping``);
    with ``interleaved``, a canary block before every segment of the harness loop's calls."""
    rule = StoppingRule(settings.samples, settings.warmup, budget_s)

    def timed(n: int, warmup: int) -> list[float]:
        return time_calls(call, n, warmup, sync=sync)

    rounds = interleaved.rounds(timed) if interleaved is not None else timed
    if isinstance(engine, HarnessEngine):
        got = sample(rounds, rule)
        return got.samples, {**rule.as_dict(), "stopped": got.stopped, "elapsed_s": round(got.elapsed_s, 3)}
    n, _ = fixed_rounds(rounds, rule)  # an engine that runs once (pytest-benchmark): rounds chosen up front
    start = time.perf_counter()
    samples = engine(call, n, 0)
    return samples, {**rule.as_dict(), "stopped": "budget" if n < settings.samples else "samples",
                     "elapsed_s": round(time.perf_counter() - start, 3)}


def _seq_of(feeds: dict[str, np.ndarray]) -> int | None:
    ids = feeds.get("input_ids")
    return int(ids.shape[1]) if ids is not None and ids.ndim == 2 else None
