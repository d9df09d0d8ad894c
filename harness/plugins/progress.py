"""``--harness-progress``: progress people can see, on a terminal and in a CI log.

pytest's dots say nothing for minutes when one FP16 latency case takes a minute.

* **On a terminal** (``auto``, the default, when stdout is a TTY; ``harness/plugins/_live.py``):
  a live display (rich) with cases done/total and a bar, each running case with its phase
  (build, export, reference, variant, metrics, perf) and how long it has been in it, the
  elapsed time and an ETA; pytest's own output scrolls above it.
* **Piped** (``auto`` when stdout is not a terminal, or ``lines`` always): one line per
  finished case::

      [12/60] PASS  marian-tiny-int8-ort_cpu logits 1.2 s  (ETA 1 min 40 s)

  and, every 30 s while a case runs, a heartbeat naming the case, how long it has run and the
  phase it is in.

Under pytest-xdist the controller sees every worker's reports (so the counter is exact), and
each process writes the phase of its running case to a small file in a temporary directory the
controller reads (workers get its path in ``workerinput``).

The ETA (:class:`Estimator`) reads the durations history: each case's duration in an earlier
run directory beside this one (or ``--shard-durations``' source), scaled by how fast this run's
finished cases went against their history (a loaded machine); a case never timed counts its cost
in the shard planner's model times the seconds per unit of cost this run's finished cases of its
suite took. Which earlier run (beside this one, or in the history store) -- or the cost model
alone -- prices what is left is whichever priced this run's last finished cases best, chosen again
as cases finish. Both are divided by the number of workers.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pytest

from harness.core import phases
from harness.core.interrupts import MARKER
from harness.core.rundirs import history_db
from harness.core.types import Precision, Variant
from harness.report.variants import split_variant
from harness.results.history import is_url, run_durations
from harness.session import COLLECTOR, RUN_DIR, asked_for, command_of, run_options
from harness.shard.cost import TORCH_FACTOR, CaseCost, case_cost
from harness.shard.plan import load_durations

#: a case running longer than this gets a heartbeat line (and another every this many seconds);
#: ``HARNESS_PROGRESS_HEARTBEAT_S`` overrides it (the tests use 1 s)
HEARTBEAT_S = 30.0
_DIR_KEY = "harness_progress_dir"
_LABEL = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}
_VERDICT_LABEL = {"pass": "PASS", "fail": "FAIL", "error": "ERROR", "skip": "SKIP", "not-run": "NOT-RUN"}


def _mode(config: pytest.Config) -> str:
    value = config.getoption("harness_progress", None)
    return str(value) if value else "auto"


def _is_tty(config: pytest.Config) -> bool:
    from harness.report.terminal import is_terminal

    return is_terminal(config.pluginmanager.get_plugin("terminalreporter"))


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # an xdist worker: only announce phases (the controller prints)
        folder = workerinput.get(_DIR_KEY)
        if folder:
            config.pluginmanager.register(PhaseFile(Path(folder), _worker_id(config)),
                                          f"harness-phase-file-{id(config)}")
        return

    mode = _mode(config)
    # `harness run` is a harness session whatever options it was given (a bare `harness run` too);
    # a plain pytest session shows progress when it configures the harness
    if mode == "off" or (mode == "auto" and not (command_of(config) == "run" or asked_for(config))):
        return
    folder = Path(tempfile.mkdtemp(prefix="harness-progress-"))
    display: Tally
    if mode == "auto" and _is_tty(config):
        from harness.plugins._live import LiveDisplay

        display = LiveDisplay(config, folder)
    else:
        display = Progress(config, folder)
    config.pluginmanager.register(display, f"harness-progress-{id(config)}")
    config.pluginmanager.register(PhaseFile(folder, manager=config.pluginmanager), f"harness-phase-file-{id(config)}")


def _worker_id(config: pytest.Config) -> str:
    workerinput = getattr(config, "workerinput", None)
    return str(workerinput.get("workerid", "")) if workerinput else ""


class PhaseFile:
    """In each process running cases: the running case and its phase in ``<folder>/<pid>.json``.

    A case announces a phase on every entry and exit (about 40 a case: each graph's reference,
    variant and metrics), and writing a small file costs 1.5 ms on this machine's ext4: written on
    every announcement, that was 3.7 s of a 23-s warm default run. So announcements are coalesced:
    the file is written at once when the last write is older than :attr:`MIN_INTERVAL_S`, else the
    newest state is kept and a flusher thread writes it within that interval (the display redraws
    four times a second; a phase's ``since`` is the moment it was entered, whenever it is written)."""

    #: the least time between two writes of the file
    MIN_INTERVAL_S = 0.25

    def __init__(self, folder: Path, worker: str = "", manager: pytest.PytestPluginManager | None = None) -> None:
        self.path = folder / f"{os.getpid()}.json"
        self.worker = worker  # xdist's "gw0"; "" in a serial run
        self.manager = manager  # the controller's: under xdist it sees every worker's logstart
        self.nodeid = ""
        self.writes = 0
        self._lock = threading.Lock()
        self._pending: dict[str, Any] | None = None
        self._written_at = -math.inf
        self._closed = threading.Event()
        self._flusher: threading.Thread | None = None
        phases.LISTENERS.append(self.phase)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if self.manager is not None and self.manager.has_plugin("dsession"):
            return  # the xdist controller runs no case: its file would contradict the worker's
        self.nodeid = nodeid
        self.phase("")

    def phase(self, name: str) -> None:
        state = {"nodeid": self.nodeid, "phase": name, "since": time.time(), "worker": self.worker}
        with self._lock:
            self._pending = state
            due = time.monotonic() - self._written_at >= self.MIN_INTERVAL_S
        if due:
            self._flush()
        elif self._flusher is None:
            self._flusher = threading.Thread(target=self._flush_every_interval, name="harness-phase-file", daemon=True)
            self._flusher.start()

    def _flush_every_interval(self) -> None:
        while not self._closed.wait(self.MIN_INTERVAL_S):
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            state, self._pending = self._pending, None
            if state is None:
                return
            self._written_at = time.monotonic()
            try:
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps(state), encoding="utf-8")
                os.replace(tmp, self.path)
                self.writes += 1
            except OSError:  # progress is a convenience: never fail a case over it
                pass

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.phase in phases.LISTENERS:
            phases.LISTENERS.remove(self.phase)
        self._closed.set()
        self._flush()


