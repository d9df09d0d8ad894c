"""``harness compare RUN_A RUN_B``: what changed between two runs — verdict changes first, then
accuracy metrics and performance side by side with deltas (performance judged by the
statistical gate). The "after upgrading onnxruntime, what moved?" view.

Cases pair by id, else by test x model x precision x provider (a runtime setting that changed
the id, ``-opt_disabled``, is a row with the setting in its own column). Exit codes: 0 compared
(informational), 1 when no case paired or A has cases B lacks (unless ``--allow-missing``), and
with ``--strict`` when a case newly fails (new failing cases included), a performance metric
regressed or an accuracy metric moved past its margin (gating), 2 a missing or corrupt run
directory or a bad margin.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.writable import ensure_writable_file
from harness.report.console import cli_console
from harness.results.rundir import read_results


def cmd_compare(args: argparse.Namespace) -> int:
    for option in ("markdown", "html"):
        if getattr(args, option):
            ensure_writable_file(getattr(args, option), f"--{option}")
    records_a, records_b = read_results(args.run_a), read_results(args.run_b)
    from harness.compare.diff import compare
    from harness.compare.render import render_terminal, to_html, to_markdown
    from harness.gate.accuracy import margin_table
    margins = margin_table(args.config, args.accuracy_margin or (), rootdir=Path.cwd())
    cmp = compare(records_a, records_b, name_a=Path(args.run_a).name or str(args.run_a),
                  name_b=Path(args.run_b).name or str(args.run_b), margins=margins,
                  allow_missing=args.allow_missing)
    render_terminal(cmp, cli_console())
    for option, render in (("markdown", to_markdown), ("html", to_html)):
        target = getattr(args, option)
        if target:
            out = Path(target)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(render(cmp), encoding="utf-8")
    return cmp.exit_code(args.strict)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``compare`` to the top-level parser."""
    parser = subparsers.add_parser("compare", help="what changed between two runs: verdicts, accuracy, perf",
                                   description="What changed between two runs: verdict changes first, then accuracy "
                                               "metrics and performance side by side with deltas (performance judged by "
                                               "the statistical gate).")
    parser.add_argument("run_a", metavar="RUN_A", help="the earlier / reference run directory")
    parser.add_argument("run_b", metavar="RUN_B", help="the later / candidate run directory")
    from harness.settings.commands import add_command_options

    add_command_options(parser, "compare")
    parser.set_defaults(func=cmd_compare)
