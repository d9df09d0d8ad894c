"""Compare two runs case by case: the same case ids, verdicts and metric values.

A refactor that claims "behaviour unchanged" proves it with this: run the default
``harness run`` before and after, then::

    python scripts/compare_runs.py reports/before reports/after

Prints one line per difference and a summary; exits 1 when any case, verdict or metric
differs (metrics beyond ``--rtol``, default 0: bit-identical).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from harness.results import latest_records, read_records


def _same(a: object, b: object, rtol: float) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return fa == fb or abs(fa - fb) <= rtol * max(abs(fa), abs(fb))
    return a == b


def compare(before: Path, after: Path, rtol: float = 0.0) -> list[str]:
    old = {str(r["id"]): r for r in latest_records(read_records(before))}
    new = {str(r["id"]): r for r in latest_records(read_records(after))}
    problems = [f"only before: {i}" for i in sorted(set(old) - set(new))]
    problems += [f"only after: {i}" for i in sorted(set(new) - set(old))]
    for case in sorted(set(old) & set(new)):
        a, b = old[case], new[case]
        if a.get("verdict") != b.get("verdict"):
            problems.append(f"{case}: verdict {a.get('verdict')} -> {b.get('verdict')}")
        ma, mb = a.get("metrics") or {}, b.get("metrics") or {}
        for key in sorted(set(ma) | set(mb)):
            if key not in ma or key not in mb:
                problems.append(f"{case}: metric {key} only {'before' if key in ma else 'after'}")
            elif not _same(ma[key], mb[key], rtol):
                problems.append(f"{case}: {key} {ma[key]!r} -> {mb[key]!r}")
        ta, tb = a.get("thresholds") or {}, b.get("thresholds") or {}
        if ta != tb:
            problems.append(f"{case}: thresholds differ ({sorted(set(ta) ^ set(tb)) or 'values'})")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rtol", type=float, default=0.0, help="relative tolerance for metric values (default 0)")
    args = parser.parse_args(argv)
    problems = compare(args.before, args.after, args.rtol)
    old = latest_records(read_records(args.before))
    for line in problems:
        print(line)
    verdicts = sorted({str(r.get("verdict")) for r in old})
    print(f"{len(old)} case(s) before; {len(problems)} difference(s); verdicts before: {', '.join(verdicts)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
