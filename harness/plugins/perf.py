"""Performance options and the baseline gate, as a pytest plugin.

The performance suites are opt-in (``--harness-perf``): without it a suite module skips
itself as a whole at collection (``if not perf_requested(): pytest.skip(skip_reason(config),
allow_module_level=True)``), with one line of reason and no records, so a default run is
neither slower nor cluttered. The baseline options imply
``--harness-perf`` (a baseline of a run without perf records would be empty).

At session end, on the controller, after every record is written: ``--harness-baseline-compare``
judges the run against a saved baseline (``harness.gate``; latency paired where the blessed
artifacts are at hand, ``harness.gate.retime``, as ``baseline compare --perf``), prints the
table and fails the session (exit 1) only on a confirmed, non-advisory regression; ``--harness-baseline-save``
then stores the run as a baseline, but only when the session passed, so a regressed run
never becomes the reference by accident.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from harness.core import UsageError
from harness.core.rundirs import BASELINE_STORE
from harness.core.writable import ensure_writable_dir
from harness.gate.baseline import (
    DEFAULT_STORE,
    accuracy_records,
    load_baseline,
    load_run,
    perf_records,
    save_baseline,
    validate_name,
)
from harness.metrics.margins import parse_cli_margin
from harness.report.console import reporter_console
from harness.results.rundir import read_results
from harness.session import HANDED, PERF, RUN_DIR, command_of, run_options
from harness.settings.relations import check_relations


def skip_reason(config: pytest.Config) -> str:
    """Why a performance suite skipped, with the flag as this session's user types it."""
    from harness.settings.spelling import user_flag

    return f"performance suite not requested (use {user_flag('perf', command_of(config))})"

GATE = pytest.StashKey["GateRequest"]()
OUTCOME = pytest.StashKey["GateOutcome"]()

@dataclass(frozen=True)
class GateRequest:
    save: str | None = None
    compare: str | None = None
    store: Path = BASELINE_STORE
    force: bool = False
    force_env: bool = False
    thresholds: tuple[str, ...] = ()
    margins: tuple[str, ...] = ()  # --harness-accuracy-margin
    allow_missing: bool = False  # --harness-allow-missing: a partial comparison passes (and says so)

    @property
    def active(self) -> bool:
        return bool(self.save or self.compare)


@dataclass
class GateOutcome:
    comparison: Any = None
    accuracy: Any = None  # AccuracyComparison against the same baseline
    saved: Any = None
    messages: list[str] = field(default_factory=list)
    error: str | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    from harness.settings.options import Group, add_pytest_options

    add_pytest_options(parser, Group.PERF, title="harness-perf", description="model deployment gate: performance")
    add_pytest_options(parser, Group.GATE, title="harness-perf", description="model deployment gate: performance")


def _settings(values: dict[str, Any]) -> Any:
    """PerfSettings from the ``perf_*`` options given (the rest keep the table's defaults)."""
    from harness.perf.measure import PerfSettings

    return PerfSettings.from_options(values)


def _gate_request(values: dict[str, Any]) -> GateRequest:
    store, save, compare = values.get("baseline_store"), values.get("baseline_save"), values.get("baseline_compare")
    if store:
        directory = Path(store)
    elif save or compare:  # the gate (scipy) is only imported when a baseline is in play
        directory = DEFAULT_STORE
    else:
        directory = BASELINE_STORE
    return GateRequest(save=save, compare=compare, store=directory, force=bool(values.get("baseline_force")),
                       force_env=bool(values.get("baseline_force_env")),
                       thresholds=tuple(values.get("baseline_threshold") or ()),
                       margins=tuple(values.get("accuracy_margin") or ()),
                       allow_missing=bool(values.get("allow_missing")))


def _check_gate_request(req: GateRequest, spell: Callable[[str], str] | None = None) -> None:
    """Fail before any test runs: a typo found after an hour of measuring wastes the hour.
    ``spell``: an option name -> the flag the user typed (pytest's ``--harness-...`` by default;
    ``harness run`` checks the same request with its own flags before pytest starts)."""
    from harness.gate.compare import parse_threshold
    from harness.settings.options import option

    flag = spell or (lambda name: option(name).pytest_flag)
    for text in req.thresholds:
        parse_threshold(text)
    for text in req.margins:
        parse_cli_margin(text, flag("accuracy_margin"))
    if req.compare:
        load_baseline(req.compare, req.store)
    if req.save:
        validate_name(req.save)
        ensure_writable_dir(req.store, flag("baseline_store"))
        if (req.store / req.save).exists() and not req.force and req.save != req.compare:
            raise UsageError(f"{flag('baseline_save')}: baseline {req.save!r} already exists in {req.store}; "
                             f"pass {flag('baseline_force')} to replace it")


