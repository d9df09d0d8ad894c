"""From a test case to its results record.

``Case`` is what a suite test holds (the ``harness`` fixture): it runs parity through the
workspace and collects metrics, thresholds, artifacts and data. ``RecordCollector`` lives in
the controlling process and turns the reports of each test (setup, call, teardown) into
exactly one record with a verdict, whatever happened: pass, gate failure, skip, error.
"""

from __future__ import annotations

import errno
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from harness.core import UsageError, Variant
from harness.core.interrupts import signals_held
from harness.core.phases import PhaseClock
from harness.core.writable import DiskFull
from harness.families.base import input_token_limit, truncated_count
from harness.results import CaseIdentity, Record, ResultsWriter, Verdict, compose, new_run_id
from harness.results.envinfo import environment
from harness.results.outcome import Decision
from harness.results.record import as_verdict
from harness.results.sections import Evidence, Judged
from harness.settings.options import recordable, rerun_command

if TYPE_CHECKING:  # pragma: no cover
    import pytest

    from harness.core.writable import DiskFull
    from harness.families import Family
    from harness.judge.numeric import ParityResult
    from harness.judge.workspace import Workspace
    from harness.zoo.loading import LoadedModel


@dataclass
class Case:
    workspace: Workspace
    variant: Variant | None
    run_dir: Path
    name: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    perf: dict[str, Any] = field(default_factory=dict)
    exception: dict[str, Any] | None = None
    started: float = field(default_factory=time.time)
    #: seconds per phase (build, export, reference, variant, metrics, perf): ``harness.core.phases``
    clock: PhaseClock = field(default_factory=PhaseClock)
    #: the case's resident memory (``harness.core.rss.PeakRss.stop``): peak, start, end bytes
    memory: dict[str, Any] = field(default_factory=dict)
    #: what the engine decided for this case (None: nothing judged through it; the test's outcome decides)
    decision: Decision | None = None

    @property
    def model(self) -> LoadedModel:
        assert self.variant is not None, "this case has no variant"
        return self.workspace.model(self.variant.model)

    def numeric_parity(self, family: Family | None = None) -> ParityResult:
        """Judge the variant's graphs against PyTorch FP32 through the case's stages
        (``harness.case.pipeline.numeric_case``): records everything, decides the case, returns the
        result (whose ``assert_ok`` tells pytest)."""
        from harness.case.pipeline import numeric_case

        return numeric_case(self, family)

    def conclude(self, decision: Decision) -> None:
        """The engine's decision for this case; two decisions of one case keep the graver."""
        self.decision = decision.worse(self.decision)

    def record_parity(self, result: ParityResult) -> None:
        """The record stage of a numeric case (``harness.case.pipeline``), for the suites and
        ``harness check`` alike: metrics, thresholds, artifacts, the worst elements, and what the
        side-output stages wrote (failing-batch dumps, repro bundles, profiles)."""
        self.metrics.update(result.metrics())
        self.thresholds.update(result.thresholds())
        self.artifacts.update(result.artifacts)
        Judged(result.worst(), tuple(result.replayed), result.side.profiles, dict(result.seconds),
               tuple(result.shapes)).write(self.data)
        Evidence(result.side.dumps, result.side.bundles).write(self.data)
        if result.coverage is not None:
            result.coverage.write(self.data)

    def case_dir(self) -> Path:
        """This case's directory in the run dir (created on first use by whoever writes)."""
        return self.run_dir / "cases" / case_dir_name(self.name)

    def side_file(self, name: str) -> Path:
        """A path in the run dir for this case's extra outputs (decoded text, raw samples)."""
        directory = self.case_dir()
        directory.mkdir(parents=True, exist_ok=True)
        return directory / name

    def _settings(self) -> dict[str, Any]:
        options = self.workspace.options
        exporter, per_channel = options.exporter, options.settings.int8_per_channel
        fixes: dict[str, Any] = {}  # the node lists this model's artifacts were built with
        inputs: dict[str, Any] = {}
        if self.variant is not None:
            try:  # what this model really used (a model may default to dynamo / per-channel INT8)
                model = self.workspace.model(self.variant.model)
                effective = self.workspace.runtimes.settings_for(model)
                exporter, per_channel = effective.exporter, effective.int8_per_channel
                fixes = {k: list(v) for k, v in (("fp16_node_block_list", effective.fp16_node_block_list),
                                                  ("int8_nodes_to_exclude", effective.int8_nodes_to_exclude)) if v}
                inputs = self._inputs(model)
            except Exception:  # noqa: BLE001 - the model failed to resolve: the error is the record's reason
                pass
        runtime: dict[str, Any] = {}
        if self.variant is not None:
            try:
                runtime = self.workspace.runtime_for(self.variant).as_dict(self.variant.provider.short)
            except Exception:  # noqa: BLE001 - the model failed to resolve: the error is the record's reason
                runtime = {}
        calibration: dict[str, Any] = {}
        if self.variant is not None and self.variant.precision.value == "int8-static":
            try:  # which sentences calibrated the static INT8 artifact (disjoint from the judged ones)
                texts = self.workspace.corpora.calibration_texts(self.workspace.model(self.variant.model))
                calibration = {"method": options.settings.int8_calibration, "sentences": len(texts),
                               "first_index": options.settings.samples, "judged_sentences": options.settings.samples,
                               "sha256": _sha256_lines(texts)}
            except Exception:  # noqa: BLE001 - the model failed to resolve: the error is the record's reason
                calibration = {}
        return {"opset": options.settings.opset, "exporter": exporter, "runtime": runtime,
                **({"int8_calibration": calibration} if calibration else {}),
                "exporter_explicit": options.explicit_exporter,
                "batch_size": options.settings.batch_size, "num_samples": inputs.pop("sentences", options.settings.samples),
                "fp16_op_block_list": list(options.settings.fp16_block_list), "int8_per_channel": per_channel,
                "int8_per_channel_forced": options.settings.int8_per_channel,
                "int8_reduce_range": self.workspace.runtimes.reduce_range(per_channel).enabled,
                "int8_reduce_range_why": self.workspace.runtimes.reduce_range(per_channel).why,
                "options": recordable(options.given),
                "external_data": options.settings.external_data,
                **fixes, **inputs}

    def _inputs(self, model: LoadedModel) -> dict[str, Any]:
        """What the case's inputs really were: the sentences used (``num_samples`` is that count,
        never the request when the corpus is shorter), the corpus, and the token limit with how
        many sentences it cut."""
        corpus = self.workspace.corpora.corpus(model)
        texts = self.workspace.texts(model)
        return {"sentences": len(texts), "samples_requested": self.workspace.options.settings.samples,
                "corpus": corpus.name, "corpus_sha256": corpus.sha256, "corpus_size": len(corpus),
                "max_input_tokens": input_token_limit(model), "truncated_sentences": truncated_count(model, texts)}

    def payload(self) -> dict[str, Any]:
        model_sha = None
        if self.variant is not None:
            try:
                model_sha = self.workspace.model(self.variant.model).weights_sha256
            except Exception:  # noqa: BLE001 - the model itself failed to load: the error is the record's reason
                model_sha = None
        threads = self.workspace.options.settings
        return {
            "model_sha256": model_sha,
            "metrics": self.metrics,
            "thresholds": self.thresholds,
            "artifacts": self.artifacts,
            "data": self.data,
            "perf": self.perf,
            "exception": self.exception,
            "env": environment(threads.threads, threads.inter_threads),
            "settings": self._settings(),
            "started": self.started,
            "phases": self.clock.as_dict(),
            "memory": self.memory,
            **({"decision": self.decision.as_dict()} if self.decision is not None else {}),
        }


