"""The pytest plugin (entry point ``pytest11: harness``): options, the variant matrix,
the ``harness`` fixture, one results record per case, and the end-of-run summary.

Records are written by the controlling process from test reports (``user_properties``
travel with reports under pytest-xdist), so ``pytest -n 2`` and a serial run produce the
same set of records, and a case that is skipped or errors during setup still gets one.
"""

from __future__ import annotations

# first: a SIGTERM while pytest is still loading plugins and importing is kept, not fatal
from harness.core import early as _early

_early.install()

import os  # noqa: E402
import pkgutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any, Generator, Iterator  # noqa: E402

import pytest  # noqa: E402

from harness.core import RunOptions, UsageError, Variant, hooks, phases  # noqa: E402
from harness.core.admission import cap_process, limits_from, set_limits  # noqa: E402
from harness.core.interrupts import Interrupted, Interruption, SignalGuard, exit_code, signal_of, write_marker  # noqa: E402
from harness.core.rss import PeakRss  # noqa: E402
from harness.core.rundirs import default_run_dir  # noqa: E402
from harness.core.runtime import axis_suffix  # noqa: E402
from harness.core.writable import (  # noqa: E402
    OUT_FLOOR_BYTES,
    DiskFull,
    ensure_free_space,
    ensure_writable_dir,
    ensure_writable_file,
    no_space,
)
from harness.report.github import append_step_summary  # noqa: E402
from harness.report.junit import JUNIT_FILE, write_junit  # noqa: E402
from harness.report.summary import render_summary, status_line, write_interrupted_run, write_summary  # noqa: E402
from harness.results import SCHEMA, CaseIdentity, ResultsWriter  # noqa: E402
from harness.results.checks import GateFailure  # noqa: E402
from harness.results.notrun import not_run_records  # noqa: E402
from harness.results.record import run_green  # noqa: E402
from harness.results.store import RESERVE_BYTES  # noqa: E402
from harness.session import (  # noqa: E402
    COLLECTOR,
    HANDED,
    OPTIONS,
    PERF,
    RUN_DIR,
    asked_for,
    command_of,
    run_options,
    variant_of,
    workspace,
)
from harness.settings.matrix import matrix  # noqa: E402
from harness.suites import suites_dir  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    from harness.case.collector import Case, RecordCollector



def _feature_plugins() -> list[str]:
    """The feature plugins (perf, generation, sharding, progress...), one module each in harness/plugins/,
    found by file name: pytest imports them by these names, so this module imports none of them (they
    sit above it: they read its run state)."""
    folder = Path(__file__).resolve().parent / "plugins"
    return sorted(f"harness.plugins.{info.name}" for info in pkgutil.iter_modules([str(folder)])
                  if not info.name.startswith("_"))


pytest_plugins = _feature_plugins()

EXCEPTION = pytest.StashKey[dict[str, Any]]()
GUARD = pytest.StashKey[Any]()
STARTED = pytest.StashKey[float]()  # when this session's configuration began (time.time())
INTERRUPT = pytest.StashKey[int]()  # the signal that stopped the session
MEMORY_CAP = pytest.StashKey[Any]()  # puts this process's data-memory limit back (--max-memory)
NEXT_ITEM = pytest.StashKey[Any]()  # the item this process runs after this one (None: last, or not known)
RSS = pytest.StashKey[Any]()  # this process's per-case peak-RSS tracker (harness.core.rss.PeakRss)
def pytest_addoption(parser: pytest.Parser) -> None:
    from harness.settings.options import Group, add_pytest_options

    add_pytest_options(parser, Group.RUN, title="harness", description="model deployment regression gate")


