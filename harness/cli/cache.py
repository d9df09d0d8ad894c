"""``harness cache info | verify | prune``: the size of ``$HARNESS_CACHE``, its integrity, and LRU pruning.

    harness cache info                              # per area: entries, size, least recent use
    harness cache verify [--remove]                 # hash every entry; exit 1 if one is corrupt
    harness cache prune --older-than 30d            # entries unused for 30 days
    harness cache prune --max-size 10G [--dry-run]  # least recently used until the cache fits
    harness cache key [--config harness.toml]       # CI cache key: the config and every model it names

Exit codes: 0 ok (verify: every entry intact), 1 verify found a corrupt entry it did not remove,
2 bad usage (one line). See docs/cache.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from harness import cacheadmin as ca
from harness.core import UsageError
from harness.report.console import cli_console


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from harness.settings.commands import add_command_options

    p = sub.add_parser("cache", help="size, integrity and pruning of the model/artifact/reference cache",
                       description="Inspect, verify and prune $HARNESS_CACHE (zoo models, exported artifacts, "
                                   "reference outputs). Runs never delete entries; this command does.")
    actions = p.add_subparsers(dest="cache_action", metavar="ACTION", required=True)
    info = actions.add_parser("info", help="entries and bytes per area, least recent use")
    add_command_options(info, "cache info")
    info.set_defaults(func=cmd_info)

    verify = actions.add_parser("verify", help="hash every entry against its record")
    add_command_options(verify, "cache verify")
    verify.set_defaults(func=cmd_verify)

    prune = actions.add_parser("prune", help="remove least recently used entries")
    add_command_options(prune, "cache prune")
    prune.set_defaults(func=cmd_prune)

    key = actions.add_parser("key", help="the CI cache key: a hash of the config and every model file it names",
                             description="Print a short hash of harness.toml (or --config), the harness version and "
                                         "every file of every model directory and artifact the config names: the "
                                         "key of the workflow's cache of $HARNESS_CACHE, so adding or retraining "
                                         "any model invalidates it.")
    add_command_options(key, "cache key")
    key.set_defaults(func=cmd_key)


def _root(args: argparse.Namespace) -> Path:
    from harness.zoo.base import cache_root

    root = (args.cache or cache_root()).expanduser()
    if not root.is_dir():
        raise UsageError(f"--cache: {root} is not a directory (nothing cached there yet?)")
    return root


def _age(entry_last_used: float, now: float) -> str:
    days = max(0.0, now - entry_last_used) / 86400
    return f"{days:.1f} d" if days >= 1 else f"{days * 24:.1f} h"


def cmd_info(args: argparse.Namespace) -> int:
    root = _root(args)
    selected = ca.areas(args.area)
    found = ca.entries(root, selected)
    now = time.time()
    rows: list[dict[str, Any]] = []
    for area in selected:
        mine = [e for e in found if e.area == area.name]
        rows.append({"area": area.name, "what": area.what, "entries": len(mine), "bytes": sum(e.bytes for e in mine),
                     "least_recent_use_days": round(mine[0].age_days(now), 2) if mine else None})
    largest = sorted(found, key=lambda e: -e.bytes)[:max(0, args.top)]
    if args.print_json:
        print(json.dumps({"cache": str(root), "areas": rows,
                          "largest": [{"area": e.area, "entry": e.path.name, "bytes": e.bytes,
                                       "unused_days": round(e.age_days(now), 2)} for e in largest]}, indent=2))
        return 0
    from rich.table import Table

    console = cli_console()
    table = Table(title=f"cache {root}")
    for col in ("area", "entries", "size", "least recent use", "holds"):
        table.add_column(col, justify="right" if col in ("entries", "size") else "left")
    for row in rows:
        oldest = f"{row['least_recent_use_days']:.1f} d ago" if row["least_recent_use_days"] is not None else "-"
        table.add_row(row["area"], str(row["entries"]), ca.human_bytes(row["bytes"]), oldest, row["what"])
    table.add_row("total", str(len(found)), ca.human_bytes(sum(e.bytes for e in found)), "", "")
    console.print(table)
    if largest:
        big = Table(title="largest entries")
        for col in ("area", "entry", "size", "unused for"):
            big.add_column(col, justify="right" if col == "size" else "left")
        for e in largest:
            big.add_row(e.area, e.path.name, ca.human_bytes(e.bytes), _age(e.last_used, now))
        console.print(big)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    root = _root(args)
    found = ca.entries(root, ca.areas(args.area))
    bad: list[dict[str, Any]] = []  # area, entry, problem, removed
    for entry in found:
        problem = ca.problem(entry)
        if problem is None:
            continue
        item: dict[str, Any] = {"area": entry.area, "entry": entry.path.name, "problem": problem, "removed": False}
        if args.remove:
            item["removed"] = ca.remove(entry)
            if not item["removed"]:
                item["problem"] += " (in use by a build: not removed)"
        bad.append(item)
    kept_bad = [b for b in bad if not b["removed"]]
    if args.print_json:
        print(json.dumps({"cache": str(root), "checked": len(found), "corrupt": bad}, indent=2))
    else:
        for b in bad:
            state = "removed" if b["removed"] else "CORRUPT"
            print(f"{state}: {b['area']}/{b['entry']}: {b['problem']}")
        print(f"verified {len(found)} entr{'y' if len(found) == 1 else 'ies'} under {root}: "
              f"{len(found) - len(bad)} intact, {len(bad)} corrupt"
              + (f" ({len(bad) - len(kept_bad)} removed)" if args.remove and bad else ""))
    return 1 if kept_bad else 0


def cmd_prune(args: argparse.Namespace) -> int:
    if args.older_than is None and args.max_size is None:
        raise UsageError("cache prune: give --older-than AGE and/or --max-size SIZE (nothing is removed by default)")
    older = ca.parse_duration(args.older_than, "--older-than") if args.older_than is not None else None
    limit = ca.parse_size(args.max_size, "--max-size") if args.max_size is not None else None
    root = _root(args)
    found = ca.entries(root, ca.areas(args.area))
    plan = ca.plan_prune(found, older_than_s=older, max_bytes=limit)
    now = time.time()
    removed, busy = [], []
    for entry in plan.remove:
        if args.dry_run or ca.remove(entry):
            removed.append(entry)
        else:
            busy.append(entry)
    freed = sum(e.bytes for e in removed)
    left = sum(e.bytes for e in found) - freed
    if args.print_json:
        print(json.dumps({"cache": str(root), "dry_run": args.dry_run, "freed_bytes": freed, "left_bytes": left,
                          "removed": [{"area": e.area, "entry": e.path.name, "bytes": e.bytes,
                                       "unused_days": round(e.age_days(now), 2)} for e in removed],
                          "in_use": [f"{e.area}/{e.path.name}" for e in busy]}, indent=2))
        return 0
    verb = "would remove" if args.dry_run else "removed"
    for e in removed:
        print(f"{verb} {e.area}/{e.path.name}  {ca.human_bytes(e.bytes)}  unused for {_age(e.last_used, now)}")
    for e in busy:
        print(f"kept {e.area}/{e.path.name}: a build holds its lock", file=sys.stderr)
    print(f"{verb} {len(removed)} of {len(found)} entries, {ca.human_bytes(freed)}; "
          f"{ca.human_bytes(left)} left under {root}")
    return 0


def cmd_key(args: argparse.Namespace) -> int:
    from harness.scaffold.cachekey import cache_key
    from harness.settings.config_file import find_config

    config = find_config(args.config)
    if config is None:
        raise UsageError("harness cache key: no harness.toml (or pyproject.toml [tool.harness]) here; pass --config")
    print(cache_key(config))
    return 0
