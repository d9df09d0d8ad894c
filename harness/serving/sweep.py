"""Latency and throughput of a served model under load, perf_analyzer-style.

For each concurrency level (default 1, 2, 4, 8, 16) that many workers -- each its own
connection -- keep one request in flight each, back to back. The step is measured in windows
(``window_s``); it ends when the last ``stable_windows`` windows agree (p50 latency and
throughput within ``stability`` of their mean: perf_analyzer's rule) or when its time budget
runs out, and the whole sweep has a budget too. Everything is bounded in time and count, and
targets only loopback or a host the configuration names (``Endpoint.load_allowed``).

Each step becomes one latency metric of the perf schema (``latency_ms`` for the first level,
``latency_ms[concurrency=N]`` for the others): raw samples of the measured windows, the
summary, and beside them the throughput measured over the windows' wall time, the failed
requests, whether the step was stable, and the server's own timings from the statistics
endpoint where the server has one (Triton; queue / compute per request). Baselines, the perf
gate, history and the HTML report read these records like any other perf record. A failed
request is counted, never raised; a server that stops answering ends the sweep, keeping the
steps already measured, and the record's verdict is then ``error`` (two windows in a row
in which every request failed: one such window can be a burst of slow requests).
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from harness.core import describe_error
from harness.families.shaped_feeds import shaped_feeds
from harness.perf import budgets
from harness.perf.loop import time_until
from harness.perf.measure import latency_entry, latency_key
from harness.results.outcome import Decision, decide
from harness.results.sections import Served
from harness.serving.client import OipClient, ServedModel, ServingError
from harness.serving.rate import RateSettings, rate_fields, rate_sweep
from harness.serving.source import EndpointRunner

if TYPE_CHECKING:  # pragma: no cover
    from harness.case.collector import Case
    from harness.check.judge import CheckOutcome
    from harness.engine import JobRun
    from harness.results.outcome import CaseResult
    from harness.serving.source import EndpointGraphs, EndpointRunner


@dataclass(frozen=True)
class SweepSettings:
    """How the sweep loads the server; every bound is here."""

    concurrency: tuple[int, ...] = (1, 2, 4, 8, 16)
    window_s: float = 1.0
    stability: float = 0.10  # p50 and throughput of the last windows within +-10 % of their mean
    stable_windows: int = 3
    step_budget_s: float = 15.0  # a step that never stabilises ends here (marked unstable)
    budget_s: float = 120.0  # the whole sweep
    max_requests: int = 20000  # per step, whatever the time
    warmup: int = 2  # requests per worker before the first window
    batch_size: int = 1  # rows per request (perf_analyzer's default: 1)
    seq_len: int = 32
    #: offered request rates instead of concurrency levels (``--request-rate``: harness.serving.rate)
    rate: RateSettings | None = None

    def __post_init__(self) -> None:
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise ValueError("concurrency levels must be >= 1")
        if self.window_s <= 0 or self.step_budget_s <= 0 or self.budget_s <= 0:
            raise ValueError("windows and budgets must be > 0 seconds")

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["concurrency"] = list(self.concurrency)
        out["rate"] = self.rate.as_dict() if self.rate is not None else None
        return out


@dataclass
class Sample:
    end: float  # perf_counter when the answer came back
    ms: float | None  # None: the request failed
    error: str = ""


@dataclass
class StepResult:
    concurrency: int
    samples_ms: list[float] = field(default_factory=list)
    requests: int = 0
    errors: int = 0
    error_examples: list[str] = field(default_factory=list)
    windows: int = 0
    stable: bool = False
    seconds: float = 0.0
    throughput: float = 0.0  # rows per second over the measured windows
    server: dict[str, Any] | None = None
    stopped: str = ""  # why the step (and the sweep) ended early: the server stopped answering

    def summary(self) -> dict[str, Any]:
        arr = np.asarray(self.samples_ms, dtype=float)
        pct = {f"p{p}": (float(np.percentile(arr, p)) if arr.size else None) for p in (50, 90, 99)}
        return {"concurrency": self.concurrency, "requests": self.requests, "errors": self.errors,
                "error_examples": self.error_examples, "windows": self.windows, "stable": self.stable,
                "seconds": round(self.seconds, 3), "throughput": self.throughput, **pct, "server": self.server,
                "stopped": self.stopped or None}


class _Worker(threading.Thread):
    def __init__(self, client: OipClient, model: ServedModel, feeds: Mapping[str, np.ndarray],
                 stop: threading.Event, out: list[Sample], lock: threading.Lock, limit: int) -> None:
        super().__init__(daemon=True)
        self.client, self.model, self.feeds, self.stop, self.out, self.lock = client, model, feeds, stop, out, lock
        self.limit = limit

    def run(self) -> None:
        # the connection is opened here: the HTTP transport's belong to the thread that made them
        try:
            own = self.client.clone()
        except Exception as exc:  # noqa: BLE001 - a failed connection is a sample of the sweep
            with self.lock:
                self.out.append(Sample(time.perf_counter(), None, f"connect: {exc}"[:240]))
            return
        try:
            self._loop(own)
        finally:
            own.close()

    def _loop(self, client: OipClient) -> None:
        """Requests back to back through the harness's timing loop's core (``harness.perf.loop``)."""
        time_until(lambda: client.infer(self.model, self.feeds), self.stop.is_set, self._keep)

    def _keep(self, ns: int | None, error: BaseException | None, end_ns: int) -> None:
        if error is None and ns is not None:
            sample = Sample(end_ns / 1e9, ns / 1e6)
        elif isinstance(error, ServingError):
            sample = Sample(end_ns / 1e9, None, str(error))
        else:  # the transport's own failure modes: counted like the rest
            sample = Sample(end_ns / 1e9, None, f"{type(error).__name__}: {error}"[:240])
        with self.lock:
            self.out.append(sample)
            if len(self.out) >= self.limit:
                self.stop.set()


def _stable(windows: list[tuple[float, float]], settings: SweepSettings) -> bool:
    """The last ``stable_windows`` (p50, throughput) pairs all within ``stability`` of their mean."""
    if len(windows) < settings.stable_windows:
        return False
    last = np.asarray(windows[-settings.stable_windows:], dtype=float)
    means = last.mean(axis=0)
    return bool(np.all(np.abs(last - means) <= settings.stability * np.maximum(means, 1e-12)))


def run_step(client: OipClient, model: ServedModel, feeds: Mapping[str, np.ndarray], concurrency: int,
             settings: SweepSettings, deadline: float) -> StepResult:
    """One concurrency level: warm up, then windows until stable, the step budget, the sweep's
    deadline, ``max_requests``, or the server stops answering (a window of errors only)."""
    step = StepResult(concurrency)
    samples: list[Sample] = []
    lock, stop = threading.Lock(), threading.Event()
    limit = settings.max_requests + settings.warmup * concurrency
    workers = [_Worker(client, model, feeds, stop, samples, lock, limit) for _ in range(concurrency)]
    before = client.statistics(model)
    began = time.perf_counter()
    for w in workers:
        w.start()
    try:
        # warm-up: every worker's first requests (connection set-up, the server's first batches)
        while not stop.is_set() and time.perf_counter() - began < settings.step_budget_s:
            with lock:
                if len(samples) >= settings.warmup * concurrency:
                    break
            time.sleep(0.005)
        with lock:
            skip = len(samples)
        measured_from = time.perf_counter()
        window_stats: list[tuple[float, float]] = []
        cursor = skip
        failed_windows = 0
        while not stop.is_set():
            end = min(time.perf_counter() + settings.window_s, began + settings.step_budget_s, deadline)
            while time.perf_counter() < end and not stop.is_set():
                time.sleep(min(0.01, settings.window_s / 10))
            with lock:
                window = samples[cursor:]
                cursor = len(samples)
            ok = [s.ms for s in window if s.ms is not None]
            step.windows += 1
            failed_windows = failed_windows + 1 if window and not ok else 0
            if failed_windows >= 2:  # one bad window can be a burst of slow requests; two is a dead server
                step.stopped = f"every request of two windows failed: {window[-1].error}"
                break
            if ok:
                window_stats.append((float(np.median(ok)), len(ok) / settings.window_s))
            if _stable(window_stats, settings):
                step.stable = True
                break
            if time.perf_counter() >= min(began + settings.step_budget_s, deadline):
                break
        measured_to = time.perf_counter()
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=client.endpoint.timeout_s + 5)
    with lock:
        measured = [s for s in samples[skip:] if s.end <= measured_to]
    step.samples_ms = [s.ms for s in measured if s.ms is not None]
    step.requests = len(measured)
    failed = [s for s in measured if s.ms is None]
    step.errors = len(failed)
    step.error_examples = sorted({s.error for s in failed})[:3]
    step.seconds = measured_to - measured_from
    step.throughput = len(step.samples_ms) * settings.batch_size / step.seconds if step.seconds > 0 else 0.0
    if not step.stopped:
        step.server = server_timings(before, client.statistics(model))
    return step


def server_timings(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Per-request server-side time (ms) between two snapshots of the statistics extension
    (Triton's ``inference_stats``: queue, compute input / infer / output), and the batch sizes
    the server executed; None where the server has no statistics endpoint."""
    if not before or not after:
        return None
    out: dict[str, Any] = {}
    b, a = before.get("inference_stats") or {}, after.get("inference_stats") or {}
    ok = _delta(b.get("success"), a.get("success"))
    for key in ("queue", "compute_input", "compute_infer", "compute_output"):
        count, ns = _delta(b.get(key), a.get(key))
        out[f"{key}_ms"] = ns / count / 1e6 if count else None
    out["requests"] = ok[0]
    batches = {}
    for entry in after.get("batch_stats") or []:
        size = int(entry.get("batch_size", 0))
        old: Mapping[str, Any] = next((e for e in before.get("batch_stats") or [] if int(e.get("batch_size", 0)) == size), {})
        count, _ = _delta((old.get("compute_infer") or {}), entry.get("compute_infer") or {})
        if count:
            batches[str(size)] = count
    out["executions_by_batch_size"] = batches
    return out