class RecordCollector:
    """Controller side: one record per harness case, appended when its teardown report arrives.

    Holds its session's run id (``run_id``): every record this collector writes carries it, and
    a second session in the same process (a nested pytest run) has its own collector and id."""

    def __init__(self, writer: ResultsWriter, run_id: str | None = None) -> None:
        self.writer = writer
        self.run_id = run_id or new_run_id()
        self.records: list[Record] = []
        self._state: dict[str, dict[str, Any]] = {}
        #: node ids the session is expected to run (harness cases serially; every collected
        #: test under xdist, whose controller sees ids only) and those whose teardown came in
        self.expected: list[str] = []
        self.finished: set[str] = set()
        #: whether any report of a harness case arrived (the session is a harness run)
        self.harness_seen = False
        #: node id -> the case's identity, for the expected cases collection described
        self.identities: dict[str, Mapping[str, Any]] = {}
        #: the filesystem filled up: the first write that failed (``DiskFull``), and the ids of
        #: the cases whose record could not be written
        self.disk_full: DiskFull | None = None
        self.lost: list[str] = []
        #: a record a team's ``harness_record`` hook was refused for (``harness.core.hooks``): the run stops
        self.refused: UsageError | None = None
        self.session: pytest.Session | None = None
        #: suite files that fail to collect become ``error`` records (harness sessions only: the
        #: plugin is installed in every pytest session, whose own collection errors are pytest's)
        self.record_collection_errors = False

    def expect(self, nodeids: list[str], cases: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """The cases this session will run (called once collection is known; idempotent);
        ``cases``: who they are (node id -> ``harness_case``), so a case that never ran can still
        be shown in its model's row."""
        known = set(self.expected)
        self.expected += [n for n in nodeids if n not in known]
        self.identities.update(cases or {})

    def not_run(self) -> list[str]:
        """Expected cases that never finished (not started, or cut off while running)."""
        return [n for n in self.expected if n not in self.finished]

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A suite file that could not be collected (a syntax error, a failing import, pytest's
        "import file mismatch") in a harness session: an ``error`` record naming the file and the
        first line of why, so results.jsonl, summary.md and junit.xml say so instead of holding
        nothing (before: exit 1, no run directory at all)."""
        if not report.failed or not self.record_collection_errors:
            return
        text = str(getattr(report, "longreprtext", "") or report.longrepr or "collection failed")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        why = next((line[2:].strip() for line in reversed(lines) if line.startswith("E ")), None) or \
            (lines[0] if lines else "collection failed")  # the exception's own line, else pytest's first
        nodeid = report.nodeid or "<collection>"
        if nodeid in self.finished:  # pytest-xdist: every worker reports the same file
            return
        self.finished.add(nodeid)
        suite = nodeid.split("::")[0]
        record = compose(case_id=suite, nodeid=nodeid, run_id=self.run_id, identity=CaseIdentity(suite=suite),
                         payload={}, verdict="error", reason=f"could not collect {suite}: {why}", duration_s=0.0,
                         settings={})
        with signals_held():
            self._store(record)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """pytest hook (the collector is registered as a plugin of its session)."""
        self.on_report(report)

    def on_report(self, report: pytest.TestReport) -> None:
        state = self._state.setdefault(report.nodeid, {"props": {}, "phases": {}, "duration": 0.0})
        for key, value in getattr(report, "user_properties", []) or []:
            state["props"][key] = value
        if "harness_case" in state["props"]:
            self.harness_seen = True
        state["phases"][report.when] = (report.outcome, _short(report))
        state["duration"] += float(getattr(report, "duration", 0.0) or 0.0)
        if report.when == CRASH_PHASE:
            with signals_held():  # finished, on disk and counted: all three or none (signals_held)
                self._crashed(report.nodeid, self._state.pop(report.nodeid), _short(report))
            return
        if report.when == "teardown":
            record = self.compose(report.nodeid, state)
            with signals_held():
                self._state.pop(report.nodeid, None)
                self.finished.add(report.nodeid)
                if record is not None:
                    self._note_full_disk((state["props"].get("harness_record") or {}).get("exception"))
                    self._store(record)

    def _store(self, record: Record) -> None:
        """The one write of a finished case's record: appended, or counted as lost on a full disk
        (which stops the session: later cases could not be recorded either)."""
        try:
            self.writer.append(record)
        except DiskFull as exc:
            self.disk_full = self.disk_full or exc
            self.lost.append(record.id)
        except UsageError as exc:  # a hook changed what the harness computed: no record, and the run stops
            self.refused = self.refused or exc
            self.lost.append(record.id)
            if self.session is not None:
                self.session.shouldstop = str(exc)
        else:
            self.records.append(record)
        self.disk_full = self.disk_full or self.writer.full
        if self.disk_full is not None and self.session is not None:
            self.session.shouldstop = f"no space left on device ({self.disk_full.path})"

    def _crashed(self, nodeid: str, state: dict[str, Any], message: str) -> None:
        """pytest-xdist lost the worker running this case (a native crash: a runtime's segfault or
        abort) and replaced it: the case gets an ``error`` record saying so, the run goes on. A
        serial run has no one left to write it; `-n 1` is the isolation (docs/reliability.md)."""
        self.finished.add(nodeid)
        case = state["props"].get("harness_case") or self.identities.get(nodeid)
        if case is None:
            return
        reason = (f"crashed: the test process died running this case ({message or 'worker crashed'}); a native "
                  "fault in the runtime, its traceback is in the run's stderr")
        record = compose(case_id=nodeid.split("::")[-1], nodeid=nodeid, run_id=self.run_id,
                         identity=CaseIdentity.from_dict(case), payload={}, verdict="error", reason=reason,
                         duration_s=state["duration"], settings={}, rerun=rerun_command(nodeid, case, {}))
        self._store(record)

    def _note_full_disk(self, exception: dict[str, Any] | None) -> None:
        """A case that failed on ENOSPC writing its side files (a dump, a bundle): the disk is full."""
        exception = exception or {}
        if self.disk_full is None and exception.get("errno") in (errno.ENOSPC, errno.EDQUOT):
            self.disk_full = DiskFull(exception.get("filename") or self.writer.out_dir)

    def compose(self, nodeid: str, state: dict[str, Any]) -> Record | None:
        case = state["props"].get("harness_case")
        if case is None:
            return None
        payload = state["props"].get("harness_record") or {}
        verdict, reason = _verdict(state["phases"], payload.get("exception"), payload.get("decision"))
        if verdict == "skip" and state["props"].get("harness_not_run"):
            verdict = "not-run"  # asked for explicitly and could not run here: not green
        settings = payload.get("settings", {})
        return compose(case_id=nodeid.split("::")[-1], nodeid=nodeid, run_id=self.run_id,
                       identity=CaseIdentity.from_dict(case), payload=payload, verdict=verdict, reason=reason,
                       duration_s=state["duration"], settings=settings,
                       rerun=rerun_command(nodeid, case, settings))


#: the ``when`` of the report pytest-xdist makes for a case whose worker died (``handle_crashitem``)
CRASH_PHASE = "???"


def _sha256_lines(texts: list[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()


def _short(report: pytest.TestReport) -> str:
    if report.passed:
        return ""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (file, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)
    return str(longrepr).strip().splitlines()[-1] if longrepr else ""


def _verdict(phases: dict[str, tuple[str, str]], exception: dict[str, Any] | None,
             decided: Mapping[str, Any] | None = None) -> tuple[Verdict, str]:
    """The case's verdict: the engine's decision when the case reached one (``Case.decision``) and the
    test's outcome agrees with it; pytest's phases only for what the engine never saw (a skip, a
    broken setup or teardown, a user's own assertion, a test that judged nothing through the engine)."""
    setup = phases.get("setup", ("passed", ""))
    if setup[0] == "skipped":
        return "skip", setup[1]
    if setup[0] == "failed":
        return "error", f"setup: {setup[1]}"
    outcome, message = phases.get("call", ("passed", ""))
    if outcome == "skipped":
        return "skip", message
    decision = _decision(decided)
    if decision is not None and decision.failed:
        return decision.verdict, decision.reason
    if outcome == "failed":
        if exception and exception.get("gate"):
            return "fail", exception.get("message", message)
        detail = f"{exception['type']}: {exception['message']}" if exception else message
        return "error", detail.splitlines()[0] if detail else "error"
    teardown = phases.get("teardown", ("passed", ""))
    if teardown[0] == "failed":
        return "error", f"teardown: {teardown[1]}"
    return (decision.verdict, decision.reason) if decision is not None else ("pass", "")


def _decision(raw: Mapping[str, Any] | None) -> Decision | None:
    """The engine's decision as the payload carries it (a dict: xdist ships payloads as JSON-like values)."""
    if not raw:
        return None

    return Decision(as_verdict(raw.get("verdict")), str(raw.get("reason") or ""))


def case_dir_name(case_id: str) -> str:
    """The directory name of a case's side files under ``<run dir>/cases/`` (also how the HTML
    report finds them)."""
    return "".join(c if c.isalnum() or c in "-_.[]" else "_" for c in case_id) or "case"

