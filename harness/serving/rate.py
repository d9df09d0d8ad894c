"""Request-rate load on a served model: perf_analyzer's ``--request-rate-range``, open loop.

The concurrency sweep (``harness.serving.sweep``) keeps N requests in flight, so a slow
server slows its own load down and never shows a queue. Clients of a real service do not
wait: requests arrive at a rate. Here each level offers ``rate`` requests per second, at
fixed intervals or as a Poisson process (exponential gaps, seeded: the same schedule every
run), whatever the server does with them:

* a dispatcher releases each request at its scheduled time to a pool of connections
  (``max_in_flight``); a request that finds every connection busy waits for one, and its
  latency is measured **from its scheduled time** -- the queue a saturated server builds is in
  the numbers (no coordinated omission), and ``late`` counts the requests that started late;
* a level runs until the p99 of its measured requests is stable (the cumulative p99 of the
  last ``stable_windows`` windows within ``stability`` of their mean, after ``min_requests``)
  or its budget ends; failed requests and timeouts are counted per level, never raised;
* the sweep stops after the first level that misses the p99 budget (as perf_analyzer's
  ``--latency-threshold``); the **sustainable rate** is the highest level whose p99 met the
  budget with no failed request and none left unsent (requests still queued for a connection
  a grace after the level ended -- the p99 budget, capped by the request timeout -- are the
  level's ``backlog``: the server fell behind the offered rate).

Each level becomes a latency metric of the perf schema (``latency_ms[rate=R]``, raw samples),
so the perf gate compares the latency at the same offered load against a baseline; the
sustainable rate is also recorded as ``serving_rate.ms_per_request`` (1000 / rate, lower is
better, as every gated number), the ``served_ms_per_request`` budget and gate.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np

from harness.perf.measure import latency_entry, latency_key
from harness.serving.client import OipClient, ServedModel, ServingError

ARRIVALS = ("constant", "poisson")


@dataclass(frozen=True)
class RateSettings:
    """How the rate sweep loads the server; every bound is here."""

    rates: tuple[float, ...]  # requests per second, one level each, in the order given
    arrival: str = "poisson"  # constant | poisson
    p99_budget_ms: float | None = None  # None: every level runs; no sustainable rate
    window_s: float = 1.0
    stability: float = 0.10  # the cumulative p99 of the last windows within +-10 % of their mean
    stable_windows: int = 3
    min_requests: int = 100  # a level's p99 is not called stable on fewer measured requests
    warmup_s: float = 0.5  # requests scheduled in a level's first half second are not measured
    step_budget_s: float = 15.0
    budget_s: float = 120.0
    max_in_flight: int = 32  # connections; more requests than this in flight wait (and count as late)
    seed: int = 0
    batch_size: int = 1
    seq_len: int = 32

    def __post_init__(self) -> None:
        if not self.rates or any(r <= 0 for r in self.rates):
            raise ValueError("request rates must be > 0 requests per second")
        if self.arrival not in ARRIVALS:
            raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}, got {self.arrival!r}")
        if self.p99_budget_ms is not None and self.p99_budget_ms <= 0:
            raise ValueError("the p99 budget must be > 0 ms")
        if self.window_s <= 0 or self.step_budget_s <= 0 or self.budget_s <= 0 or self.max_in_flight < 1:
            raise ValueError("windows, budgets and max_in_flight must be > 0")

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rates"] = list(self.rates)
        return out

    def schedule(self, rate: float, horizon_s: float, level: int) -> np.ndarray:
        """Send offsets (seconds from the level's start) up to ``horizon_s``."""
        count = int(rate * horizon_s * 1.5) + 16
        if self.arrival == "constant":
            offsets = np.arange(count) / rate
        else:
            gaps = np.random.default_rng((self.seed, level)).exponential(1.0 / rate, count)
            offsets = np.cumsum(gaps) - gaps[0]
        return offsets[offsets < horizon_s]


@dataclass
class _Sent:
    scheduled: float  # perf_counter the request was due
    started: float
    ended: float
    error: str = ""


@dataclass
class RateLevel:
    """One offered rate as measured."""

    rate: float
    sent: int = 0  # measured requests (after the warm-up)
    errors: int = 0  # failed requests, timeouts included
    timeouts: int = 0
    late: int = 0  # started more than 1 ms after their scheduled time (every connection was busy)
    backlog: int = 0  # due when the level ended but never sent: a level with any cannot be sustained
    error_examples: list[str] = field(default_factory=list)
    samples_ms: list[float] = field(default_factory=list)  # scheduled time -> answer, successful requests
    windows: int = 0
    stable: bool = False
    seconds: float = 0.0
    achieved: float = 0.0  # successful answers per second over the measured time
    stopped: str = ""

    def p99(self) -> float | None:
        return float(np.percentile(self.samples_ms, 99)) if self.samples_ms else None

    def meets(self, budget_ms: float) -> bool:
        """p99 within the budget, every request answered, none left unsent: the server kept up."""
        p99 = self.p99()
        return p99 is not None and p99 <= budget_ms and self.errors == 0 and self.backlog == 0

    def summary(self, budget_ms: float | None) -> dict[str, Any]:
        arr = np.asarray(self.samples_ms, dtype=float)
        pct = {f"p{p}": (float(np.percentile(arr, p)) if arr.size else None) for p in (50, 90, 99)}
        return {"rate": self.rate, "sent": self.sent, "errors": self.errors, "timeouts": self.timeouts,
                "late": self.late, "backlog": self.backlog, "error_examples": self.error_examples, "windows": self.windows,
                "stable": self.stable, "seconds": round(self.seconds, 3), "achieved": self.achieved, **pct,
                "meets_budget": None if budget_ms is None else self.meets(budget_ms),
                "stopped": self.stopped or None}


def _is_timeout(message: str) -> bool:
    text = message.lower()
    return "timed out" in text or "timeout" in text or "deadline exceeded" in text


class _Connection(threading.Thread):
    """One connection of the pool: takes due requests off the queue until told to stop."""

    def __init__(self, client: OipClient, model: ServedModel, feeds: Mapping[str, np.ndarray],
                 due: queue.Queue[float | None], out: list[_Sent], lock: threading.Lock) -> None:
        super().__init__(daemon=True)
        self.client, self.model, self.feeds, self.due, self.out, self.lock = client, model, feeds, due, out, lock

    def run(self) -> None:
        own: OipClient | None = None
        failure = ""
        try:
            own = self.client.clone()  # opened in this thread: HTTP connections belong to their thread
        except Exception as exc:  # noqa: BLE001 - every request this connection would have sent fails
            failure = f"connect: {exc}"[:240]
        try:
            while (scheduled := self.due.get()) is not None:
                started = time.perf_counter()
                error = failure
                if own is not None:
                    try:
                        own.infer(self.model, self.feeds)
                    except ServingError as exc:
                        error = str(exc)
                    except Exception as exc:  # noqa: BLE001 - the transport's own failure modes: counted
                        error = f"{type(exc).__name__}: {exc}"[:240]
                with self.lock:
                    self.out.append(_Sent(scheduled, started, time.perf_counter(), error))
        finally:
            if own is not None:
                own.close()


def _cumulative_p99_stable(history: list[float], settings: RateSettings) -> bool:
    if len(history) < settings.stable_windows:
        return False
    last = np.asarray(history[-settings.stable_windows:], dtype=float)
    return bool(np.all(np.abs(last - last.mean()) <= settings.stability * max(float(last.mean()), 1e-9)))


def _settle(due: queue.Queue[float | None], grace: float) -> None:
    """Give the connections ``grace`` seconds to take the requests already released (a level
    that ends with requests just due is not behind; one still queued after the grace is)."""
    end = time.perf_counter() + grace
    while not due.empty() and time.perf_counter() < end:
        time.sleep(0.005)


def run_level(client: OipClient, model: ServedModel, feeds: Mapping[str, np.ndarray], rate: float, index: int,
              settings: RateSettings, deadline: float) -> RateLevel:
    """One offered rate: requests released on schedule, windows until the p99 is stable, the
    level's budget or the sweep's deadline; then every request in flight is waited for."""
    level = RateLevel(rate)
    began = time.perf_counter()
    horizon = min(settings.step_budget_s, max(0.0, deadline - began))
    offsets = settings.schedule(rate, horizon, index)
    due: queue.Queue[float | None] = queue.Queue()
    done: list[_Sent] = []
    lock = threading.Lock()
    pool = [_Connection(client, model, feeds, due, done, lock)
            for _ in range(min(settings.max_in_flight, max(1, len(offsets))))]
    for c in pool:
        c.start()
    measured_from = began + settings.warmup_s
    history: list[float] = []
    next_window = measured_from + settings.window_s
    released = 0
    try:
        while released < len(offsets):
            now = time.perf_counter()
            at = began + float(offsets[released])
            if at <= now:
                due.put(at)
                released += 1
                continue
            if now >= next_window:
                next_window += settings.window_s
                level.windows += 1
                with lock:
                    ok = [(s.ended - s.scheduled) * 1000 for s in done if s.scheduled >= measured_from and not s.error]
                    failed = [s for s in done if s.scheduled >= measured_from and s.error]
                if failed and not ok and level.windows >= 2:
                    level.stopped = f"every request of the level failed: {failed[-1].error}"
                    break
                if len(ok) >= settings.min_requests:
                    history.append(float(np.percentile(ok, 99)))
                    if _cumulative_p99_stable(history, settings):
                        level.stable = True
                        break
            time.sleep(min(at - now, max(0.0, next_window - now), 0.01))
        measured_to = time.perf_counter()
        _settle(due, grace=min(client.endpoint.timeout_s, settings.p99_budget_ms / 1000 if settings.p99_budget_ms
                               else settings.window_s))
    finally:
        while True:  # requests due but never sent within the grace: the server fell that far behind
            try:
                if due.get_nowait() is not None:
                    level.backlog += 1
            except queue.Empty:
                break
        for _ in pool:
            due.put(None)
        for c in pool:
            c.join(timeout=client.endpoint.timeout_s + 5)
    with lock:
        measured = [s for s in done if measured_from <= s.scheduled <= measured_to]
    level.sent = len(measured)
    level.samples_ms = [(s.ended - s.scheduled) * 1000 for s in measured if not s.error]
    level.late = sum(1 for s in measured if s.started - s.scheduled > 0.001)
    failures = [s.error for s in measured if s.error]
    level.errors = len(failures)
    level.timeouts = sum(1 for e in failures if _is_timeout(e))
    level.error_examples = list(dict.fromkeys(failures))[:3]
    level.seconds = max(measured_to - measured_from, 1e-9)
    level.achieved = len(level.samples_ms) / level.seconds
    return level


def rate_sweep(client: OipClient, model: ServedModel, feeds: Mapping[str, np.ndarray],
               settings: RateSettings) -> list[RateLevel]:
    """Every level in order; stops after the first that misses the p99 budget or when the
    server stops answering, or when the sweep's budget ends."""
    deadline = time.perf_counter() + settings.budget_s
    levels: list[RateLevel] = []
    for index, rate in enumerate(settings.rates):
        if time.perf_counter() >= deadline:
            break
        level = run_level(client, model, feeds, rate, index, settings, deadline)
        levels.append(level)
        if level.stopped:
            break
        if settings.p99_budget_ms is not None and not level.meets(settings.p99_budget_ms):
            break
    return levels


def sustainable(levels: list[RateLevel], settings: RateSettings) -> float | None:
    """The highest offered rate that met the p99 budget (None without a budget or when none did)."""
    if settings.p99_budget_ms is None:
        return None
    budget = settings.p99_budget_ms
    met = [lv.rate for lv in levels if lv.meets(budget)]
    return max(met) if met else None


def rate_fields(levels: list[RateLevel], settings: RateSettings, protocol: str) -> dict[str, Any]:
    """The levels in the perf schema: ``latency_ms[rate=R]`` per level, and ``serving_rate``."""
    perf: dict[str, Any] = {}
    for level in levels:
        if not level.samples_ms:
            continue
        key = latency_key(rate=_rate_text(level.rate), arrival=settings.arrival)
        perf[key] = latency_entry(level.samples_ms, warmup=0, engine=f"oip-{protocol}",
                                  items_per_call=settings.batch_size, batch_size=settings.batch_size,
                                  seq_len=settings.seq_len, offered_rate=level.rate, achieved=level.achieved,
                                  errors=level.errors, timeouts=level.timeouts, late=level.late,
                                  stable=level.stable)
    best = sustainable(levels, settings)
    perf["serving_rate"] = {
        "arrival": settings.arrival, "p99_budget_ms": settings.p99_budget_ms,
        "levels": [lv.summary(settings.p99_budget_ms) for lv in levels],
        "sustainable_rate": best,
        "ms_per_request": (1000.0 / best) if best else None,
        "errors": sum(lv.errors for lv in levels), "timeouts": sum(lv.timeouts for lv in levels),
        "stopped": next((lv.stopped for lv in levels if lv.stopped), None),
        "settings": settings.as_dict()}
    return perf


def _rate_text(rate: float) -> str:
    return f"{rate:g}"