def case_label(nodeid: str) -> tuple[str, str]:
    """(variant, suite) of a node id: ``test_logits_parity[m-fp32-ort_cpu]`` -> (``m-fp32-ort_cpu``, ``logits``)."""
    name = nodeid.split("::")[-1]
    function, _, param = name.partition("[")
    suite = function.removeprefix("test_").removesuffix("_parity") or function
    return (param.rstrip("]") or nodeid), suite


def _seconds(value: float) -> str:
    if value < 60:
        return f"{value:.1f} s"
    minutes, seconds = divmod(int(round(value)), 60)
    return f"{minutes} min {seconds:02d} s"


@dataclass(frozen=True)
class Running:
    """A case in flight as the controller sees it: since when, and the phase its process reported."""

    nodeid: str
    elapsed: float  # seconds since the case started
    phase: str  # '' between phases (fixtures, pytest)
    in_phase: float  # seconds in that phase
    worker: str


class Estimator:
    """Seconds left: each case's duration in the history when it has one (scaled by this run's
    speed against it), else its cost in the shard planner's model (``harness.shard.cost``: graphs
    x model size x precision x backend x suite) times the seconds per unit of cost this run's
    finished cases took -- their suite's rate once the suite has finished cases (its first one
    pulled towards the run's rate), else the run's (:meth:`rate`); a case the model cannot weigh
    (no variant in its id) at the mean of the finished ones it could not weigh either.
    Re-estimated on every call, so it follows the run as cases finish; a case running past its
    estimate is expected to need a quarter of its elapsed time more (the estimate moves instead of
    freezing at zero).

    What prices the cases left is chosen again on every call (:meth:`source`): the history, another
    earlier run (``alternatives``: beside it, or in the history store), or the cost model --
    whichever priced this run's last :data:`CHECKED` finished cases best. A history is one scale
    for the whole run, and a run whose load differs from its history's slows its cases unevenly
    (beside a busy neighbour the in-process PyTorch cases of a ``--perf`` run took 3-5x their
    quiet time, its fresh-process cold starts 1.0-1.2x): the cost model's rates per suite and
    backend follow that, and an earlier run made under this run's load follows it better still."""

    #: of a case running past its estimate, the share of its elapsed time still expected
    OVERRUN = 0.25
    #: the most recent finished cases on which the sources are compared (a plateau: 5 to 15
    #: replayed within 1 % of each other, docs/report.md)
    CHECKED = 10

    def __init__(self, history: Mapping[str, float] | None = None,
                 weights: Mapping[str, float] | None = None, kinds: Mapping[str, str] | None = None,
                 alternatives: Sequence[Mapping[str, float]] = ()) -> None:
        self.history = _positive(history)
        #: other earlier runs' durations, each tried as the history (the best-matching run first)
        self.alternatives = [_positive(h) for h in alternatives if h]
        self.weights = _positive(weights)
        #: case key -> its backend: within a suite, a kind of case with a rate of its own (a PyTorch
        #: variant's cold start imports torch in every fresh process: ~20x an ONNX Runtime one's per unit)
        self.kinds = dict(kinds or {})

    def scale(self, finished: Mapping[str, float], history: Mapping[str, float] | None = None) -> float:
        """This run's speed against ``history`` (the history by default), over the cases both
        timed (1.0 when none). A case that took no time here (skipped at collection) says nothing
        about the speed: counted, it pulled the scale down, to 0 when it was the only one."""
        history = self.history if history is None else history
        pairs = [(s, history[case_key(n)]) for n, s in finished.items() if case_key(n) in history and s > 0]
        before = sum(b for _, b in pairs)
        return sum(a for a, _ in pairs) / before if pairs and before > 0 else 1.0

    def source(self, finished: Mapping[str, float]) -> dict[str, float] | None:
        """The durations that price what is left, or None for the cost model: of the history, the
        alternatives and the cost model, the one that missed the last :data:`CHECKED` finished
        cases the cost model can weigh (in the order they finished) by the least, each case priced
        as the source would have priced it when it started -- its duration there times the scale
        of the cases finished before it (a case the run never timed: its weight times the rate
        then), or its weight times the rate then -- the misses summed as |log(priced / took)|.
        Ties go to the history, then the alternatives in their order, then the model; with
        nothing to compare (no finished case weighed, no cost model) the history."""
        histories = [h for h in (self.history, *self.alternatives) if h]
        if not histories:
            return None
        if not self.weights:
            return histories[0]
        names = list(finished)
        checked = [i for i, n in enumerate(names) if case_key(n) in self.weights and finished[n] > 0][-self.CHECKED:]
        priced: dict[int, float] = {}  # the cost model's price of each checked case when it started
        for i in checked:
            key = case_key(names[i])
            rate = self.rate(suite_of(names[i]), {n: finished[n] for n in names[:i]}, self.kinds.get(key))
            if rate:
                priced[i] = self.weights[key] * rate
        if not priced:
            return histories[0]

        def miss(history: Mapping[str, float] | None) -> float:
            # :meth:`scale` of the cases finished before each, kept as running sums: calling it per
            # checked case made an estimate 0.27 s with 16 histories and 2000 cases finished
            took = timed = 0.0  # the run's seconds and the history's over the cases both timed so far
            total = 0.0
            for i, name in enumerate(names):
                key = case_key(name)
                if i in priced:
                    scale = took / timed if timed > 0 else 1.0
                    guess = history[key] * scale if history is not None and key in history else priced[i]
                    total += abs(math.log(guess / finished[name]))
                if history is not None and key in history and finished[name] > 0:  # as :meth:`scale`
                    took, timed = took + finished[name], timed + history[key]
            return total

        sources: list[dict[str, float] | None] = [*histories, None]
        misses = [miss(h) for h in sources]
        return sources[misses.index(min(misses))]

    def rate(self, suite: str, finished: Mapping[str, float], kind: str | None = None) -> float | None:
        """Seconds per unit of cost for a case of ``suite`` (and ``kind``), from this run's finished
        cases: the run's rate, refined by the suite's own cases, refined by the suite's cases of the
        same kind -- each level the prior of the next (the cost model's ratio between cases is the
        prior, what finished corrects it).

        The run's rate is the median of the rates of its finished groups (a suite's cases of one
        kind), each group one vote, not the seconds of all finished cases over their units: those
        are mostly the heaviest group's, and one group off the model (cold exports beside another
        job: generation parity's ONNX Runtime cases at 0.51 s per unit, every other group 0.19-0.25)
        then priced every suite after it 75 % too long (``--perf``, load 2.7)."""
        timed = [(suite_of(n), self.kinds.get(case_key(n)), s, self.weights[case_key(n)]) for n, s in finished.items()
                 if case_key(n) in self.weights]
        groups: dict[tuple[str, str | None], list[float]] = {}
        for name, kind_of, seconds, weight in timed:
            group = groups.setdefault((name, kind_of), [0.0, 0.0])
            group[0] += seconds
            group[1] += weight
        rates = [seconds / weight for seconds, weight in groups.values() if weight > 0]
        if not rates:
            return None
        overall = statistics.median(rates)
        of_suite = _refined(overall, [(s, w) for name, _, s, w in timed if name == suite])
        if kind is None:
            return of_suite
        return _refined(of_suite, [(s, w) for name, k, s, w in timed if name == suite and k == kind])

    def expected(self, nodeid: str, finished: Mapping[str, float], scale: float,
                 history: Mapping[str, float] | None, memo: dict[Any, float | None] | None = None) -> float | None:
        """Seconds ``nodeid`` is expected to take: its duration in ``history`` times ``scale``
        when it has one there, else its cost in the model (:meth:`source` chose ``history``).
        ``memo``: what one estimate shares between its cases (the rates, the means of the finished
        cases), each O(finished cases) to compute: a 600-case run's every estimate had recomputed
        them for each case left."""
        memo = {} if memo is None else memo
        key = case_key(nodeid)
        if history is not None and key in history:
            return history[key] * scale
        if key in self.weights:
            group = ("rate", suite_of(nodeid), self.kinds.get(key))
            if group not in memo:
                memo[group] = self.rate(group[1], finished, group[2])
            rate = memo[group]
            if rate is not None:
                return self.weights[key] * rate
        elif self.weights:
            # a case the cost model cannot weigh names no variant (a suite with nothing to run,
            # skipped at collection in 0.0 s): priced like the finished ones it could not weigh
            # either, not at the mean case (5 s of a --perf run's, shown for a case taking none)
            if "unweighed" not in memo:
                memo["unweighed"] = _mean([s for n, s in finished.items() if case_key(n) not in self.weights])
            unweighed = memo["unweighed"]
            if unweighed is not None:
                return unweighed
        if "timed" not in memo:  # a skip at collection took no time: no estimate
            memo["timed"] = _mean([s for s in finished.values() if s > 0])
        timed = memo["timed"]
        if timed is not None:
            return timed
        if history:
            return statistics.median(history.values()) * scale
        return None

    def eta(self, pending: Sequence[str], running: Mapping[str, float], finished: Mapping[str, float],
            workers: int) -> float | None:
        """Seconds until the last case ends: cases not started at their expected duration, running
        ones for what they have left; None before anything can be estimated."""
        if not pending and not running:
            return None
        history = self.source(finished)
        scale = self.scale(finished, history) if history is not None else 1.0
        total = 0.0
        memo: dict[Any, float | None] = {}
        for nodeid in pending:
            guess = self.expected(nodeid, finished, scale, history, memo)
            if guess is None:
                return None
            total += guess
        for nodeid, elapsed in running.items():
            guess = self.expected(nodeid, finished, scale, history, memo)
            if guess is None:
                return None
            total += max(guess - elapsed, elapsed * self.OVERRUN)
        return total / max(workers, 1)


