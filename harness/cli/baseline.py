"""``harness baseline save|compare|env|list``: bless a run's performance and accuracy, then gate on it.

Exit codes follow the rest of the CLI: 0 ok, 1 a gating performance or accuracy regression,
2 a usage error (bad run directory, unknown baseline, environment mismatch for timings).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.rundirs import HISTORY_DB_HELP, history_db
from harness.gate.baseline import (
    DEFAULT_STORE,
    BaselineError,
    accuracy_records,
    list_baselines,
    load_baseline,
    load_run,
    perf_records,
    save_baseline,
)
from harness.results import Record
from harness.results.rundir import read_results

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from harness.gate.baseline import Baseline
    from harness.gate.compare import Comparison, MetricPolicy


def _console() -> Console:
    from harness.report.console import cli_console

    return cli_console()


def _write(path: str, text: str) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")


def cmd_save(args: argparse.Namespace) -> int:
    from harness.core.writable import ensure_writable_dir

    ensure_writable_dir(args.store, "--store")  # one line, exit 2, before the run is read
    runs = list(args.run_dir)
    if args.history_last:
        from harness.gate.multirun import history_run_dirs

        runs += [str(d) for d in history_run_dirs(args.history_db, args.history_last)]
    if not runs:
        raise BaselineError("baseline save: give RUN_DIR(s) or --history-last N")
    info = save_baseline(runs[-1], args.name, args.store, force=args.force, older_runs=runs[:-1],
                         keep_artifacts=args.keep_artifacts)
    blessed = load_baseline(info.name, args.store).records
    source = runs[-1] if len(runs) == 1 else f"{len(runs)} runs (aggregated)"
    print(f"saved baseline {info.name!r}: {len(perf_records(blessed))} perf record(s), "
          f"{len(accuracy_records(blessed))} accuracy record(s) from {source} -> {info.path}")
    if info.kept_files:
        from harness.core.units import binary_bytes

        print(f"kept {info.kept_files} artifact file(s) ({binary_bytes(info.kept_bytes)}) in {info.path / 'artifacts'}: "
              "`baseline compare --perf` re-times them beside the candidate")
    elif info.artifact_files:
        print(f"recorded the cache keys of {info.artifact_files} timed artifact file(s): `baseline compare --perf` "
              "re-times them while they are in the cache (--keep-artifacts keeps a copy)")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.core.writable import ensure_writable_file

    for option in ("json", "markdown"):
        if getattr(args, option):
            ensure_writable_file(getattr(args, option), f"--{option}")
    from harness.gate.accuracy import compare_accuracy, margin_table
    from harness.gate.compare import parse_threshold  # scipy: only when comparing

    margins = margin_table(args.config, args.accuracy_margin or (), rootdir=Path.cwd())
    baseline = load_baseline(args.name, args.store)
    policies = [parse_threshold(t) for t in args.threshold]
    # Perf is judged when the baseline blessed timings (the candidate must then have them too);
    # accuracy when it blessed accuracy metrics. A baseline of a default run is accuracy only.
    comparison = None
    if perf_records(baseline.records) or not accuracy_records(baseline.records):
        comparison = _perf_comparison(args, baseline, policies)
    accuracy = None
    if accuracy_records(baseline.records):
        accuracy = compare_accuracy(baseline.records, read_results(args.run_dir), margins)
        accuracy.allow_missing = args.allow_missing
    console = _console()
    differences = _differences(baseline, args.run_dir)
    console.print("differences from the baseline:")
    for line in differences:
        console.print(f"  {line}", markup=False, highlight=False)
    if comparison is not None:
        comparison.render_table(console)
    if accuracy is not None:
        accuracy.render_table(console, everything=args.all_rows)
    if args.json:
        doc: dict[str, Any] = (comparison.as_dict() if comparison is not None
                               else {"schema": "harness.perf-compare/1", "exit_code": 0, "rows": []})
        doc["differences"] = differences
        if accuracy is not None:
            doc["accuracy"] = accuracy.as_dict()
            doc["exit_code"] = max(int(doc.get("exit_code", 0)), accuracy.exit_code)
        _write(args.json, json.dumps(doc, indent=2) + "\n")
    if args.markdown:
        listed = "### Differences from the baseline\n\n" + "".join(f"- {line}\n" for line in differences)
        parts = [listed]
        if comparison is not None:  # its verdict line first, then what differs, then its tables
            verdict, _, tables = comparison.to_markdown().partition("\n\n")
            parts = [verdict + "\n", listed, tables]
        if accuracy is not None:
            parts.append("### Accuracy\n\n" + accuracy.to_markdown(everything=args.all_rows))
        _write(args.markdown, "\n".join(parts))
    return max(comparison.exit_code if comparison is not None else 0, accuracy.exit_code if accuracy else 0)


def _differences(baseline: Baseline, run_dir: Path) -> list[str]:
    """Tolerance, configuration, runtime-setting, version and environment differences between the
    blessed run and the candidate (``harness.gate.causes``), listed before any verdict."""
    from harness.compare.diff import pair_cases
    from harness.gate.causes import difference_lines, run_differences

    blessed = {r.id: r for r in map(Record.coerce, baseline.records)}
    candidate = {r.id: r for r in read_results(run_dir)}
    return difference_lines(run_differences(pair_cases(blessed, candidate)))


def _perf_comparison(args: argparse.Namespace, baseline: Baseline, policies: list[MetricPolicy]) -> Comparison:
    """The recorded comparison, with ``--perf`` the latency re-timed paired where the blessed and
    the candidate's artifacts are at hand (``harness.gate.retime``); its mode says which."""
    from harness.gate.compare import compare_runs

    candidate = load_run(args.run_dir)
    if not args.perf:
        comparison = compare_runs(baseline.records, candidate, policies, force_env=args.force_env)
        comparison.mode_reason = ("unpaired: recorded runs compared (`baseline compare --perf` re-times the "
                                  "blessed artifacts and the candidate's interleaved)")
    else:
        from harness.cli.perf_compare import check_pairing
        from harness.gate.retime import Pairing, pair

        check_pairing(args)
        blessed_env: tuple[str, ...] = ()
        if args.baseline_env:  # "" (what `baseline env` prints when nothing differs): this environment
            from harness.gate.envpair import environment_command

            blessed_env = tuple(environment_command(args.baseline_env, "--baseline-env"))
        recorded = compare_runs(baseline.records, candidate, policies, force_env=True)  # judged in pair()
        comparison = pair(recorded, baseline, read_results(args.run_dir), policies,
                          Pairing(args.pairs, args.block, args.warmup, baseline_env=blessed_env),
                          force_env=args.force_env, progress=lambda line: print(line, flush=True))
    comparison.allow_missing = args.allow_missing
    return comparison


