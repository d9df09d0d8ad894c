"""``harness merge RUN_DIR...``: combine the shard directories of one split run (``harness run
--shard K/N`` on N machines) into one run directory with its summary and report.

Exit codes: 0 merged and every case passed or skipped, 1 merged and a case failed (as the
unsplit run would have exited), 2 the shards do not form one run (overlapping, missing, from
different splits, environments or results-changing settings: one line saying which and both
values; ``--force`` merges anyway and lists what it overrode in ``merge.json``). Shards that hold
no case at all merge into nothing: exit 1 unless ``--allow-missing``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.compared import Compared
from harness.core.rundirs import default_run_dir
from harness.core.writable import ensure_writable_dir
from harness.report.summary import status_line
from harness.results.record import run_green
from harness.shard.merge import merge_shards, write_merged


def cmd_merge(args: argparse.Namespace) -> int:
    out = args.out or default_run_dir("merged")
    ensure_writable_dir(out, "--out")
    merged = merge_shards([Path(p) for p in args.run_dirs], force=args.force)
    write_merged(merged, Path(out))
    for warning in merged.warnings:
        print(f"harness: warning: forced: {warning}")
    print(f"merged {len(merged.shards)} shard(s), {len(merged.records)} case(s) -> {out} "
          f"(results.jsonl, summary.md, report.html)")

    compared = Compared("cases", len(merged.records), allow_missing=args.allow_missing)
    print(status_line(merged.records) + compared.verdict_suffix())
    return 0 if run_green(r.verdict for r in merged.records) and not compared.failed else 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``merge`` to the top-level parser."""
    from harness.settings.commands import add_command_options

    parser = subparsers.add_parser("merge", help="combine shard run directories into one run, summary and report",
                                   description="Combine the shard directories of one split run (harness run --shard K/N) into "
                                               "one run directory with results.jsonl, summary.md and report.html.")
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    add_command_options(parser, "merge")
    parser.set_defaults(func=cmd_merge)