def out_dir(config: pytest.Config) -> Path:
    worker = getattr(config, "workerinput", None)
    if worker and worker.get("harness_out"):
        return Path(worker["harness_out"])
    given = config.getoption("harness_out")
    if given:
        return Path(given)
    env = os.environ.get("HARNESS_OUT")
    if env:
        return Path(env)
    return default_run_dir("run", Path(str(config.rootpath)))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "harness(families=None, generates=False, where=None, accepts=None): restrict "
                            "a suite's matrix to model families, models with a generation head, models where "
                            "where(spec) is true, variants where accepts(spec, variant) is true")
    guard = SignalGuard()  # first: SIGTERM/SIGHUP end the run like Ctrl-C, also during the checks below
    guard.install(replaceable=(_early.record,))
    config.stash[GUARD] = guard
    config.stash[STARTED] = time.time()
    if _early.pending() is not None and guard.received is None:  # came in while pytest was starting
        guard.received = _early.pending()
        _early.clear()
        raise Interrupted(guard.received or 2)
    if not hasattr(config, "workerinput"):
        from harness.settings.options import spaced_list_value

        spaced = spaced_list_value(config.invocation_params.args,
                                   lambda word: (config.invocation_params.dir / word.split("::")[0]).exists())
        if spaced:
            raise pytest.UsageError(spaced)
    cache = config.getoption("harness_cache")
    if cache:
        os.environ["HARNESS_CACHE"] = str(cache)
    if asked_for(config):  # validate now: a typo is a usage error before anything runs
        options = run_options(config)
        set_limits(limits_from(options.settings))  # workers load models and files too
        if options.settings.max_memory:
            config.stash[MEMORY_CAP] = cap_process(limits_from(options.settings).max_memory or 0)
        if options.settings.builtin_suites:
            _add_builtin_suites(config)
        if not hasattr(config, "workerinput") and not config.stash.get(HANDED, False):
            _preflight(options)
    config.stash[RUN_DIR] = out_dir(config)
    if not hasattr(config, "workerinput") and (_out_given(config) or asked_for(config)):
        _check_out(config)  # an unwritable run dir is one line now, not an INTERNALERROR after the work
    if not hasattr(config, "workerinput"):  # the controller (or a serial run) writes records
        from harness.case.collector import RecordCollector

        collector = RecordCollector(ResultsWriter(config.stash[RUN_DIR], reserve_bytes=RESERVE_BYTES))
        collector.record_collection_errors = _out_given(config) or asked_for(config)
        config.stash[COLLECTOR] = collector
        # registered per session (its pytest_runtest_logreport sees this session's reports only,
        # also when pytest runs nested in-process)
        config.pluginmanager.register(collector, f"harness-records-{id(config)}")
    config.pluginmanager.register(_InterruptListener(config), f"harness-interrupts-{id(config)}")


def pytest_plugin_registered(plugin: object) -> None:
    """A ``conftest.py`` or pytest plugin of this session that implements the harness's extension
    hooks (``harness.core.hooks``: machine info, the record before it is written) serves them."""
    if hooks.implements(plugin):
        hooks.register(plugin)


def _unregister_hooks(config: pytest.Config) -> None:
    """This session's hook implementations end with it (a nested in-process session keeps its own)."""
    for plugin in config.pluginmanager.get_plugins():
        if hooks.implements(plugin):
            hooks.unregister(plugin)


def _add_builtin_suites(config: pytest.Config) -> None:
    """``--harness-builtin-suites`` / ``builtin_suites = true``: the installed suites join this
    session's collection (once: pytest-xdist workers receive the controller's arguments)."""
    target = suites_dir()
    if not any(Path(arg.split("::")[0]).resolve() == target for arg in config.args):
        config.args.append(str(target))


def _preflight(options: RunOptions) -> None:
    """Users' model directories pass the loader's safety and completeness refusals before any
    case starts: a refused directory is one usage line (exit 2 from ``harness run``, 4 from
    pytest), as from ``harness check``, not an error record with a traceback per case."""
    from harness.settings.options import option
    from harness.settings.resolve import preflight

    try:
        preflight(options, lambda name: option(name).pytest_flag)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    """How the run's names resolved, when that needs saying (a zoo name shadowing a local
    directory): shown by plain pytest; ``harness run`` prints the same notes itself."""
    options = config.stash.get(OPTIONS, None)
    return [f"harness: note: {note}" for note in options.notes] if options is not None else []


