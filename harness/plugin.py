"""The pytest plugin (entry point ``pytest11: harness``): options, the variant matrix,
the ``harness`` fixture, one results record per case, and the end-of-run summary.

Records are written by the controlling process from test reports (``user_properties``
travel with reports under pytest-xdist), so ``pytest -n 2`` and a serial run produce the
same set of records, and a case that is skipped or errors during setup still gets one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generator, Iterator

import pytest

from harness.core import RunOptions, UsageError, Variant
from harness.plugins import discover as _discover_feature_plugins
from harness.results import SCHEMA, ResultsWriter

if TYPE_CHECKING:  # pragma: no cover
    from harness.judge.workspace import Workspace
    from harness.results.collector import Case, RecordCollector

#: feature plugins (perf, generation, config files...), one module each in harness/plugins/
pytest_plugins = _discover_feature_plugins()

OPTIONS = pytest.StashKey[RunOptions]()
WORKSPACE: pytest.StashKey[Workspace] = pytest.StashKey()
COLLECTOR: pytest.StashKey[RecordCollector] = pytest.StashKey()
EXCEPTION = pytest.StashKey[dict[str, Any]]()
RUN_DIR = pytest.StashKey[Path]()
GUARD = pytest.StashKey[Any]()
INTERRUPT = pytest.StashKey[int]()  # the signal that stopped the session


def pytest_addoption(parser: pytest.Parser) -> None:
    from harness.settings.options import Group, add_pytest_options

    add_pytest_options(parser, Group.RUN, title="harness", description="model deployment regression gate")


def _options(config: pytest.Config) -> RunOptions:
    from harness.settings.options import Group, pytest_values
    from harness.settings.resolve import build_options

    return build_options(pytest_values(config, Group.RUN), rootdir=Path(str(config.rootpath)))


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
    return Path(str(config.rootpath)) / "reports" / time.strftime("run-%Y%m%d-%H%M%S")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "harness(families=None, generates=False, where=None, accepts=None): restrict "
                            "a suite's matrix to model families, models with a generation head, models where "
                            "where(spec) is true, variants where accepts(spec, variant) is true")
    cache = config.getoption("harness_cache")
    if cache:
        os.environ["HARNESS_CACHE"] = str(cache)
    if _asked_for(config):  # validate now: a typo is a usage error before anything runs
        run_options(config)
    config.stash[RUN_DIR] = out_dir(config)
    if not hasattr(config, "workerinput") and (_out_given(config) or _asked_for(config)):
        _check_out(config)  # an unwritable run dir is one line now, not an INTERNALERROR after the work
    from harness.core.interrupts import SignalGuard

    guard = SignalGuard()  # SIGTERM/SIGHUP end the run like Ctrl-C: summary says INTERRUPTED
    guard.install()
    config.stash[GUARD] = guard
    if not hasattr(config, "workerinput"):  # the controller (or a serial run) writes records
        from harness.results.collector import RecordCollector

        collector = RecordCollector(ResultsWriter(config.stash[RUN_DIR]))
        config.stash[COLLECTOR] = collector
        # registered per session (its pytest_runtest_logreport sees this session's reports only,
        # also when pytest runs nested in-process)
        config.pluginmanager.register(collector, f"harness-records-{id(config)}")
    config.pluginmanager.register(_InterruptListener(config), f"harness-interrupts-{id(config)}")


def _out_given(config: pytest.Config) -> bool:
    return bool(config.getoption("harness_out") or os.environ.get("HARNESS_OUT"))


def _check_out(config: pytest.Config) -> None:
    from harness.core.writable import ensure_writable_dir

    option = "--harness-out" if config.getoption("harness_out") else \
        "HARNESS_OUT" if os.environ.get("HARNESS_OUT") else "run directory"
    try:
        ensure_writable_dir(config.stash[RUN_DIR], option)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_unconfigure(config: pytest.Config) -> None:
    guard = config.stash.get(GUARD, None)
    if guard is not None:
        guard.uninstall()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: every worker writes its side files into the controller's run dir."""
    node.workerinput["harness_out"] = str(node.config.stash[RUN_DIR])


def _asked_for(config: pytest.Config) -> bool:
    """Whether this session explicitly configures the harness (options or a config file)."""
    from harness.settings.options import Group, in_group

    if any(config.getoption(o.pytest_dest) not in (None, False) for o in in_group(Group.RUN)
           if o.on_cli and o.name not in ("out", "cache")):
        return True
    from harness.settings.config_file import find_config

    try:
        return find_config(None, Path(str(config.rootpath))) is not None
    except UsageError:
        return True  # a broken config: let run_options report it


