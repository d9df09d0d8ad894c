#!/usr/bin/env python
"""Cold vs warm ``harness run``: what a rerun with nothing changed costs.

Builds a fresh cache directory, runs the default ``harness run`` into it (cold: every zoo
model built, every artifact exported, every reference and variant output computed), then
runs it again (warm: everything is a verified cache hit) -- back to back, ``--repeats``
times, each repeat with its own fresh cache -- and prints wall and CPU seconds per run and
the warm/cold ratios. Both runs of a repeat see the same machine state, so on a shared
machine the ratio is what to read, not the seconds.

    python scripts/bench_rerun.py --repeats 2
    python scripts/bench_rerun.py --repeats 1 -- --models bert-tiny marian-tiny

Arguments after ``--`` go to ``harness run`` unchanged. Exit status 1 when the two runs of a
repeat disagree on any verdict or metric (a warm rerun must reproduce the cold one exactly).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_once(cache: Path, out: Path, extra: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the child, exit code) of one ``harness run``."""
    env = {**os.environ, "HARNESS_CACHE": str(cache)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(str(out) + ".log", "w") as log:
        code = subprocess.call([sys.executable, "-c", "from harness.cli import entrypoint; entrypoint()", "run",
                                "--out", str(out), *extra], env=env, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, code


def records(out: Path) -> dict[str, tuple[str, dict[str, float]]]:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    return {r["id"]: (r["verdict"], r["metrics"]) for r in rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="cold+warm pairs, each with a fresh cache")
    parser.add_argument("--keep", action="store_true", help="keep the temporary caches and run directories")
    parser.add_argument("harness_args", nargs=argparse.REMAINDER, help="after --: passed to harness run")
    args = parser.parse_args()
    extra = [a for a in args.harness_args if a != "--"]
    work = Path(tempfile.mkdtemp(prefix="bench-rerun-"))
    ratios_wall, ratios_cpu, mismatches = [], [], 0
    print(f"harness run {' '.join(extra) or '(defaults)'}; {os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.2f} at start")
    print(f"{'repeat':>6} {'cold wall':>10} {'warm wall':>10} {'ratio':>6} {'cold cpu':>9} {'warm cpu':>9} {'ratio':>6}")
    try:
        for i in range(args.repeats):
            cache = work / f"cache-{i}"
            cold = run_once(cache, work / f"cold-{i}", extra)
            warm = run_once(cache, work / f"warm-{i}", extra)
            if cold[2] not in (0, 1) or warm[2] != cold[2]:
                print(f"repeat {i}: exit codes cold {cold[2]} warm {warm[2]} (see {work})", file=sys.stderr)
                args.keep = True
                return 2
            a, b = records(work / f"cold-{i}"), records(work / f"warm-{i}")
            differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            mismatches += len(differ)
            for k in differ[:5]:
                print(f"  warm differs from cold: {k}", file=sys.stderr)
            ratios_wall.append(warm[0] / cold[0])
            ratios_cpu.append(warm[1] / cold[1])
            print(f"{i:>6} {cold[0]:>9.1f}s {warm[0]:>9.1f}s {ratios_wall[-1]:>6.2f} {cold[1]:>8.1f}s "
                  f"{warm[1]:>8.1f}s {ratios_cpu[-1]:>6.2f}")
            shutil.rmtree(cache, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"warm/cold wall ratio: median {statistics.median(ratios_wall):.2f} "
          f"(min {min(ratios_wall):.2f}, max {max(ratios_wall):.2f}); "
          f"CPU ratio median {statistics.median(ratios_cpu):.2f}; "
          f"{len(ratios_wall)} pair(s); load average {os.getloadavg()[0]:.2f} at end")
    print(f"records identical cold vs warm: {'yes' if mismatches == 0 else f'NO ({mismatches} differ)'}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