#: seconds from the last case's end to the session's: the reports written at the end (results,
#: summary, JUnit). 0.07-0.14 s in all 14 journals of default and ``--perf`` runs kept here (loads
#: 0.6 to 4); the ETA is read to the end of the run, so in its last second this is most of what is
#: left (without it the last two estimates of a quiet default run read -31 % to -46 %)
REPORT_TAIL_S = 0.1
#: the most the wall clock may stretch the cases' own durations (a neighbour's burst, not a trend)
MAX_WALL_FACTOR = 2.0
#: finished cases before the wall clock is trusted (the first ones share their start with imports)
WALL_FACTOR_AFTER = 3


def wall_factor(wall: float, finished: Iterable[float], running: Iterable[float], workers: int) -> float:
    """Wall seconds per second of case time so far: what the cases' own durations leave out (the
    gaps between cases, xdist's scheduling, a worker idle at the end of its queue), as a factor of
    1 to :data:`MAX_WALL_FACTOR` on the seconds the cases still need."""
    done = list(finished)
    busy = (sum(done) + sum(running)) / max(workers, 1)
    if len(done) < WALL_FACTOR_AFTER or busy <= 0:
        return 1.0
    return min(max(wall / busy, 1.0), MAX_WALL_FACTOR)


class EtaJournal:
    """Every estimate the display showed, with the wall-clock time it was shown at, and when the
    session ended: what ``scripts/eta_accuracy.py`` judges the ETA by against the true end of a real
    run (start-up, collection, the gaps between cases and the reports included). Written only when
    ``HARNESS_PROGRESS_ETA_LOG`` names a file (JSON lines)."""

    ENV = "HARNESS_PROGRESS_ETA_LOG"

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            import psutil

            started = psutil.Process().create_time()  # the process's start: start-up and collection count
        except Exception:  # noqa: BLE001 - a journal without the start still judges the estimates
            started = None
        self._write({"started": started, "configured": time.time()})

    @classmethod
    def from_env(cls) -> EtaJournal | None:
        path = os.environ.get(cls.ENV)
        return cls(Path(path)) if path else None

    def estimate(self, done: int, total: int, eta: float | None) -> None:
        self._write({"t": time.time(), "done": done, "total": total, "eta": eta})

    def ended(self) -> None:
        self._write({"ended": time.time()})

    def _write(self, entry: dict[str, Any]) -> None:
        try:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")
        except OSError:  # progress is a convenience: a journal that cannot be written is skipped
            pass


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _positive(values: Mapping[str, float] | None) -> dict[str, float]:
    return {k: float(v) for k, v in (values or {}).items() if v and v > 0}


