"""Accuracy noise floors: how much does every accuracy metric move when nothing real changed?

Runs the same build (same models, weights, corpus, exporter and artifacts) several times with
settings that must not change what a model computes -- ONNX Runtime and torch thread counts,
the batch size, ONNX Runtime's graph optimisation level -- and reports, per metric and
precision, the largest movement against the reference configuration (1 thread, batch 8,
``ORT_ENABLE_ALL``): absolute (in the metric's own direction, "worse" positive) and relative
to the reference's distance from the ideal value. ``docs/accuracy-gate.md`` derives the default
margins of the accuracy gate (``Margin`` in ``harness.metrics.registry``) from these numbers.

    python scripts/measure_accuracy_noise.py --out /tmp/noise            # all configurations, then the tables
    python scripts/measure_accuracy_noise.py --out /tmp/noise --analyse  # tables from existing runs only
    python scripts/measure_accuracy_noise.py --out /tmp/noise --models bert-tiny --samples 8 --configs base threads2

The ORT optimisation level is changed script-locally (the child process rebinds the runner's
"all" level before ``harness run`` starts); everything else is an ordinary ``harness run`` option.
Each configuration is one ``harness run`` in its own process, one after another (timings do not
matter here, only the numbers). Exit 0 (the verdict is the tables), or 1 when a configuration's
run did not finish (an exit other than 0 or 1). ``HARNESS_BENCH_SMOKE=1``: one configuration of
each kind (reference, threads, batch, ORT level) on bert-tiny with 2 sentences (``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: name -> (harness run arguments, ORT optimisation level)
CONFIGS: dict[str, tuple[list[str], str]] = {
    "base": (["--threads", "1", "--batch-size", "8"], "all"),
    "threads2": (["--threads", "2", "--batch-size", "8"], "all"),
    "batch4": (["--threads", "1", "--batch-size", "4"], "all"),
    "batch16": (["--threads", "1", "--batch-size", "16"], "all"),
    "opt_basic": (["--threads", "1", "--batch-size", "8"], "basic"),
    "opt_disable": (["--threads", "1", "--batch-size", "8"], "disable"),
}
REFERENCE = "base"


def child(level: str, argv: list[str]) -> int:
    """Inside the child: rebind ORT's default optimisation level, then run ``harness``."""
    from harness.cli import main
    from harness.runners import ort_runner

    ort_runner.OPTIMIZATION_LEVELS["all"] = ort_runner.OPTIMIZATION_LEVELS[level]
    return main(argv)


def run_configs(out: Path, names: list[str], models: list[str] | None, samples: int | None) -> int:
    """Each configuration's run; 0, or 1 when one did not finish (exit other than 0 or 1)."""
    failed = 0
    for name in names:
        args, level = CONFIGS[name]
        target = out / name
        argv = ["run", "--out", str(target), *args]
        if models:
            argv += ["--models", *models]
        if samples:
            argv += ["--samples", str(samples)]
        env = {**os.environ, "OMP_NUM_THREADS": args[args.index("--threads") + 1]}
        print(f"== {name}: harness {' '.join(argv)} (ORT level {level})", flush=True)
        code = subprocess.call([sys.executable, __file__, "--child", level, "--", *argv], env=env)
        print(f"== {name}: exit {code}", flush=True)
        failed += code not in (0, 1)
    return 1 if failed else 0


#: configurations that compute the same thing (same feeds, same artifact, same kernels): only the
#: order of floating-point reductions changes. Their movement is noise, and the floors come from it.
#: The others change *what* is computed and are reported beside it: ORT's optimisation level picks
#: other (fused) kernels, and the batch size changes padding and, for dynamic INT8, the activation
#: scales (computed per batch). A baseline comparison names such a change in its reason instead.
SAME_COMPUTATION = ("threads2",)
KERNEL_CHANGES = ("opt_basic", "opt_disable")


@dataclass
class Move:
    """One (variant, metric key) compared between the reference and another configuration."""

    config: str
    metric: str
    precision: str
    variant: str
    key: str
    base_badness: float
    delta: float  # badness change, > 0 worse


def movements(out: Path, names: list[str]) -> list[Move]:
    from harness.gate.accuracy import collect_accuracy
    from harness.results.rundir import read_results

    ref = collect_accuracy(read_results(out / REFERENCE))
    moves: list[Move] = []
    for name in names:
        if name == REFERENCE or not (out / name / "results.jsonl").is_file():
            continue
        other = collect_accuracy(read_results(out / name))
        for key, b in ref.values.items():
            c = other.values.get(key)
            if c is None or b.spec.margin is None or not (math.isfinite(b.badness) and math.isfinite(c.badness)):
                continue
            moves.append(Move(name, b.metric, b.precision, b.variant, b.key, b.badness, c.badness - b.badness))
    return moves


def round_up_125(value: float) -> float:
    """The next value of the 1-2-5 series at or above ``value`` (0 stays 0)."""
    if value <= 0:
        return 0.0
    exponent = math.floor(math.log10(value))
    for step in (1.0, 2.0, 5.0, 10.0):
        candidate = float(f"{step * 10.0 ** exponent:.12g}")
        if candidate >= value * (1 - 1e-12):
            return candidate
    raise AssertionError(value)  # pragma: no cover


