"""``harness run``: run the gating suites over the matrix; results under ``--out``."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from harness.cli.suite_imports import forget_imported, forget_stale, import_mode_args
from harness.core import RunOptions, UsageError
from harness.core.interrupts import exit_code as signal_exit
from harness.core.rundirs import default_run_dir
from harness.core.writable import OUT_FLOOR_BYTES, ensure_free_space, ensure_writable_dir, ensure_writable_file
from harness.report.summary import write_interrupted_run
from harness.results import read_records
from harness.results.record import run_green
from harness.settings.relations import check_relations
from harness.shard.plan import ShardSpec, empty_shard, load_durations
from harness.suites import suites_dir as builtin


def suites_dir() -> Path:
    """The suites a run collects when ``--suites`` is not given: ``$HARNESS_SUITES``, else the
    built-in suites installed with the package (the same from any directory: a ``suites/``
    folder of the working directory is never picked up by itself)."""
    env = os.environ.get("HARNESS_SUITES")
    if env:
        return Path(env)
    return builtin()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run the gating suites (results.jsonl + summary.md)",
                       description="Run the suites over model x precision x provider and write DIR/results.jsonl "
                                   "and DIR/summary.md. Exit 0 all passed/skipped, 1 any failed, 2 bad usage, "
                                   "128+N stopped by signal N (130 SIGINT/Ctrl-C, 143 SIGTERM, 129 SIGHUP; "
                                   "finished records kept, summary.md says INTERRUPTED).")
    from harness.settings.commands import add_command_options

    add_command_options(p, "run")
    p.set_defaults(func=run, out_dir_of=run_dir)


def session_options(args: argparse.Namespace, out: Path) -> tuple[RunOptions, list[str]]:
    """The run's options, resolved and checked once here (one line and exit 2 for a mistake), and
    pytest's command line; the plugin receives the options whole (``harness.session.Handoff``)."""
    from harness.settings.options import cli_values, option, pytest_argv, pytest_form_values
    from harness.settings.resolve import build_options, preflight

    values = cli_values(args)
    values.pop("out", None)
    # ``--pytest-args --harness-gen-samples 8``: pytest's own form of an option reaches the session
    # only through these options (handed whole), so it is folded in; it comes last on pytest's
    # command line, so it wins there too
    given = {**values, **pytest_form_values(args.pytest_args or [])}
    given.pop("out", None)
    # Validate before starting pytest so a typo is one line and exit 2, not a pytest usage dump.
    options = build_options(given, rootdir=Path.cwd())
    options.command = "run"  # messages from inside the session name this command's flags
    if values.get("shard"):  # a bad K/N or durations source is one line before pytest starts
        ShardSpec.parse(values["shard"])
        if values.get("shard_durations"):
            load_durations(values["shard_durations"])
    check_relations(values, lambda name: option(name).flag)  # inert or contradicting options: the table's rows
    suites = list(args.suites or [suites_dir()])
    for path in suites:
        if not path.exists():
            raise UsageError(f"--suites: {path} does not exist")
    preflight(options)
    from harness.plugins.perf import check_gate_values
    # checked here with this command's flags: the same checks in the plugin would name pytest's
    if values.get("junit_xml"):
        ensure_writable_file(values["junit_xml"], "--junit-xml")
    check_gate_values(values, lambda name: option(name).flag)
    if given.get("gen_max_new_tokens"):  # more than a model's positions: one line now, not an error per case
        from harness.zoo.base import ModelCatalog
        from harness.zoo.consistency import check_generation_request

        catalog = options.catalog or ModelCatalog()
        check_generation_request([catalog.resolve(m) for m in options.models], given["gen_max_new_tokens"],
                                 option("gen_max_new_tokens").flag)
    notes = list(options.notes)
    if not args.suites and Path("suites").is_dir() and Path("suites").resolve() != suites[0].resolve():
        notes.append("./suites is not collected (the built-in suites are); --suites suites runs it, "
                     "--suites suites --builtin-suites runs both")
    for note in notes:
        print(f"harness: note: {note}", file=sys.stderr)
    if "config" not in values and options.given.get("config"):  # found in this directory: pytest's
        values["config"] = options.given["config"]  # rootdir is the suites' one, so name it
    # the harness is imported before pytest starts (this command), so pytest cannot assert-rewrite it and
    # warns once per run about it: noise for the user, nothing to act on
    # hypothesis's pytest plugin (autoloaded wherever hypothesis is installed) costs ~2 s at session
    # end to print statistics the harness's suites never produce
    extra = list(args.pytest_args or [])

    argv = [*map(str, suites), *_cache_args(extra), *_benchmark_args(extra), *import_mode_args(suites, extra),
            "-p", "no:hypothesispytest", "-q", "-rs",
            "-W", "ignore::pytest.PytestAssertRewriteWarning",
            f"--harness-out={out}", *pytest_argv(values)]
    if args.keyword:
        argv += ["-k", args.keyword]
    if args.workers:
        argv += ["-n", str(args.workers)]
    return options, argv + extra