def _refined(prior: float, own: Sequence[tuple[float, float]]) -> float:
    """Seconds per unit from ``own`` finished (seconds, weight) cases, with ``prior`` as the rate
    before them: one case is pulled towards the prior by one case's worth (a first case pays its
    suite's imports and builds); from two on, their own rate."""
    if not own:
        return prior
    pull = own[0][1] if len(own) == 1 else 0.0
    return (sum(s for s, _ in own) + prior * pull) / (sum(w for _, w in own) + pull)


def reused_builds(ids: Sequence[str], weights: Mapping[str, float], kinds: Mapping[str, str],
                  exports: Mapping[str, float] | None = None) -> dict[str, float]:
    """``weights`` with what an earlier case of the run (in run order) already built taken out: a
    case whose variant was built before weighs as the cost model weighs a variant that exports
    nothing (``TORCH_FACTOR``): the model charges every ONNX Runtime case its export, while a
    logits case after the generation case of the same variant reuses the cached export (2 s
    against the generation case's 20-60 s here); and a case of a model another variant already
    exported loses its exporter's own cost (``exports``, ``CaseCost.export``): FP16 and INT8 convert
    the cached FP32 graph. PyTorch variants export nothing either way."""
    exports = exports or {}
    out = dict(weights)
    built: set[str] = set()
    exported: set[str] = set()
    for nodeid in ids:
        key = case_key(nodeid)
        variant = key.partition("[")[2]
        if key in out and kinds.get(key) != "pytorch":
            extra = exports.get(key, 0.0)
            model = split_variant(variant.rstrip("]")).model
            if variant in built:
                out[key] = (out[key] - extra) * TORCH_FACTOR
            elif model in exported:
                out[key] = out[key] - extra
            exported.add(model)
        built.add(variant)
    return out