def cmd_env(args: argparse.Namespace) -> int:
    """Print the interpreter of the blessed environment rebuilt under ``--dir`` when the baseline's
    runtime versions differ from this environment's, nothing when they match (``--baseline-env ""``
    then pairs in this process); what differs goes to stderr."""
    import sys

    from harness.gate.blessedenv import delta, rebuild

    baseline = load_baseline(args.name, args.store)
    recorded = next((dict(r.env["versions"]) for r in baseline.records if isinstance(r.env.get("versions"), dict)), {})
    if not recorded:
        raise BaselineError(f"baseline {args.name!r} recorded no library versions (saved by an older harness)")
    found = delta(recorded)
    if found.python:
        print(f"note: {found.describe()}", file=sys.stderr)
    if not found.pins:
        same = ", ".join(f"{k} {v}" for k, v in sorted(found.here.items()))
        print(f"baseline {args.name!r}: the timing packages here are the recorded ones ({same}): nothing to rebuild",
              file=sys.stderr)
        return 0
    print(f"baseline {args.name!r}: {found.describe()}; rebuilding the blessed environment in {args.dir}",
          file=sys.stderr)
    print(rebuild(Path(args.dir), found.pins))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    found = list_baselines(args.store)
    if not found:
        print(f"no baselines in {args.store}")
        return 0
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"baselines in {args.store}"))
    for column in ("name", "created", "records", "fingerprint", "harness", "source"):
        table.add_column(column)
    for b in found:  # Text, not markup: a path may contain "[...]"
        table.add_row(*(Text(c) for c in (b.name, b.created, str(b.records), b.fingerprint or "-", b.harness_version, b.source)))
    _console().print(table)
    return 0


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=str(DEFAULT_STORE), metavar="DIR",
                        help=f"where baselines live (default: {DEFAULT_STORE})")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``baseline`` with its three subcommands to the top-level parser."""
    parser = subparsers.add_parser("baseline", help="save performance baselines and compare runs against them",
                                   description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="baseline_command", metavar="{save,compare,env,list}", required=True)

    save = actions.add_parser("save", help="store RUN_DIR's perf and accuracy records as baseline NAME "
                                           "(several runs: perf aggregated)")
    save.add_argument("run_dir", metavar="RUN_DIR", nargs="*",
                      help="run directories, oldest first; several make a multi-run baseline (docs/perf-gate.md)")
    save.add_argument("--history-last", type=int, default=0, metavar="N",
                      help="aggregate the newest N runs of the history database (after any RUN_DIRs)")
    save.add_argument("--history-db", default=history_db(), metavar="PATH|URL",
                      help=f"history database for --history-last ({HISTORY_DB_HELP})")
    save.add_argument("--name", required=True, help="baseline name: letters, digits, '.', '_' or '-'")
    _store_option(save)
    save.add_argument("--force", action="store_true", help="replace an existing baseline of the same name")
    save.add_argument("--keep-artifacts", action="store_true",
                      help="copy the timed artifacts into the baseline, so `compare --perf` can re-time them "
                           "after the cache is gone (size printed; checked for room first)")
    save.set_defaults(func=cmd_save)

    compare = actions.add_parser("compare", help="judge RUN_DIR against baseline NAME (exit 1 on a regression)")
    compare.add_argument("run_dir", metavar="RUN_DIR")
    compare.add_argument("--name", required=True, help="the baseline to compare with")
    _store_option(compare)
    compare.add_argument("--force-env", action="store_true",
                         help="compare even though the environment fingerprints differ")
    compare.add_argument("--threshold", action="append", default=[], metavar="METRIC=FRACTION",
                         help="override an effect threshold, e.g. p50=8%% (repeatable; see docs/perf-gate.md)")
    compare.add_argument("--perf", action="store_true",
                         help="re-time the blessed artifacts and the candidate's interleaved in this job (paired) "
                              "where both are at hand; the rest unpaired (the output says which and why)")
    from harness.cli.perf_compare import add_pairing_arguments
    from harness.gate.onnxpair import DEFAULT_BLOCK, DEFAULT_PAIRS

    add_pairing_arguments(compare, pairs=DEFAULT_PAIRS, block=DEFAULT_BLOCK)
    compare.add_argument("--baseline-env", default="", metavar="PYTHON",
                         help="with --perf: the blessed environment's interpreter (`harness baseline env` prints "
                              "it): the blessed artifacts are re-timed in it, the candidate's in this one")
    from harness.settings.options import add_cli_arguments

    add_cli_arguments(compare, names=("accuracy_margin", "config", "allow_missing"))
    compare.add_argument("--all-rows", action="store_true",
                         help="show accuracy metrics that passed too (JSON always has every row)")
    compare.add_argument("--json", metavar="OUT", help="also write the comparison as JSON")
    compare.add_argument("--markdown", metavar="OUT", help="also write the comparison as a Markdown table")
    compare.set_defaults(func=cmd_compare)

    env = actions.add_parser("env", help="rebuild the blessed environment from the baseline's recorded runtime "
                                         "versions; print its interpreter (nothing when they match here)")
    env.add_argument("--name", required=True, help="the baseline whose environment to rebuild")
    _store_option(env)
    env.add_argument("--dir", default=".harness-blessed-env", metavar="DIR",
                     help="where to lay it out (reused when already there; default .harness-blessed-env)")
    env.set_defaults(func=cmd_env)

    listing = actions.add_parser("list", help="show saved baselines")
    _store_option(listing)
    listing.set_defaults(func=cmd_list)
