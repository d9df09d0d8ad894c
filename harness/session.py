"""One pytest session's shared run state: what the plugin, its feature plugins and the ``harness
run`` front end read and hand over.

The stash keys, the run's options (built on first need, or handed whole by a front end), the
workspace, and whether a session asked for the harness at all live here, below every module that
starts or reads a session: the plugin (``harness.plugin``) fills them, the feature plugins
(``harness.plugins``) and ``harness run`` (``Handoff``) use them, and none of those import each
other's names.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.core import RunOptions, UsageError, Variant

if TYPE_CHECKING:  # pragma: no cover
    from harness.case.collector import RecordCollector
    from harness.judge.workspace import Workspace

OPTIONS = pytest.StashKey[RunOptions]()
WORKSPACE: pytest.StashKey[Workspace] = pytest.StashKey()
COLLECTOR: pytest.StashKey[RecordCollector] = pytest.StashKey()
RUN_DIR = pytest.StashKey[Path]()
#: the run's performance settings (``PerfSettings``), None when ``--perf`` was not asked: set by the
#: perf plugin, read by the terminal summary (which prints each model's variant table after a perf run)
PERF = pytest.StashKey[Any]()
#: the run's options came whole from a front end (``harness run``) that already checked and warned about them
HANDED = pytest.StashKey[bool]()


class Handoff:
    """A front end's resolved options, handed whole to this session (``pytest.main(argv, plugins=[Handoff(options)])``).

    The controller then neither rebuilds the options from pytest's flags nor checks (and warns about)
    again what the front end checked; pytest-xdist workers, other processes, still build theirs from
    the same flags (the front end passes them for that)."""

    def __init__(self, options: RunOptions) -> None:
        self.options = options

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[OPTIONS] = self.options
        config.stash[HANDED] = True


def asked_for(config: pytest.Config) -> bool:
    """Whether this session explicitly configures the harness (options or a config file)."""
    from harness.settings.config_file import find_config
    from harness.settings.options import Group, in_group

    if any(config.getoption(o.pytest_dest) not in (None, False) for o in in_group(Group.RUN)
           if o.on_cli and o.name not in ("out", "cache")):
        return True
    try:
        return find_config(None, Path(str(config.rootpath))) is not None
    except UsageError:
        return True  # a broken config: let run_options report it


def run_options(config: pytest.Config) -> RunOptions:
    """The run's options, built on first need: the plugin is installed in environments whose
    test sessions never touch a model, and building options imports the zoo (torch)."""
    if OPTIONS not in config.stash:
        from harness.settings.options import pytest_values
        from harness.settings.resolve import build_options

        try:
            options = build_options(pytest_values(config), rootdir=Path(str(config.rootpath)))
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        options.command = command_of(config)  # an xdist worker of `harness run` spells flags as its controller
        config.stash[OPTIONS] = options
    return config.stash[OPTIONS]


def command_of(config: pytest.Config) -> str:
    """The command whose flags this session's user typed (``run`` under ``harness run``, '' for
    pytest), without building the options: handed with them, or to a worker by its controller."""
    handed = config.stash.get(OPTIONS, None)
    if handed is not None:
        return handed.command
    worker = getattr(config, "workerinput", None)
    return str(worker.get("harness_command", "")) if worker else ""


def workspace(config: pytest.Config) -> Workspace:
    """The session's workspace (models, references, backends), made on first need."""
    if WORKSPACE not in config.stash:
        from harness.judge.workspace import Workspace

        config.stash[WORKSPACE] = Workspace(run_options(config))
    return config.stash[WORKSPACE]


def variant_of(item: pytest.Item | None) -> Variant | None:
    """The variant a collected case runs (None: not a harness case)."""
    callspec = getattr(item, "callspec", None)
    variant = callspec.params.get("variant") if callspec is not None else None
    return variant if isinstance(variant, Variant) else None