def _out_given(config: pytest.Config) -> bool:
    return bool(config.getoption("harness_out") or os.environ.get("HARNESS_OUT"))


def _check_out(config: pytest.Config) -> None:
    option = "--harness-out" if config.getoption("harness_out") else \
        "HARNESS_OUT" if os.environ.get("HARNESS_OUT") else "run directory"
    try:
        ensure_writable_dir(config.stash[RUN_DIR], option)
        ensure_free_space(config.stash[RUN_DIR], OUT_FLOOR_BYTES, option, "the run directory (records, reports, "
                          "repro bundles)")
        junit = config.getoption("harness_junit_xml", None)
        if junit:
            ensure_writable_file(Path(junit), "--harness-junit-xml")
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_unconfigure(config: pytest.Config) -> None:
    _unregister_hooks(config)
    restore = config.stash.get(MEMORY_CAP, None)
    if restore is not None:  # an in-process run (a notebook, harness run) gives its caller the old limit
        restore()
    guard = config.stash.get(GUARD, None)
    if guard is not None:
        if guard.received is not None and not hasattr(config, "workerinput") and _harness_session(config):
            # stopped while pytest configured itself (options, model intake): no session finished to say
            # so, but the run directory still does (0 cases run)
            try:
                write_interrupted_run(config.stash.get(RUN_DIR, None) or out_dir(config), guard.received,
                                      config.stash.get(STARTED, 0.0))
            except OSError:
                pass
            session = config.pluginmanager.get_plugin("session")  # registered before configuring began
            if session is not None:
                session.exitstatus = exit_code(guard.received)
        guard.uninstall()
        _early.restore()


def _harness_session(config: pytest.Config) -> bool:
    try:
        return _out_given(config) or asked_for(config)
    except Exception:  # noqa: BLE001 - interrupted half-way through configuring: say nothing, not fail again
        return False


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: every worker writes its side files into the controller's run dir."""
    node.workerinput["harness_out"] = str(node.config.stash[RUN_DIR])
    node.workerinput["harness_command"] = command_of(node.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "variant" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("harness")
    kwargs = marker.kwargs if marker else {}
    families = set(kwargs["families"]) if kwargs.get("families") else None
    variants = matrix(run_options(metafunc.config), families=families, generates=bool(kwargs.get("generates")),
                      where=kwargs.get("where"), accepts=kwargs.get("accepts"))
    if not variants:  # say why, instead of pytest's "got empty parameter set"
        rules = ", ".join(f"{k}={getattr(v, '__name__', v)}" for k, v in kwargs.items() if v) or "none"
        reason = f"no variant of this run fits this suite (models x precisions x providers; suite filters: {rules})"
        metafunc.parametrize("variant", [pytest.param(None, marks=pytest.mark.skip(reason=reason))], ids=["none"])
        return
    metafunc.parametrize("variant", variants, ids=[_display_id(v) for v in variants])


def _display_id(variant: Variant) -> str:
    """A local directory's case is named after its last path component (spaces as ``_``, so
    ``-k`` can select it), then the runtime axes as in ``Variant.id``."""
    from harness.zoo.base import is_path

    if is_path(variant.model):
        name = Path(variant.model).expanduser().resolve().name.replace(" ", "_")
        return f"{name}-{variant.precision.value}-{variant.provider.short}{axis_suffix(variant.runtime)}"
    return variant.id


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.Function) or not hasattr(item, "callspec"):  # only parametrized tests
            continue
        variant = item.callspec.params.get("variant")
        if isinstance(variant, Variant):
            module = item.module.__name__ if item.module else ""
            identity = CaseIdentity.of_variant(variant, module.rsplit(".", 1)[-1], display_id=_display_id(variant))
            # a dict: xdist ships it; the module says whether the suite is a built-in one (its node id
            # path is relative to whichever rootdir the session had, so it cannot tell)
            item.user_properties.append(("harness_case", {**identity.as_dict(), "suite_module": module}))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                               ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    if call.when == "call" and call.excinfo is not None:
        exc = call.excinfo.value
        item.stash[EXCEPTION] = {"type": type(exc).__name__, "gate": isinstance(exc, GateFailure),
                                 "skip": call.excinfo.errisinstance(pytest.skip.Exception),
                                 "message": str(exc).strip()}
        if no_space(exc):  # the disk is full: the next case would fail the same way, and its record too
            item.stash[EXCEPTION].update(errno=getattr(exc, "errno", None), filename=str(getattr(exc, "filename", "")))
            item.session.shouldstop = f"no space left on device ({getattr(exc, 'filename', '') or exc})"
    return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Remember which case runs next in this process (pytest-xdist workers know their next item
    too): a large model's PyTorch module stays loaded between two cases that both use it."""
    item.stash[NEXT_ITEM] = nextitem


