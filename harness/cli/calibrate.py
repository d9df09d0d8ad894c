"""``harness calibrate RUN_DIR``: propose per-model tolerances from a known-good run.

Prints (or writes with ``--out``) a ``harness.toml`` snippet of ``[models.<name>.tolerances.<precision>]``
tables: each gated metric's worst observed value times a headroom, at least the measured noise
(the spread across the runs, or the registry's floor) away from it, never looser than the
threshold the run applied (docs/accuracy-gate.md). Exit codes: 0 written, 1 nothing proposed
(fewer than ``--min-runs`` runs: the observed intervals are reported; or no passing gated case),
2 a missing or corrupt run directory, a run without gated metrics, or bad options.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.core import UsageError
from harness.core.writable import ensure_writable_file
from harness.metrics.margins import MarginTable, parse_cli_margin
from harness.results.rundir import read_results


def cmd_calibrate(args: argparse.Namespace) -> int:
    from harness.gate.calibrate import calibrate_runs
    if args.out:
        ensure_writable_file(args.out, "--out")  # before reading: an unwritable OUT is one line, exit 2
    runs = []
    for run_dir in args.run_dir:
        records = read_results(run_dir)
        if args.models:
            records = [r for r in records if r.model in set(args.models)]
        if not any(r.thresholds for r in records):
            scope = f" for {', '.join(args.models)}" if args.models else ""
            raise UsageError(f"{Path(run_dir) / 'results.jsonl'} has no gated accuracy metrics{scope} to calibrate on")
        runs.append(records)
    margins = MarginTable([parse_cli_margin(t) for t in args.accuracy_margin or ()])
    source = " ".join(str(d) for d in args.run_dir)
    result = calibrate_runs(runs, source=source, headroom=args.headroom, margins=margins, min_runs=args.min_runs)
    text = result.to_toml()
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {len(result.proposals)} tightened tolerance(s) for "
              f"{len({(p.model, p.precision) for p in result.proposals})} model/precision pair(s) to {args.out}"
              + (f"; {len(result.skipped)} case(s) not calibrated on (did not pass)" if result.skipped else ""),
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    if not result.enough_runs:
        print(f"harness calibrate: nothing proposed: {result.runs} run(s) < --min-runs {result.min_runs} (the "
              "intervals observed are in the snippet; give more runs of the same build)", file=sys.stderr)
    elif not result.intervals:
        print("harness calibrate: nothing calibrated: no passing case with a gated metric", file=sys.stderr)
    return result.exit_code


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from harness.settings.commands import add_command_options

    parser = subparsers.add_parser("calibrate", help="propose per-model tolerances (harness.toml) from a known-good run",
                                   description="Propose per-model tolerances from a known-good run: each gated "
                                               "metric's worst observed value x a headroom (at least + its noise "
                                               "floor), never looser than the threshold the run applied, as "
                                               "[models.<name>.tolerances.<precision>] tables for harness.toml "
                                               "(docs/accuracy-gate.md). The --accuracy-margin floors apply.")
    parser.add_argument("run_dir", metavar="RUN_DIR", nargs="+",
                        help="known-good runs of one build; their spread is the measured noise")
    add_command_options(parser, "calibrate")
    parser.set_defaults(func=cmd_calibrate)
