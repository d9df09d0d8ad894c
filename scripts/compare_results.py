"""Compare two runs' results.jsonl case by case: same cases, verdicts, reasons, settings and metric values.

A refactor must not change what a run decides. Run the default ``harness run`` before and after and
compare; fields that legitimately differ between two runs (run id, timestamps, durations, environment,
cache hits, per-graph seconds) are not compared. Exit status 1 when anything else differs.

    python scripts/compare_results.py reports/before reports/after
"""

from __future__ import annotations

import argparse
import math
import sys

from harness.results import Record, latest_records, read_typed

COMPARED = ("suite", "variant", "model", "model_sha256", "precision", "backend", "provider", "execution_provider",
            "verdict", "reason", "thresholds", "settings", "rerun")


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _value(record: Record, name: str, like: Record | None = None) -> object:
    """A compared field; for ``settings``, only the keys the earlier record has: a setting the
    newer version records in addition (``settings.options``) is a schema extension, not a change."""
    value = getattr(record, name)
    if name == "settings" and like is not None:
        return {k: v for k, v in value.items() if k in like.settings}
    return value


def differences(before: list[Record], after: list[Record]) -> list[str]:
    old, new = {r.id: r for r in before}, {r.id: r for r in after}
    out = [f"only before: {cid}" for cid in sorted(set(old) - set(new))]
    out += [f"only after: {cid}" for cid in sorted(set(new) - set(old))]
    for cid in sorted(set(old) & set(new)):
        a, b = old[cid], new[cid]
        if list(a.to_dict()) != list(b.to_dict()):
            out.append(f"{cid}: fields {list(a.to_dict())} -> {list(b.to_dict())}")
        out += [f"{cid}: {name} {getattr(a, name)!r} -> {getattr(b, name)!r}" for name in COMPARED
                if _value(a, name) != _value(b, name, like=a)]
        for key in sorted(set(a.metrics) | set(b.metrics)):
            x, y = a.metrics.get(key), b.metrics.get(key)
            if not _same(x, y):
                out.append(f"{cid}: metric {key} {x!r} -> {y!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="run directory or results.jsonl")
    parser.add_argument("after", help="run directory or results.jsonl")
    args = parser.parse_args(argv)
    before, after = latest_records(read_typed(args.before)), latest_records(read_typed(args.after))
    found = differences(before, after)
    for line in found:
        print(line)
    print(f"{len(before)} case(s) before, {len(after)} after; {len(found)} difference(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
