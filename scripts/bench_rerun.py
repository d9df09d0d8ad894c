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

``--compare REV`` times another commit of the harness beside this tree in the same script run
(``git archive REV`` into a temporary directory, put first on ``PYTHONPATH``): each repeat runs
cold+warm for both, alternating which goes first, so both see the same machine; it then prints
the warm and cold times of each side, their ratios (this tree / REV) and where each run's
seconds went -- the phase clock summed over the records (build, export, reference, variant,
metrics, perf, other) and ``outside cases``: process start, imports, collection, session end::

    python scripts/bench_rerun.py --repeats 1 --compare 2039f0d

``HARNESS_BENCH_SMOKE=1``: one repeat of the smallest run (``harness.perf.smoke.RUN_ARGS``, before
the arguments given after ``--``); a warm run that differs from the cold one still exits 1.
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

PHASES = ("build", "export", "reference", "variant", "metrics", "perf", "other")


def run_once(cache: Path, out: Path, extra: list[str], tree: Path | None = None) -> tuple[float, float, int]:
    """(wall s, CPU s of the child, exit code) of one ``harness run`` (of ``tree``'s harness if given)."""
    env = {**os.environ, "HARNESS_CACHE": str(cache)}
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                           if p and Path(p).resolve() != ROOT]])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(str(out) + ".log", "w") as log:
        # run from the run directory's parent: ``python -c`` puts the working directory first on
        # sys.path, and a checkout there would shadow the tree on PYTHONPATH
        code = subprocess.call([sys.executable, "-c", "from harness.cli import entrypoint; entrypoint()", "run",
                                "--out", str(out), *extra], env=env, stdout=log, stderr=subprocess.STDOUT,
                               cwd=out.parent)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, code


def records(out: Path) -> dict[str, tuple[str, dict[str, float]]]:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    return {r["id"]: (r["verdict"], r["metrics"]) for r in rows}


ROOT = Path(__file__).resolve().parent.parent