def _rss_tracker(config: pytest.Config) -> Any:
    if RSS not in config.stash:
        config.stash[RSS] = PeakRss()
    return config.stash[RSS]


@pytest.fixture
def harness(request: pytest.FixtureRequest) -> Iterator[Case]:
    """The current case: its workspace, variant and record. Skips unavailable variants."""
    from harness.case.collector import Case

    ws = workspace(request.config)
    variant = getattr(request.node, "callspec", None) and request.node.callspec.params.get("variant")
    if isinstance(variant, Variant):
        reason = ws.runtimes.unavailable_reason(variant)
        if reason:
            if ws.options.explicit_variants and not ws.options.settings.allow_skip:
                # asked for by name (CLI or config): the record says not-run and the run fails
                request.node.user_properties.append(("harness_not_run", True))
                reason += " (requested explicitly; --allow-skip lets the run pass without it)"
            pytest.skip(reason)
    case = Case(ws, variant if isinstance(variant, Variant) else None, request.config.stash[RUN_DIR],
                request.node.name)
    tracker = _rss_tracker(request.config)
    tracker.start()  # the case's own peak RSS (record field ``memory``)
    token = phases.start(case.clock)  # the layers doing the work mark their phase on this clock
    try:
        yield case
    finally:
        phases.stop(token)
        if isinstance(variant, Variant):  # free what the next case does not need (--release-models)
            ws.memory.end_case(variant, variant_of(request.node.stash.get(NEXT_ITEM, None)))
        case.memory = tracker.stop()
    case.exception = request.node.stash.get(EXCEPTION, None)
    request.node.user_properties.append(("harness_record", case.payload()))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Serial run: the harness cases the session will run (an interrupted run counts the rest)."""
    collector = session.config.stash.get(COLLECTOR, None)
    if collector is not None:
        cases = {item.nodeid: value for item in session.items for key, value in item.user_properties
                 if key == "harness_case" and isinstance(value, dict)}
        collector.expect(list(cases), cases)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """pytest-xdist: the controller collects nothing itself; each worker reports the same ids."""
    collector = node.config.stash.get(COLLECTOR, None)
    if collector is not None:
        collector.expect(list(ids))


class _InterruptListener:
    """Remembers which signal stopped *this* session (``pytest_keyboard_interrupt`` receives no
    config): registered per session like the record collector, so nested in-process sessions
    each hear their own interrupt and nothing lives at module level."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        signum = signal_of(excinfo.value)
        if signum is not None:
            self.config.stash[INTERRUPT] = signum