#: pytest-benchmark's end-of-run columns under ``harness run``: its default ten columns of a
#: ``--perf`` run wrap on a terminal and push the harness's own summary off screen; the full
#: statistics (percentiles with intervals, every sample) are in the run's records and report
BENCHMARK_COLUMNS = "median,iqr,ops,rounds"


def _benchmark_args(pytest_args: list[str]) -> list[str]:
    """pytest-benchmark's table narrowed to a few columns and short names (about 90 characters
    wide), unless ``--pytest-args`` chose its own columns; nothing when the plugin is absent."""
    if importlib.util.find_spec("pytest_benchmark") is None or any(a.startswith("--benchmark-") for a in pytest_args):
        return []
    return [f"--benchmark-columns={BENCHMARK_COLUMNS}", "--benchmark-name=short"]


def _cache_args(pytest_args: list[str]) -> list[str]:
    """pytest's cache (what ``--lf``/``--ff`` rerun) lives in the working directory: the built-in
    suites' rootdir is inside the installed package, where a ``.pytest_cache`` does not belong (it
    was switched off instead, so ``--pytest-args --lf`` had nothing to read). An explicit
    ``-p no:cacheprovider`` or ``cache_dir`` in ``--pytest-args`` wins."""
    if any("cache_dir" in a or a == "no:cacheprovider" for a in pytest_args):
        return []
    return ["-o", f"cache_dir={Path.cwd() / '.pytest_cache'}"]


def run_dir(args: argparse.Namespace) -> Path:
    """The run directory (``--out``, else ``reports/run-<time>``), fixed once: the command line
    knows it before anything slow starts, so a signal at any point can still be written there."""
    if args.out is None:
        args.out = default_run_dir("run")
    return Path(args.out)


def run(args: argparse.Namespace) -> int:
    import pytest

    out = run_dir(args)
    ensure_writable_dir(out, "--out")  # before any model is built: results must have somewhere to go
    ensure_free_space(out, OUT_FLOOR_BYTES, "--out", "the run directory (records, reports, repro bundles)")
    options, argv = session_options(args, out)
    from harness.session import Handoff

    suites = list(args.suites or [])
    forget_stale(suites)
    before = set(sys.modules)
    try:
        code = pytest.main(argv, plugins=[Handoff(options)])  # not rebuilt, re-checked or re-warned by the plugin
    finally:
        forget_imported(suites, before)  # a later run in this process imports its own same-named files
    _link_latest(out)
    guard = getattr(args, "signal_guard", None)
    if guard is not None and guard.received is not None:  # stopped by a signal, maybe before the session
        write_interrupted_run(out, guard.received, getattr(args, "started", 0.0))
        return signal_exit(guard.received)
    return exit_code(int(code), out)


def _link_latest(out: Path) -> None:
    """reports/latest -> the run just finished (best effort; some filesystems have no symlinks)."""
    if not (out / "results.jsonl").exists():
        return
    link = out.parent / "latest"
    try:
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(out.name, target_is_directory=True)
    except OSError:
        pass


def exit_code(pytest_code: int, out: Path) -> int:
    """pytest's exit status -> the harness contract (0 / 1 / 2, or 128+N when signal N stopped
    the run: the plugin sets that status, and it passes through unchanged)."""
    if pytest_code >= 128:  # interrupted by a signal; summary.md and the terminal say INTERRUPTED
        return pytest_code
    if pytest_code == 4:  # usage error (pytest already printed it)
        return 2
    empty = empty_shard(out) if pytest_code in (0, 5) else None
    if empty is not None:  # a split with more shards than it could fill: this part is done, and empty
        print(f"harness: {empty.describe()}; wrote an empty {out / 'results.jsonl'}", file=sys.stderr)
        return 0
    if pytest_code == 5:
        print(f"harness: error: no cases selected (check --models/--precisions/--providers/-k); nothing in {out}",
              file=sys.stderr)
        return 2
    try:
        records = read_records(out)
    except ValueError:
        records = []
    if pytest_code == 1 or not run_green(str(r.get("verdict")) for r in records):
        return 1  # a failing case, or a gate that checked nothing (the terminal summary says so)
    if pytest_code in (2, 3):  # interrupted / internal error: keep what finished, report failure
        return 1
    return 0