def breakdown(out: Path, wall: float) -> dict[str, float]:
    """Seconds per phase summed over the run's records, ``other`` per case, and what no case
    holds (``outside cases``: start, imports, collection, the session's end)."""
    totals = dict.fromkeys(PHASES, 0.0)
    inside = 0.0
    for line in (out / "results.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        phases = record.get("phases") or {}
        duration = float(record.get("duration_s") or 0.0)
        inside += duration
        for name, seconds in phases.items():
            totals[name] = totals.get(name, 0.0) + float(seconds)
        totals["other"] += max(duration - sum(float(v) for v in phases.values()), 0.0)
    totals["outside cases"] = max(wall - inside, 0.0)
    return totals


def extract(rev: str, into: Path) -> Path:
    """``rev``'s tree (``git archive``) under ``into``: a harness to put first on PYTHONPATH."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def compare(args: argparse.Namespace, extra: list[str], work: Path) -> int:
    """This tree against ``args.compare``, alternating, cold+warm each, fresh caches."""
    old = extract(args.compare, work / "old-tree")
    for side, tree in (("old", old), ("new", ROOT)):  # each side must import its own harness
        where = subprocess.run([sys.executable, "-c", "import harness; print(harness.__file__)"], cwd=work,
                               env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True).stdout
        assert Path(where.strip()).is_relative_to(tree), f"{side}: imports {where.strip()}, not {tree}"
    sides = {"old": old, "new": ROOT}
    label = {"old": args.compare, "new": "this tree"}
    walls: dict[tuple[str, str], list[float]] = {}
    phases: dict[tuple[str, str], list[dict[str, float]]] = {}
    print(f"{'repeat':>6} {'side':>10} {'cold wall':>10} {'warm wall':>10} {'warm/cold':>9}")
    for i in range(args.repeats):
        order = ["old", "new"] if i % 2 == 0 else ["new", "old"]
        for side in order:
            cache = work / f"cache-{side}-{i}"
            row = []
            for kind in ("cold", "warm"):
                out = work / f"{side}-{kind}-{i}"
                wall, _cpu, code = run_once(cache, out, extra, sides[side])
                if code not in (0, 1):
                    print(f"{side} {kind} run {i}: exit code {code} (see {out}.log)", file=sys.stderr)
                    args.keep = True
                    return 2
                walls.setdefault((side, kind), []).append(wall)
                phases.setdefault((side, kind), []).append(breakdown(out, wall))
                row.append(wall)
            print(f"{i:>6} {label[side][:10]:>10} {row[0]:>9.1f}s {row[1]:>9.1f}s {row[1] / row[0]:>9.2f}")
            shutil.rmtree(cache, ignore_errors=True)
    med = {key: statistics.median(v) for key, v in walls.items()}
    print(f"\nmedian wall, {args.repeats} repeat(s): cold {med['old', 'cold']:.1f} s -> {med['new', 'cold']:.1f} s "
          f"(ratio {med['new', 'cold'] / med['old', 'cold']:.2f}); warm {med['old', 'warm']:.1f} s -> "
          f"{med['new', 'warm']:.1f} s (ratio {med['new', 'warm'] / med['old', 'warm']:.2f})")
    names = [*PHASES, "outside cases"]
    print(f"\nwhere the seconds went (median over repeats; old = {args.compare}, new = this tree)")
    print(f"{'phase':<14} {'cold old':>9} {'cold new':>9} {'warm old':>9} {'warm new':>9}")
    for name in names:
        cells = [statistics.median(p[name] for p in phases[side, kind])
                 for kind in ("cold", "warm") for side in ("old", "new")]
        if any(c >= 0.05 for c in cells):
            print(f"{name:<14} " + " ".join(f"{c:>8.1f}s" for c in cells))
    print(f"{'wall':<14} " + " ".join(f"{med[side, kind]:>8.1f}s" for kind in ("cold", "warm")
                                       for side in ("old", "new")))
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="cold+warm pairs, each with a fresh cache")
    parser.add_argument("--keep", action="store_true", help="keep the temporary caches and run directories")
    parser.add_argument("--compare", metavar="REV", help="also time this git revision of the harness, alternating")
    parser.add_argument("harness_args", nargs=argparse.REMAINDER, help="after --: passed to harness run")
    args = parser.parse_args()
    extra = [a for a in args.harness_args if a != "--"]
    from harness.perf import smoke

    changes = smoke.shrink(args, repeats=1)
    if smoke.active():
        extra = [*smoke.RUN_ARGS, *extra]
        changes.append(f"harness run {' '.join(smoke.RUN_ARGS)}")
    smoke.announce(changes)
    work = Path(tempfile.mkdtemp(prefix="bench-rerun-"))
    ratios_wall, ratios_cpu, mismatches = [], [], 0
    print(f"harness run {' '.join(extra) or '(defaults)'}; {os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.2f} at start")
    if args.compare:
        try:
            return smoke.finish(compare(args, extra, work), verdicts=())
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    print(f"{'repeat':>6} {'cold wall':>10} {'warm wall':>10} {'ratio':>6} {'cold cpu':>9} {'warm cpu':>9} {'ratio':>6}")
    try:
        for i in range(args.repeats):
            cache = work / f"cache-{i}"
            cold = run_once(cache, work / f"cold-{i}", extra)
            warm = run_once(cache, work / f"warm-{i}", extra)
            if cold[2] not in (0, 1) or warm[2] != cold[2]:
                print(f"repeat {i}: exit codes cold {cold[2]} warm {warm[2]} (see {work})", file=sys.stderr)
                args.keep = True
                return smoke.finish(2, verdicts=())
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
    return smoke.finish(1 if mismatches else 0, verdicts=())  # a warm rerun that differs is a failure, not a timing


if __name__ == "__main__":
    sys.exit(main())