def check_gate_values(values: dict[str, Any], spell: Callable[[str], str]) -> None:
    """The baseline-gate options of ``values`` (option name -> value), checked as the plugin
    checks them, with ``spell``'s flags in the messages."""
    req = _gate_request(values)
    if req.active:
        _check_gate_request(req, spell)


def pytest_configure(config: pytest.Config) -> None:
    from harness.settings.options import pytest_values

    try:
        values = pytest_values(config)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.addinivalue_line("markers", "harness_perf_suite: a performance suite module, collected only with "
                            "--harness-perf (or a baseline option)")
    if not hasattr(config, "workerinput"):
        from harness.settings.options import option
        quiet = config.stash.get(HANDED, False)  # the front end that handed the options said it already
        try:
            check_relations(values, lambda name: option(name).pytest_flag, warn=(lambda t: None) if quiet else None)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    req = _gate_request(values)
    config.stash[GATE] = req
    wanted = bool(values.get("perf")) or req.active
    try:
        config.stash[PERF] = _settings(values) if wanted else None
        if req.active and not hasattr(config, "workerinput"):
            _check_gate_request(req)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    workers = getattr(config.option, "numprocesses", None)
    if wanted and workers not in (None, 0) and not hasattr(config, "workerinput"):
        config.issue_config_time_warning(pytest.PytestWarning(
            f"performance suites under pytest-xdist (-n {workers}): workers share the CPU cores, "
            "so latencies measure the contention too; run them serially"), stacklevel=2)


def pytest_report_header(config: pytest.Config) -> str | None:
    settings = config.stash.get(PERF, None)
    if settings is None:
        return None
    s = settings.as_dict()
    return (f"harness perf: {s['samples']} samples after {s['warmup']} warmup, batch sizes {s['batch_sizes']}, "
            f"seq lens {s['seq_lens']}, {s['repeats']} fresh process(es), {s['new_tokens']} new tokens")


def perf_requested(config: pytest.Config) -> bool:
    """Whether this session runs the performance suites."""
    return config.stash.get(PERF, None) is not None