def case_kinds(ids: Sequence[str]) -> dict[str, str]:
    """Case key -> the backend of its variant (``pytorch``, ``onnxruntime``...), where the id names one."""
    from harness.runners import providers

    table = providers()
    out = {}
    for nodeid in ids:
        key = case_key(nodeid)
        provider = table.get(split_variant(key.partition("[")[2].rstrip("]")).provider)
        if provider is not None:
            out[key] = provider.backend
    return out


def suite_of(nodeid: str) -> str:
    """The test function of a case (``test_logits_parity``): what its cost and its rate are kept by."""
    return case_key(nodeid).split("[", 1)[0]


def case_costs(ids: Sequence[str], catalog: Any = None) -> dict[str, CaseCost]:
    """Case id -> its cost in the shard planner's model, for the cases whose id names a variant
    (``test_x[model-precision-provider]``); {} when the model cannot be read (no ETA from it)."""
    from harness.runners import providers

    table = providers()
    sizes: dict[str, int] = {}
    exports: dict[str, float] = {}
    out: dict[str, CaseCost] = {}
    for nodeid in ids:
        key = case_key(nodeid)
        test, _, param = key.partition("[")
        parts = split_variant(param.rstrip("]"))
        provider = table.get(parts.provider)
        if provider is None or not parts.precision:
            continue
        try:
            variant = Variant(parts.model, Precision(parts.precision), provider)
            out[key] = case_cost(test, variant, catalog, sizes, exports)
        except Exception:  # noqa: BLE001 - the ETA is a convenience: a case it cannot weigh counts the mean
            continue
    return out