def _delta(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> tuple[int, int]:
    b, a = before or {}, after or {}
    return int(a.get("count", 0)) - int(b.get("count", 0)), int(a.get("ns", 0)) - int(b.get("ns", 0))


def sweep(client: OipClient, model: ServedModel, feeds: Mapping[str, np.ndarray],
          settings: SweepSettings) -> list[StepResult]:
    """Every level in order, within the sweep's budget; stops after a step whose server stopped answering."""
    deadline = time.perf_counter() + settings.budget_s
    steps: list[StepResult] = []
    for level in settings.concurrency:
        if time.perf_counter() >= deadline:
            break
        steps.append(run_step(client, model, feeds, level, settings, deadline))
        if steps[-1].stopped:
            break
    return steps


def perf_fields(steps: list[StepResult], settings: SweepSettings, protocol: str) -> dict[str, Any]:
    """The steps in the perf schema: one latency metric per level that measured anything."""
    perf: dict[str, Any] = {}
    first = True
    for step in steps:
        if not step.samples_ms:
            continue
        key = "latency_ms" if first else latency_key(concurrency=step.concurrency)
        entry = latency_entry(step.samples_ms, warmup=settings.warmup * step.concurrency, engine=f"oip-{protocol}",
                              items_per_call=settings.batch_size, concurrency=step.concurrency,
                              batch_size=settings.batch_size, seq_len=settings.seq_len, errors=step.errors,
                              stable=step.stable, windows=step.windows, server=step.server)
        entry["throughput"] = step.throughput  # measured over wall time: N requests in flight overlap
        perf[key] = entry
        first = False
    if "latency_ms" in perf:
        perf["throughput"] = perf["latency_ms"]["throughput"]
        perf["throughput_max"] = max(s.throughput for s in steps)
    perf["serving"] = {"steps": [s.summary() for s in steps],
                       "errors": sum(s.errors for s in steps),
                       "stopped": next((s.stopped for s in steps if s.stopped), None)}
    perf["settings"] = settings.as_dict()
    return perf


def judge_sweep(run: JobRun, source: EndpointGraphs, served: dict[str, Any]) -> CaseResult:
    """``check_perf`` for an endpoint: the sweep on the entry graph's served model; the model's
    perf budgets gate it; a server that stopped answering makes it ``error`` (steps kept)."""
    from harness.engine import conclude

    sweep_settings: SweepSettings = run.req.perf
    outcome, model, family = run.outcome, run.model, run.family
    case = run.case("check_perf")
    case.artifacts.update(run.source.records)
    Served(dict(served)).write(case.data)
    started = time.perf_counter()
    entry = family.graphs(model)[0]
    job = next((j for j in outcome.jobs if j.job.graph.name == entry.name and j.runner is not None and not j.error),
               None)
    if job is None or job.runner is None:
        return conclude(run, case, "check_perf", Decision("error", f"no served model judged the {entry.name!r} "
                                                                   "graph without an error: nothing to load"), started)
    endpoint_runner = job.runner.session
    assert isinstance(endpoint_runner, EndpointRunner)
    feeds = job.runner.artifact_feeds(shaped_feeds(model, family, entry, run.ws.texts(model), sweep_settings.batch_size,
                                                   sweep_settings.seq_len))
    try:
        if sweep_settings.rate is not None:
            decision = _judge_rate(case, outcome, endpoint_runner, feeds, sweep_settings.rate, source.endpoint.protocol)
        else:
            decision = _judge_levels(case, outcome, endpoint_runner, feeds, sweep_settings, source.endpoint.protocol)
    except Exception as exc:  # noqa: BLE001 - a client-side failure of the sweep itself: the case's error, not a crash
        decision = Decision("error", describe_error(exc, 300))
    return conclude(run, case, "check_perf", decision, started)


def _judge_levels(case: Case, outcome: CheckOutcome, runner: EndpointRunner, feeds: Mapping[str, np.ndarray],
                  settings: SweepSettings, protocol: str) -> Decision:
    """The concurrency sweep into the case's perf; its verdict: ``error`` when the server stopped
    answering or nothing succeeded, else the model's perf budgets."""
    steps = sweep(runner.client, runner.model, feeds, settings)
    perf = perf_fields(steps, settings, protocol)
    case.perf.update(perf)
    outcome.perf = perf
    stopped = perf["serving"]["stopped"]
    if stopped:
        return Decision("error", f"the server stopped answering during the sweep at concurrency "
                                 f"{steps[-1].concurrency}: {stopped}")
    if "latency_ms" not in perf:
        return Decision("error", "no request of the sweep succeeded: "
                                 + "; ".join(e for s in steps for e in s.error_examples[:1]))
    return decide(lambda: budgets.enforce(case, case.perf))


def _judge_rate(case: Case, outcome: CheckOutcome, runner: EndpointRunner, feeds: Mapping[str, np.ndarray],
                settings: RateSettings, protocol: str) -> Decision:
    """The request-rate sweep into the case's perf; its verdict: ``error`` when the server stopped
    answering or nothing succeeded, ``fail`` when no offered rate met the p99 budget, else the
    model's perf budgets (``served_ms_per_request`` among them)."""
    levels = rate_sweep(runner.client, runner.model, feeds, settings)
    perf = rate_fields(levels, settings, protocol)
    case.perf.update(perf)
    outcome.perf = perf
    summary = perf["serving_rate"]
    if summary["stopped"]:
        return Decision("error", f"the server stopped answering at {levels[-1].rate:g} requests/s: {summary['stopped']}")
    if not any(lv.samples_ms for lv in levels):
        return Decision("error", "no request of the rate sweep succeeded: " + "; ".join(
            e for lv in levels for e in lv.error_examples[:1]))
    if settings.p99_budget_ms is not None and summary["sustainable_rate"] is None:
        first = levels[0]
        return Decision("fail", f"no offered rate met p99 <= {settings.p99_budget_ms:g} ms: at {first.rate:g} requests/s "
                                f"p99 {first.p99() or float('nan'):.1f} ms, {first.achieved:.1f} answers/s, "
                                f"{first.errors} failed, {first.backlog} never sent")
    return decide(lambda: budgets.enforce(case, case.perf))