def derive(moves: list[Move]) -> list[dict[str, Any]]:
    """Per metric and precision: the measured movements and the floor derived from them.

    * FP32: ``floor = 2 x`` the largest |change| across thread counts *and* ORT optimisation
      levels, rounded up to 1-2-5. At FP32 the only error is float32 rounding, and another
      kernel's rounding is not a regression worth failing a release for.
    * FP16 / INT8: ``floor = max(FP32 floor, 2 x`` the largest |change| across thread counts),
      1-2-5. Here the kernel decides how much precision is lost (measured: up to 42% of an FP16
      error from the optimisation level), so a kernel change is judged, and named when it happens.

    ``noise_rel_above_floor``: the largest thread-count |change| / baseline badness among cases
    whose badness is at least 4 x the floor (where the relative part of the margin decides).
    """
    from harness.metrics.registry import METRICS

    groups: dict[tuple[str, str], list[Move]] = {}
    for m in moves:
        groups.setdefault((m.metric, m.precision), []).append(m)

    def floor_from(items: list[Move], configs: tuple[str, ...]) -> float:
        return round_up_125(2 * max((abs(m.delta) for m in items if m.config in configs), default=0.0))

    fp32_floor = {metric: floor_from(items, SAME_COMPUTATION + KERNEL_CHANGES)
                  for (metric, precision), items in groups.items() if precision == "fp32"}
    rows = []
    for (metric, precision), items in sorted(groups.items()):
        same = [m for m in items if m.config in SAME_COMPUTATION]
        kernels = [m for m in items if m.config in KERNEL_CHANGES]
        batch = [m for m in items if m.config not in SAME_COMPUTATION + KERNEL_CHANGES]
        noise = max((abs(m.delta) for m in same), default=0.0)
        floor = fp32_floor.get(metric, 0.0) if precision == "fp32" else max(
            fp32_floor.get(metric, 0.0), floor_from(items, SAME_COMPUTATION))
        big = [m for m in same if m.base_badness >= 4 * floor and m.base_badness > 0]
        rel_noise = max((abs(m.delta) / m.base_badness for m in big), default=0.0)
        worst = max(same, key=lambda m: abs(m.delta), default=None)
        declared = METRICS[metric].margin
        rows.append({
            "metric": metric, "precision": precision, "cases": len({(m.variant, m.key) for m in items}),
            "noise_abs": noise, "noise_at": f"{worst.config} {worst.variant} {worst.key}" if worst else "",
            "noise_rel_above_floor": rel_noise,
            "opt_abs": max((abs(m.delta) for m in kernels), default=0.0),
            "opt_rel": max((abs(m.delta) / m.base_badness for m in kernels if m.base_badness > 0), default=0.0),
            "batch_abs": max((abs(m.delta) for m in batch), default=0.0),
            "batch_rel": max((abs(m.delta) / m.base_badness for m in batch if m.base_badness > 0), default=0.0),
            "derived_floor": floor,
            "declared_floor": declared.floor_at(precision) if declared else None,
            "declared_rel": declared.rel if declared else None,
            "advisory": bool(declared and declared.advisory),
        })
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    lines = ["| metric | precision | cases | noise: threads 1 vs 2, max abs | rel noise above floor "
             "| ORT opt basic/disable: max abs / rel | batch 4/16: max abs / rel | derived floor (2x, 1-2-5) "
             "| declared floor | declared rel |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r["noise_abs"] == 0 and r["batch_abs"] == 0 and r["opt_abs"] == 0 and r["declared_floor"] in (None, 0.0):
            continue
        declared = "-" if r["declared_floor"] is None else f"{r['declared_floor']:.3g}"
        rel = "-" if r["declared_rel"] is None else f"{r['declared_rel']:.0%}" + (" (advisory)" if r["advisory"] else "")
        lines.append(f"| {r['metric']} | {r['precision']} | {r['cases']} | {r['noise_abs']:.2g} | "
                     f"{r['noise_rel_above_floor']:.0%} | {r['opt_abs']:.2g} / {r['opt_rel']:.0%} | "
                     f"{r['batch_abs']:.2g} / {r['batch_rel']:.0%} | "
                     f"{r['derived_floor']:.3g} | {declared} | {rel} |")
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[4:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="one run directory per configuration goes here")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--models", nargs="+", default=None, help="default: the default zoo")
    parser.add_argument("--samples", type=int, default=None, help="default: the run default (32)")
    parser.add_argument("--analyse", action="store_true", help="only analyse existing run directories")
    parser.add_argument("--json", type=Path, default=None, help="also write the movements as JSON")
    args = parser.parse_args()
    from harness.perf import smoke

    smoke.announce(smoke.shrink(args, configs=["base", "threads2", "batch4", "opt_basic"], models=["bert-tiny"],
                                samples=2))
    names = list(dict.fromkeys([REFERENCE, *args.configs]))
    code = 0 if args.analyse else run_configs(args.out, names, args.models, args.samples)
    rows = derive(movements(args.out, names))
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return smoke.finish(code, verdicts=())


if __name__ == "__main__":
    sys.exit(main())