def run_options(config: pytest.Config) -> RunOptions:
    """The run's options, built on first need: the plugin is installed in environments whose
    test sessions never touch a model, and building options imports the zoo (torch)."""
    if OPTIONS not in config.stash:
        try:
            options = _options(config)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.stash[OPTIONS] = options
    return config.stash[OPTIONS]


def workspace(config: pytest.Config) -> Workspace:
    if WORKSPACE not in config.stash:
        from harness.judge.workspace import Workspace

        config.stash[WORKSPACE] = Workspace(run_options(config))
    return config.stash[WORKSPACE]


def matrix(options: RunOptions, *, families: set[str] | None = None, generates: bool = False,
           where: Any = None, accepts: Any = None) -> list[Variant]:
    """The variants of a suite: models filtered by family, generation head and ``where(spec)``;
    variants filtered by ``accepts(spec, variant)``."""
    from harness.zoo.base import ModelCatalog

    catalog = options.catalog or ModelCatalog()
    variants = []
    for model in options.models:
        spec = catalog.resolve(model)
        if families and spec.family not in families:
            continue
        if generates and not spec.generates:
            continue
        if where is not None and not where(spec):
            continue
        for precision in options.precisions:
            for provider in options.providers:
                variant = Variant(spec.name if not Path(model).is_dir() else model, precision, provider)
                if accepts is None or accepts(spec, variant):
                    variants.append(variant)
    return variants


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
    if os.sep in variant.model:
        return f"{Path(variant.model).name}-{variant.precision.value}-{variant.provider.short}"
    return variant.id


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.Function) or not hasattr(item, "callspec"):  # only parametrized tests
            continue
        variant = item.callspec.params.get("variant")
        if isinstance(variant, Variant):
            from harness.results import CaseIdentity

            suite = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
            identity = CaseIdentity.of_variant(variant, suite, display_id=_display_id(variant))
            item.user_properties.append(("harness_case", identity.as_dict()))  # a dict: xdist ships it


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                               ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    if call.when == "call" and call.excinfo is not None:
        from harness.results.checks import GateFailure

        exc = call.excinfo.value
        item.stash[EXCEPTION] = {"type": type(exc).__name__, "gate": isinstance(exc, GateFailure),
                                 "skip": call.excinfo.errisinstance(pytest.skip.Exception),
                                 "message": str(exc).strip()}
    return (yield)


@pytest.fixture
def harness(request: pytest.FixtureRequest) -> Iterator[Case]:
    """The current case: its workspace, variant and record. Skips unavailable variants."""
    from harness.results.collector import Case

    ws = workspace(request.config)
    variant = getattr(request.node, "callspec", None) and request.node.callspec.params.get("variant")
    if isinstance(variant, Variant):
        reason = ws.unavailable_reason(variant)
        if reason:
            pytest.skip(reason)
    case = Case(ws, variant if isinstance(variant, Variant) else None, request.config.stash[RUN_DIR],
                request.node.name)
    from harness.core import phases

    token = phases.start(case.clock)  # the layers doing the work mark their phase on this clock
    try:
        yield case
    finally:
        phases.stop(token)
    case.exception = request.node.stash.get(EXCEPTION, None)
    request.node.user_properties.append(("harness_record", case.payload()))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Serial run: the harness cases the session will run (an interrupted run counts the rest)."""
    collector = session.config.stash.get(COLLECTOR, None)
    if collector is not None:
        collector.expect([item.nodeid for item in session.items
                          if any(key == "harness_case" for key, _ in item.user_properties)])


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
        from harness.core.interrupts import signal_of

        signum = signal_of(excinfo.value)
        if signum is not None:
            self.config.stash[INTERRUPT] = signum


def interruption(config: pytest.Config) -> Any:
    """The run's ``Interruption`` when a signal stopped a harness session, else None."""
    collector = config.stash.get(COLLECTOR, None)
    signum = config.stash.get(INTERRUPT, None)
    if collector is None or signum is None:
        return None
    if not (collector.harness_seen or collector.expected or _out_given(config) or _asked_for(config)):
        return None  # not a harness session (the plugin is installed everywhere): pytest's own status
    from harness.core.interrupts import Interruption

    return Interruption(signum, tuple(collector.not_run()), len(collector.expected))


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
        if collector is not None and (collector.records or stopped):
            from harness.report.summary import write_summary

            write_summary(collector.writer.out_dir, collector.records, interruption=stopped)
        if stopped is not None:
            session.exitstatus = stopped.exit_code


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    collector = config.stash.get(COLLECTOR, None)
    stopped = interruption(config)
    if collector is None or not (collector.records or stopped):
        return
    from harness.report.terminal import render_terminal

    durations = config.getoption("harness_durations", None)
    render_terminal(collector.records, terminalreporter, collector.writer.out_dir, interruption=stopped,
                    durations=None if durations is None else int(durations))


__all__ = ["SCHEMA", "harness", "matrix"]