@pytest.hookimpl(tryfirst=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    """A suite module marked ``pytestmark = pytest.mark.harness_perf_suite`` is skipped as a
    whole, with one line of reason and no per-case records, when performance was not asked
    for: a default run is neither slower nor cluttered. Decided here, per session, instead of
    by the module at import (which has no session to ask and needed a module-global)."""
    if not isinstance(collector, pytest.Module) or perf_requested(collector.config):
        return None
    try:
        marks = getattr(collector.obj, "pytestmark", [])  # importing the module: its errors are reported below
        marked = any(getattr(m, "name", None) == "harness_perf_suite" for m in (marks if isinstance(marks, list)
                                                                                else [marks]))
    except Exception:  # noqa: BLE001 - an import error: the regular collection reports it
        return None
    if not marked:
        return None
    reason = f"Skipped: {skip_reason(collector.config)}"
    return pytest.CollectReport(collector.nodeid, "skipped", (str(collector.path), 0, reason), [])


@pytest.fixture
def perf_settings(request: pytest.FixtureRequest) -> Any:
    """The run's PerfSettings (skips when performance was not requested)."""
    settings = request.config.stash.get(PERF, None)
    if settings is None:
        pytest.skip(skip_reason(request.config))
    return settings


@pytest.fixture
def benchmark_or_none(request: pytest.FixtureRequest) -> Any:
    """pytest-benchmark's fixture when it is installed and not skipped, else None (the
    harness loop then times every metric; ``--benchmark-skip`` must not skip perf cases)."""
    try:
        return request.getfixturevalue("benchmark")
    except (pytest.FixtureLookupError, pytest.skip.Exception):
        return None


# --------------------------------------------------------------------------- the gate at session end


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    req = config.stash.get(GATE, None)
    if req is None or not req.active or hasattr(config, "workerinput"):
        return
    outcome = GateOutcome()
    config.stash[OUTCOME] = outcome
    if session.exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        outcome.messages.append(f"baseline gate not run: the session ended with {pytest.ExitCode(session.exitstatus).name}")
        return

    run_dir = config.stash[RUN_DIR]
    try:
        if req.compare:
            outcome.comparison = _compare(req, run_dir)
            outcome.accuracy = _compare_accuracy(req, run_dir, config)
            if any(c is not None and c.exit_code for c in (outcome.comparison, outcome.accuracy)):
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if req.save:
            if session.exitstatus != pytest.ExitCode.OK:
                outcome.messages.append(f"baseline {req.save!r} not saved: the session failed")
            else:
                outcome.saved = save_baseline(run_dir, req.save, req.store, force=req.force or req.save == req.compare)
    except UsageError as exc:
        outcome.error = str(exc)
        if session.exitstatus == pytest.ExitCode.OK:  # a failed session keeps its own status
            session.exitstatus = pytest.ExitCode.USAGE_ERROR


def _compare(req: GateRequest, run_dir: Path) -> Any:
    from harness.gate.compare import compare_runs, parse_threshold

    baseline = load_baseline(req.compare, req.store)  # type: ignore[arg-type]
    if not perf_records(baseline.records) and accuracy_records(baseline.records):
        return None  # an accuracy-only baseline (a run without --perf was blessed): nothing to time
    from harness.gate.retime import pair
    policies = [parse_threshold(t) for t in req.thresholds]
    recorded = compare_runs(baseline.records, load_run(run_dir), policies, force_env=True)  # judged in pair()
    # paired where the blessed artifacts are at hand (kept, or in the cache by key): re-timed here
    comparison = pair(recorded, baseline, read_results(run_dir), policies, force_env=req.force_env)
    comparison.allow_missing = req.allow_missing
    (run_dir / "perf-compare.json").write_text(comparison.to_json() + "\n", encoding="utf-8")
    (run_dir / "perf-compare.md").write_text(comparison.to_markdown(), encoding="utf-8")
    return comparison


def _compare_accuracy(req: GateRequest, run_dir: Path, config: pytest.Config) -> Any:
    """The accuracy gate against the same baseline (``harness.gate.accuracy``), margins from the
    run's config file and ``--harness-accuracy-margin``; None when the baseline blessed no accuracy."""
    from harness.gate.accuracy import compare_accuracy, margin_table
    baseline = load_baseline(req.compare, req.store)  # type: ignore[arg-type]
    if not accuracy_records(baseline.records):
        return None
    config_path = run_options(config).given.get("config")
    margins = margin_table(config_path, req.margins, rootdir=config.rootpath)
    comparison = compare_accuracy(baseline.records, read_results(run_dir), margins)
    comparison.allow_missing = req.allow_missing
    (run_dir / "accuracy-compare.json").write_text(comparison.to_json() + "\n", encoding="utf-8")
    (run_dir / "accuracy-compare.md").write_text(comparison.to_markdown(), encoding="utf-8")
    return comparison


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    outcome = config.stash.get(OUTCOME, None)
    if outcome is None:
        return
    terminalreporter.write_sep("=", "harness performance gate")
    if outcome.comparison is not None or outcome.accuracy is not None:
        console, buffer = reporter_console(terminalreporter)  # room for the reasons, even in CI logs
        for comparison in (outcome.comparison, outcome.accuracy):
            if comparison is not None:
                comparison.render_table(console)
        terminalreporter.write(buffer.getvalue())
    if outcome.saved is not None:
        blessed = load_baseline(outcome.saved.name, outcome.saved.path.parent).records
        terminalreporter.write_line(f"saved baseline {outcome.saved.name!r}: {len(perf_records(blessed))} perf record(s), "
                                    f"{len(accuracy_records(blessed))} accuracy record(s) -> {outcome.saved.path}")
    for message in outcome.messages:
        terminalreporter.write_line(message, yellow=True)
    if outcome.error:
        terminalreporter.write_line(f"harness: error: {outcome.error}", red=True)
