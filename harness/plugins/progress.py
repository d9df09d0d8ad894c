"""``--harness-progress``: progress people can see in a CI log.

pytest's dots say nothing for minutes when one FP16 latency case takes a minute. When the output is
not a terminal (``auto``, the default) or with ``lines``, the controller prints one line per finished
case::

    [12/60] PASS  marian-tiny-int8-ort_cpu logits 1.2 s  (ETA 1 min 40 s)

and, every 30 s while a case runs, a heartbeat naming the case, how long it has run and the phase
it is in (export, reference, variant, metrics, perf). Under pytest-xdist the controller sees every
worker's reports (so the counter is exact), and each process writes the phase of its running case
to a small file in a temporary directory the controller reads (workers get its path in
``workerinput``). On a terminal pytest's own progress is left alone.

The ETA is the mean duration of the cases finished so far times the cases left, divided by the
number of workers: the durations of this run are the best predictor of its own remaining cases.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

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
            config.pluginmanager.register(PhaseFile(Path(folder)), f"harness-phase-file-{id(config)}")
        return
    from harness.plugin import _asked_for

    mode = _mode(config)
    if mode == "off" or (mode == "auto" and (_is_tty(config) or not _asked_for(config))):
        return
    folder = Path(tempfile.mkdtemp(prefix="harness-progress-"))
    config.pluginmanager.register(Progress(config, folder), f"harness-progress-{id(config)}")
    config.pluginmanager.register(PhaseFile(folder), f"harness-phase-file-{id(config)}")


class PhaseFile:
    """In each process running cases: the running case and its phase in ``<folder>/<pid>.json``."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / f"{os.getpid()}.json"
        self.nodeid = ""
        from harness.core import phases

        phases.LISTENERS.append(self.phase)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.nodeid = nodeid
        self.phase("")

    def phase(self, name: str) -> None:
        try:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"nodeid": self.nodeid, "phase": name, "since": time.time()}), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:  # progress is a convenience: never fail a case over it
            pass

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        from harness.core import phases

        if self.phase in phases.LISTENERS:
            phases.LISTENERS.remove(self.phase)


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


class Progress:
    """Controller side: counts finished cases and prints their lines and the heartbeats."""

    def __init__(self, config: pytest.Config, folder: Path) -> None:
        self.config = config
        self.folder = folder
        self.total = 0
        self.done = 0
        self.durations: list[float] = []
        self.outcomes: dict[str, tuple[str, float]] = {}
        self.running: dict[str, float] = {}
        self.beaten: dict[str, float] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.heartbeat_s = float(os.environ.get("HARNESS_PROGRESS_HEARTBEAT_S") or HEARTBEAT_S)
        self.workers = max(int(getattr(config.option, "numprocesses", 0) or 0), 1)
        self.thread = threading.Thread(target=self._heartbeat, name="harness-progress", daemon=True)
        self.thread.start()

    # -- pytest hooks --------------------------------------------------------------------------------
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[_DIR_KEY] = str(self.folder)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not self.total:
            self.total = len(session.items)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.total = max(self.total, len(ids))

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        with self.lock:
            self.running[nodeid] = time.monotonic()

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
        with self.lock:
            self.running.pop(report.nodeid, None)
            self.beaten.pop(report.nodeid, None)
            self.done += 1
            self.durations.append(seconds)
            label = self._verdict(report.nodeid) or _LABEL.get(outcome, outcome.upper())
            variant, suite = case_label(report.nodeid)
            self._write(f"{self._counter()} {label:<5} {variant} {suite} {_seconds(seconds)}{self._eta()}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        shutil.rmtree(self.folder, ignore_errors=True)

    # -- helpers -------------------------------------------------------------------------------------
    def _verdict(self, nodeid: str) -> str | None:
        """The harness's own verdict of the case (not-run, error vs fail), from its record."""
        from harness.plugin import COLLECTOR

        collector = self.config.stash.get(COLLECTOR, None)
        records = getattr(collector, "records", None)
        if records and records[-1].id == nodeid.split("::")[-1]:
            return _VERDICT_LABEL.get(records[-1].verdict)
        return None

    def _counter(self) -> str:
        width = len(str(self.total or self.done))
        return f"[{self.done:>{width}}/{self.total or '?'}]"

    def _eta(self) -> str:
        left = self.total - self.done
        if left <= 0 or not self.durations:
            return ""
        mean = sum(self.durations) / len(self.durations)
        return f"  (ETA {_seconds(mean * left / self.workers)})"

    def _write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            print(line, flush=True)
            return
        writer = getattr(reporter, "_tw", None)
        if getattr(writer, "width_of_current_line", 0):  # after pytest's dots ("..F")
            reporter.write("\n")
        reporter.write_line(line)
        getattr(reporter, "_tw", sys.stdout).flush()

    def _phases(self) -> dict[str, tuple[str, float]]:
        out = {}
        for path in self.folder.glob("*.json"):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            out[str(data.get("nodeid"))] = (str(data.get("phase") or ""), float(data.get("since") or 0.0))
        return out

    def _heartbeat(self) -> None:
        while not self.stop.wait(1.0):
            now = time.monotonic()
            with self.lock:
                due = [(n, now - t) for n, t in self.running.items()
                       if now - t >= self.heartbeat_s and now - self.beaten.get(n, t) >= self.heartbeat_s]
                if not due:
                    continue
                phases = self._phases()
                for nodeid, elapsed in due:
                    self.beaten[nodeid] = now
                    variant, suite = case_label(nodeid)
                    phase, since = phases.get(nodeid, ("", 0.0))
                    where = f", in {phase} for {_seconds(time.time() - since)}" if phase and since else ""
                    self._write(f"{self._counter()} ..... {variant} {suite} still running: {_seconds(elapsed)}{where}")
