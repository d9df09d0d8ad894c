"""``harness baseline save|compare|env|list``: bless a run's performance and accuracy, then gate on it.

Exit codes follow the rest of the CLI: 0 ok, 1 a gating performance or accuracy regression,
2 a usage error (bad run directory, unknown baseline, environment mismatch for timings).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.rundirs import history_db
from harness.core.units import binary_bytes
from harness.core.writable import ensure_writable_dir, ensure_writable_file
from harness.gate.baseline import (
    BaselineError,
    accuracy_records,
    list_baselines,
    load_baseline,
    load_run,
    perf_records,
    save_baseline,
)
from harness.gate.blessedenv import delta, rebuild
from harness.gate.multirun import history_run_dirs
from harness.report.console import cli_console
from harness.results import Record
from harness.results.rundir import read_results

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from harness.gate.baseline import Baseline
    from harness.gate.compare import Comparison, MetricPolicy


def _console() -> Console:
    return cli_console()


def _write(path: str, text: str) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")


def cmd_save(args: argparse.Namespace) -> int:
    ensure_writable_dir(args.baseline_store, "--baseline-store")  # one line, exit 2, before the run is read
    runs = list(args.run_dir)
    if args.history_last:
        runs += [str(d) for d in history_run_dirs(history_db(args.history_db), args.history_last)]
    if not runs:
        raise BaselineError("baseline save: give RUN_DIR(s) or --history-last N")
    info = save_baseline(runs[-1], args.baseline_name, args.baseline_store, force=args.baseline_force, older_runs=runs[:-1],
                         keep_artifacts=args.keep_artifacts)
    blessed = load_baseline(info.name, args.baseline_store).records
    source = runs[-1] if len(runs) == 1 else f"{len(runs)} runs (aggregated)"
    print(f"saved baseline {info.name!r}: {len(perf_records(blessed))} perf record(s), "
          f"{len(accuracy_records(blessed))} accuracy record(s) from {source} -> {info.path}")
    if info.kept_files:
        print(f"kept {info.kept_files} artifact file(s) ({binary_bytes(info.kept_bytes)}) in {info.path / 'artifacts'}: "
              "`baseline compare --perf` re-times them beside the candidate")
    elif info.artifact_files:
        print(f"recorded the cache keys of {info.artifact_files} timed artifact file(s): `baseline compare --perf` "
              "re-times them while they are in the cache (--keep-artifacts keeps a copy)")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    for option in ("json", "markdown"):
        if getattr(args, option):
            ensure_writable_file(getattr(args, option), f"--{option}")
    from harness.gate.accuracy import compare_accuracy, margin_table
    from harness.gate.compare import parse_threshold  # scipy: only when comparing

    margins = margin_table(args.config, args.accuracy_margin or (), rootdir=Path.cwd())
    baseline = load_baseline(args.baseline_name, args.baseline_store)
    policies = [parse_threshold(t) for t in args.baseline_threshold]
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
        comparison = compare_runs(baseline.records, candidate, policies, force_env=args.baseline_force_env)
        comparison.mode_reason = ("unpaired: recorded runs compared (`baseline compare --perf` re-times the "
                                  "blessed artifacts and the candidate's interleaved)")
    else:
        from harness.gate.retime import Pairing, pair

        blessed_env: tuple[str, ...] = ()
        if args.baseline_env:  # "" (what `baseline env` prints when nothing differs): this environment
            from harness.gate.envpair import environment_command

            blessed_env = tuple(environment_command(args.baseline_env, "--baseline-env"))
        recorded = compare_runs(baseline.records, candidate, policies, force_env=True)  # judged in pair()
        comparison = pair(recorded, baseline, read_results(args.run_dir), policies,
                          Pairing(args.pairs, args.block, args.warmup, baseline_env=blessed_env),
                          force_env=args.baseline_force_env, progress=lambda line: print(line, flush=True))
    comparison.allow_missing = args.allow_missing
    return comparison


def cmd_env(args: argparse.Namespace) -> int:
    """Print the interpreter of the blessed environment rebuilt under ``--dir`` when the baseline's
    runtime versions differ from this environment's, nothing when they match (``--baseline-env ""``
    then pairs in this process); what differs goes to stderr."""
    baseline = load_baseline(args.baseline_name, args.baseline_store)
    recorded = next((dict(r.env["versions"]) for r in baseline.records if isinstance(r.env.get("versions"), dict)), {})
    if not recorded:
        raise BaselineError(f"baseline {args.baseline_name!r} recorded no library versions (saved by an older harness)")
    found = delta(recorded)
    if found.python:
        print(f"note: {found.describe()}", file=sys.stderr)
    if not found.pins:
        same = ", ".join(f"{k} {v}" for k, v in sorted(found.here.items()))
        print(f"baseline {args.baseline_name!r}: the timing packages here are the recorded ones ({same}): nothing to rebuild",
              file=sys.stderr)
        return 0
    print(f"baseline {args.baseline_name!r}: {found.describe()}; rebuilding the blessed environment in {args.env_dir}",
          file=sys.stderr)
    print(rebuild(Path(args.env_dir), found.pins))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    found = list_baselines(args.baseline_store)
    if not found:
        print(f"no baselines in {args.baseline_store}")
        return 0
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"baselines in {args.baseline_store}"))
    for column in ("name", "created", "records", "fingerprint", "harness", "source"):
        table.add_column(column)
    for b in found:  # Text, not markup: a path may contain "[...]"
        table.add_row(*(Text(c) for c in (b.name, b.created, str(b.records), b.fingerprint or "-", b.harness_version, b.source)))
    _console().print(table)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``baseline`` with its three subcommands to the top-level parser."""
    parser = subparsers.add_parser("baseline", help="save performance baselines and compare runs against them",
                                   description=__doc__.splitlines()[0])
    actions = parser.add_subparsers(dest="baseline_command", metavar="{save,compare,env,list}", required=True)

    from harness.settings.commands import add_command_options

    save = actions.add_parser("save", help="store RUN_DIR's perf and accuracy records as baseline NAME "
                                           "(several runs: perf aggregated)")
    save.add_argument("run_dir", metavar="RUN_DIR", nargs="*",
                      help="run directories, oldest first; several make a multi-run baseline (docs/perf-gate.md)")
    add_command_options(save, "baseline save")
    save.set_defaults(func=cmd_save)

    compare = actions.add_parser("compare", help="judge RUN_DIR against baseline NAME (exit 1 on a regression)")
    compare.add_argument("run_dir", metavar="RUN_DIR")
    add_command_options(compare, "baseline compare")
    compare.set_defaults(func=cmd_compare)

    env = actions.add_parser("env", help="rebuild the blessed environment from the baseline's recorded runtime "
                                         "versions; print its interpreter (nothing when they match here)")
    add_command_options(env, "baseline env")
    env.set_defaults(func=cmd_env)

    listing = actions.add_parser("list", help="show saved baselines")
    add_command_options(listing, "baseline list")
    listing.set_defaults(func=cmd_list)