def case_weights(ids: Sequence[str], catalog: Any = None) -> dict[str, float]:
    """Case id -> its weight in the shard planner's model (:func:`case_costs`)."""
    return {key: cost.weight for key, cost in case_costs(ids, catalog).items()}


def run_weights(ids: Sequence[str], catalog: Any = None) -> dict[str, float]:
    """What the ETA weighs each case of a run by: the cost model's weights with what earlier
    cases of the run built taken out (:func:`reused_builds`)."""
    costs = case_costs(ids, catalog)
    return reused_builds(ids, {k: c.weight for k, c in costs.items()}, case_kinds(ids),
                         {k: c.export for k, c in costs.items()})


def case_key(nodeid: str) -> str:
    """The record id of a node id (what run directories and the history store key durations by)."""
    return nodeid.split("::")[-1]


#: earlier run directories beside this one read for a history (the newest first)
HISTORY_CANDIDATES = 8


def history_durations(config: pytest.Config, ids: Sequence[str] = ()) -> list[dict[str, float]]:
    """Case durations of the earlier runs beside this run's directory (``reports/run-*``), the best
    match first (:func:`ranked_histories`), or of ``--shard-durations``' source alone; [] when there
    is none (the ETA is a convenience: an unreadable history never stops a run). The first is the
    ETA's history; the others are its alternatives (``Estimator.source``)."""
    given = config.getoption("harness_shard_durations", None)
    try:
        if given:
            return [load_durations(given)]

        run_dir = config.stash.get(RUN_DIR, None)
        if run_dir is None or not run_dir.parent.is_dir():
            return []
        earlier = sorted((d for d in run_dir.parent.iterdir()
                          if d != run_dir and (d / "results.jsonl").is_file()),
                         key=lambda d: (d / "results.jsonl").stat().st_mtime, reverse=True)[:HISTORY_CANDIDATES]
        return ranked_histories([(load_durations(d), not (d / MARKER).exists()) for d in earlier], ids)
    except Exception:  # noqa: BLE001 - a foreign or broken directory: no history, not a failed run
        return []


def ranked_histories(runs: Sequence[tuple[dict[str, float], bool]], ids: Sequence[str]) -> list[dict[str, float]]:
    """(durations, finished) per earlier run, newest first, ranked as a history for a run of
    ``ids``: the one timing most of their cases first, a finished one before an interrupted one
    (an interrupted run's slow cases are missing, which would read as a fast run), the newest
    among equals (the newest run was often a one-model try beside the full nightly); runs that
    timed nothing left out."""
    wanted = {case_key(n) for n in ids}
    scored = [(len(wanted & durations.keys()), finished, -age, durations)
              for age, (durations, finished) in enumerate(runs) if durations]
    return [entry[3] for entry in sorted(scored, key=lambda entry: entry[:3], reverse=True)]