def interruption(config: pytest.Config) -> Any:
    """The run's ``Interruption`` when a signal stopped a harness session, else None."""
    collector = config.stash.get(COLLECTOR, None)
    signum = config.stash.get(INTERRUPT, None)
    if collector is None or signum is None:
        return None
    if not (collector.harness_seen or collector.expected or _out_given(config) or asked_for(config)):
        return None  # not a harness session (the plugin is installed everywhere): pytest's own status
    not_run = tuple(collector.not_run())
    return Interruption(signum, not_run, len(collector.expected),
                        {n: collector.identities[n] for n in not_run if n in collector.identities})


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session) -> Any:
    """summary.md, then — after every other finisher has seen pytest's INTERRUPTED (the perf gate
    says "not run") — the status 128 + the signal: distinct from pass/fail/usage (130, 143, 129)."""
    config = session.config
    try:
        return (yield)
    finally:
        collector = config.stash.get(COLLECTOR, None)
        stopped = interruption(config)
        if collector is not None and (collector.records or stopped or collector.disk_full):
            try:
                _write_reports(config, collector, stopped)
            except OSError as exc:
                if not no_space(exc):
                    raise
                collector.disk_full = collector.disk_full or DiskFull(getattr(exc, "filename", None) or
                                                                      collector.writer.out_dir)
            if stopped is None and session.exitstatus == 0 and _not_green(collector.records):
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if collector is not None:
            collector.writer.release()
        if collector is not None and collector.disk_full is not None:
            print(f"harness: error: {disk_full_problem(collector)}", file=sys.stderr)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR  # `harness run`: 2, as for an unwritable --out
        if collector is not None and collector.refused is not None:
            print(f"harness: error: {collector.refused}", file=sys.stderr)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR  # `harness run`: 2
        if stopped is not None:
            session.exitstatus = stopped.exit_code


def disk_full_problem(collector: RecordCollector) -> str:
    """One line: where the disk filled up, what is intact and what was lost."""
    full = collector.disk_full
    assert full is not None, "asked only once the disk filled up"
    lost = collector.lost
    not_run = [n for n in collector.not_run() if n.split("::")[-1] not in lost]
    named = f" ({', '.join(lost[:3])}{', ...' if len(lost) > 3 else ''})" if lost else ""
    return (f"{full.path}: {full.reason.lower()}; the {len(collector.records)} record(s) in "
            f"{collector.writer.path} are intact, {len(lost)} record(s) lost{named}, {len(not_run)} case(s) not run")


def _not_green(records: list[Any]) -> bool:
    """A requested variant that did not run (``not-run``), or a run that judged nothing: pytest
    itself saw only skips and would exit 0, but a gate must not read as passed."""
    return not run_green(r.verdict for r in records)


def _write_reports(config: pytest.Config, collector: RecordCollector, stopped: Any) -> None:
    """Beside results.jsonl: summary.md, junit.xml (and a copy at ``--junit-xml``), and the
    GitHub job summary when ``$GITHUB_STEP_SUMMARY`` is set."""
    out = collector.writer.out_dir
    write_marker(out, stopped)  # so a later `harness report` of this directory says INTERRUPTED too
    problem = disk_full_problem(collector) if collector.disk_full is not None else None
    write_summary(out, collector.records, interruption=stopped, problem=problem)
    if problem:
        return  # nothing more is written to a full disk
    # every selected case is a testcase: the ones a signal stopped are <error>s, not absent
    junit_records = collector.records + not_run_records(stopped, collector.run_id)
    write_junit(out / JUNIT_FILE, junit_records)
    extra = config.getoption("harness_junit_xml", None)
    if extra:
        write_junit(Path(extra), junit_records)
    append_step_summary(render_summary(collector.records, interruption=stopped), out)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    collector = config.stash.get(COLLECTOR, None)
    stopped = interruption(config)
    if collector is None or not (collector.records or stopped):
        return
    from harness.report.terminal import render_terminal

    durations = config.getoption("harness_durations", None)

    render_terminal(collector.records, terminalreporter, collector.writer.out_dir, interruption=stopped,
                    durations=None if durations is None else int(durations),
                    perf=config.stash.get(PERF, None) is not None)
    if stopped is None and _not_green(collector.records):
        terminalreporter.write_line(f"harness: {status_line(collector.records)}", red=True, bold=True)


__all__ = ["SCHEMA", "harness"]
