"""``harness calibrate RUN_DIR``: propose per-model tolerances from a known-good run.

Prints (or writes with ``--out``) a ``harness.toml`` snippet of ``[models.<name>.tolerances.<precision>]``
tables: each gated metric's worst observed value times a headroom, never looser than the
threshold the run applied (docs/accuracy-gate.md). Exit codes: 0 written, 2 a missing or
corrupt run directory, a run without gated metrics, or bad options.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_calibrate(args: argparse.Namespace) -> int:
    from harness.core import UsageError
    from harness.core.writable import ensure_writable_file
    from harness.gate.calibrate import calibrate
    from harness.metrics.margins import MarginTable, parse_cli_margin
    from harness.results.rundir import read_results

    if args.out:
        ensure_writable_file(args.out, "--out")  # before reading: an unwritable OUT is one line, exit 2
    records = read_results(args.run_dir)
    if args.models:
        records = [r for r in records if r.model in set(args.models)]
    if not any(r.thresholds for r in records):
        scope = f" for {', '.join(args.models)}" if args.models else ""
        raise UsageError(f"{Path(args.run_dir) / 'results.jsonl'} has no gated accuracy metrics{scope} to calibrate on")
    margins = MarginTable([parse_cli_margin(t) for t in args.accuracy_margin or ()])
    result = calibrate(records, source=str(args.run_dir), headroom=args.headroom, margins=margins)
    text = result.to_toml()
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {len(result.proposals)} tightened tolerance(s) for "
              f"{len({(p.model, p.precision) for p in result.proposals})} model/precision pair(s) to {args.out}"
              + (f"; {len(result.skipped)} case(s) not calibrated on (did not pass)" if result.skipped else ""),
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from harness.gate.calibrate import DEFAULT_HEADROOM
    from harness.settings.options import add_cli_arguments

    parser = subparsers.add_parser("calibrate", help="propose per-model tolerances (harness.toml) from a known-good run",
                                   description="Propose per-model tolerances from a known-good run: each gated "
                                               "metric's worst observed value x a headroom (at least + its noise "
                                               "floor), never looser than the threshold the run applied, as "
                                               "[models.<name>.tolerances.<precision>] tables for harness.toml "
                                               "(docs/accuracy-gate.md). The --accuracy-margin floors apply.")
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--headroom", type=float, default=DEFAULT_HEADROOM, metavar="X",
                        help=f"observed error x X becomes the bound (default {DEFAULT_HEADROOM:g}; >= 1)")
    parser.add_argument("--models", nargs="+", metavar="NAMES", help="only these models (default: every model)")
    parser.add_argument("--out", metavar="FILE", help="write the snippet here instead of stdout")
    add_cli_arguments(parser, names=("accuracy_margin",))
    parser.set_defaults(func=cmd_calibrate)