class Tally:
    """Controller side: which cases exist, run and finished (under xdist too); subclasses show it."""

    def __init__(self, config: pytest.Config, folder: Path) -> None:
        self.config = config
        self.folder = folder
        self.total = 0
        self.ids: list[str] = []
        self.done = 0
        self.finished: dict[str, float] = {}
        self.labels: dict[str, int] = {}
        self.outcomes: dict[str, tuple[str, float]] = {}
        self.running: dict[str, float] = {}
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.workers = max(int(getattr(config.option, "numprocesses", 0) or 0), 1)
        self.estimator = Estimator()
        #: reads the history store's runs in the background (:meth:`_read_store`), once the cases are known
        self.store_reader: threading.Thread | None = None
        self.store_read = threading.Event()
        self.first_start: float | None = None  # when the first case started (the wall clock's origin)
        self.journal = EtaJournal.from_env()

    # -- pytest hooks --------------------------------------------------------------------------------
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[_DIR_KEY] = str(self.folder)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self.total:
            self.total = len(session.items)
            self.ids = [item.nodeid for item in session.items]
            self._weigh()

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if len(ids) >= self.total:
            self.total, self.ids = len(ids), list(ids)
            self._weigh()

    def _weigh(self) -> None:
        """Each case's cost (the shard planner's model), read once the cases are known."""

        try:
            catalog = run_options(self.config).catalog
        except Exception:  # noqa: BLE001 - options are reported by the run itself; the ETA uses the zoo
            catalog = None
        if self.store_reader is None:  # once: every xdist worker reports the same cases
            ranked = history_durations(self.config, self.ids)
            self.estimator.history = _positive(ranked[0] if ranked else None)
            self.estimator.alternatives = [_positive(h) for h in ranked[1:]]
            self.store_reader = threading.Thread(target=self._read_store, name="harness-eta-history", daemon=True)
            self.store_reader.start()
        self.estimator.kinds = case_kinds(self.ids)
        self.estimator.weights = run_weights(self.ids, catalog)

    def _read_store(self) -> None:
        """The history store's newest runs (``$HARNESS_HISTORY_DB``, else ``reports/history.sqlite``
        when it exists) as more of the ETA's histories -- the only ones a CI job on a fresh
        checkout has. Read in the background: an unreachable database server delays nothing, and
        the estimates use the runs once they are read. Sets :attr:`store_read` when done."""
        try:
            db = history_db()
            if is_url(db) or Path(db).is_file():
                ranked = ranked_histories([(h, True) for h in run_durations(db, HISTORY_CANDIDATES)], self.ids)
                with self.lock:
                    estimator = self.estimator
                    if not estimator.history and ranked:
                        estimator.history, ranked = _positive(ranked[0]), ranked[1:]
                    estimator.alternatives = [*estimator.alternatives, *(_positive(h) for h in ranked)]
        except Exception:  # noqa: BLE001 - the ETA is a convenience: an unreadable store is no history
            pass
        finally:
            self.store_read.set()

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        with self.lock:
            self.running[nodeid] = time.monotonic()
            if self.first_start is None:
                self.first_start = self.running[nodeid]

    @pytest.hookimpl(trylast=True)  # after the record collector composed the case's record
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcome, seconds = self.outcomes.get(report.nodeid, ("passed", 0.0))
        seconds += float(getattr(report, "duration", 0.0) or 0.0)
        if report.failed:
            outcome = "failed" if report.when == "call" else "error"
        elif report.skipped and outcome == "passed":
            outcome = "skipped"
        self.outcomes[report.nodeid] = (outcome, seconds)
        if report.when != "teardown":
            return
        self.outcomes.pop(report.nodeid, None)
        label = self._verdict(report.nodeid) or _LABEL.get(outcome, outcome.upper())
        with self.lock:
            self.running.pop(report.nodeid, None)
            self.done += 1
            self.finished[report.nodeid] = seconds
            self.labels[label] = self.labels.get(label, 0) + 1
        self.case_finished(report.nodeid, label, seconds)
        if self.journal is not None:
            # once every case finished the display shows no ETA: nothing to judge (a 0 s journalled
            # here read as a -100 % miss against the reports' last tenth of a second)
            self.journal.estimate(self.done, self.total, self.eta_seconds() if self.done < self.total else None)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.journal is not None:
            self.journal.ended()

    # -- what subclasses implement -------------------------------------------------------------------
    def case_finished(self, nodeid: str, label: str, seconds: float) -> None:
        """A case's last report arrived (``label``: the harness's verdict, PASS / FAIL / ...)."""

    def close(self) -> None:
        """The session is over: stop threads and displays."""

    # -- helpers -------------------------------------------------------------------------------------
    def _verdict(self, nodeid: str) -> str | None:
        """The harness's own verdict of the case (not-run, error vs fail), from its record."""

        collector = self.config.stash.get(COLLECTOR, None)
        records = getattr(collector, "records", None)
        if records and records[-1].id == case_key(nodeid):
            return _VERDICT_LABEL.get(records[-1].verdict)
        return None

    def _counter(self) -> str:
        width = len(str(self.total or self.done))
        return f"[{self.done:>{width}}/{self.total or '?'}]"

    def eta_seconds(self) -> float | None:
        """Seconds until the run ends, as shown; None when there is nothing to go on -- or when the
        estimate fails: it is computed in pytest's report hook and the live display's thread, and
        a convenience must not turn a run into an internal error (the estimator's own tests see
        its failures)."""
        try:
            return self._eta_seconds()
        except Exception:  # noqa: BLE001 - see the docstring
            return None

    def _eta_seconds(self) -> float | None:
        now = time.monotonic()
        with self.lock:
            running = {n: now - t for n, t in self.running.items()}
            finished = dict(self.finished)
        if self.ids:
            pending = [n for n in self.ids if n not in finished and n not in running]
        else:
            pending = [""] * max(self.total - len(finished) - len(running), 0)
        eta = self.estimator.eta(pending, running, finished, self.workers)
        if eta is None or self.first_start is None:
            return eta
        cases = eta * wall_factor(now - self.first_start, finished.values(), running.values(), self.workers)
        return cases + REPORT_TAIL_S

    def _eta(self) -> str:
        eta = self.eta_seconds()
        return f"  (ETA {_seconds(eta)})" if eta is not None and self.done < self.total else ""

    def _phases(self) -> dict[str, tuple[str, float, str]]:
        out = {}
        for path in self.folder.glob("*.json"):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            out[str(data.get("nodeid"))] = (str(data.get("phase") or ""), float(data.get("since") or 0.0),
                                            str(data.get("worker") or ""))
        return out

    def in_flight(self) -> list[Running]:
        """The running cases, oldest first, each with the phase its process last reported."""
        now, wall = time.monotonic(), time.time()
        phases = self._phases()
        with self.lock:
            running = sorted(self.running.items(), key=lambda item: item[1])
        out = []
        for nodeid, began in running:
            phase, since, worker = phases.get(nodeid, ("", 0.0, ""))
            out.append(Running(nodeid, now - began, phase, max(wall - since, 0.0) if since else 0.0, worker))
        return out


class Progress(Tally):
    """Piped output: one line per finished case, and the heartbeats."""

    def __init__(self, config: pytest.Config, folder: Path) -> None:
        super().__init__(config, folder)
        self.beaten: dict[str, float] = {}
        self.writing = threading.Lock()  # the heartbeat thread and the hooks write lines
        self.stop = threading.Event()
        self.heartbeat_s = float(os.environ.get("HARNESS_PROGRESS_HEARTBEAT_S") or HEARTBEAT_S)
        self.thread = threading.Thread(target=self._heartbeat, name="harness-progress", daemon=True)
        self.thread.start()

    def case_finished(self, nodeid: str, label: str, seconds: float) -> None:
        with self.lock:
            self.beaten.pop(nodeid, None)
        variant, suite = case_label(nodeid)
        self._write(f"{self._counter()} {label:<5} {variant} {suite} {_seconds(seconds)}{self._eta()}")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)

    def _write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        with self.writing:
            if reporter is None:
                print(line, flush=True)
                return
            writer = getattr(reporter, "_tw", None)
            if getattr(writer, "width_of_current_line", 0):  # after pytest's dots ("..F")
                reporter.write("\n")
            reporter.write_line(line)
            getattr(reporter, "_tw", sys.stdout).flush()

    def _heartbeat(self) -> None:
        while not self.stop.wait(1.0):
            for case in self.in_flight():
                last = self.beaten.get(case.nodeid)
                if case.elapsed < self.heartbeat_s or (last is not None and time.monotonic() - last < self.heartbeat_s):
                    continue
                self.beaten[case.nodeid] = time.monotonic()
                variant, suite = case_label(case.nodeid)
                where = f", in {case.phase} for {_seconds(case.in_phase)}" if case.phase and case.in_phase else ""
                self._write(f"{self._counter()} ..... {variant} {suite} still running: "
                            f"{_seconds(case.elapsed)}{where}")
