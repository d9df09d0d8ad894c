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
matter here, only the numbers). Exit 0; the verdict is the tables.
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


def run_configs(out: Path, names: list[str], models: list[str] | None, samples: int | None) -> None:
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


@dataclass
class Move:
    metric: str
    precision: str
    abs_worse: float = 0.0  # largest worsening (in the metric's direction)
    abs_any: float = 0.0  # largest |change| either way
    rel_any: float = 0.0  # largest |change| / reference badness (where the badness > 0)
    rel_at: str = ""
    n: int = 0
    base_max: float = 0.0  # largest reference badness seen


def analyse(out: Path, names: list[str]) -> dict[str, Any]:
    from harness.gate.accuracy import collect_accuracy
    from harness.gate.baseline import read_results

    ref = collect_accuracy(read_results(out / REFERENCE))
    table: dict[str, dict[tuple[str, str], Move]] = {}
    for name in names:
        if name == REFERENCE or not (out / name / "results.jsonl").is_file():
            continue
        other = collect_accuracy(read_results(out / name))
        moves = table.setdefault(name, {})
        for key, b in ref.values.items():
            c = other.values.get(key)
            if c is None or not (math.isfinite(b.badness) and math.isfinite(c.badness)):
                continue
            m = moves.setdefault((b.metric, b.precision), Move(b.metric, b.precision))
            delta = c.badness - b.badness
            m.n += 1
            m.base_max = max(m.base_max, b.badness)
            m.abs_worse = max(m.abs_worse, delta)
            m.abs_any = max(m.abs_any, abs(delta))
            if b.badness > 0 and abs(delta) / b.badness > m.rel_any:
                m.rel_any, m.rel_at = abs(delta) / b.badness, f"{b.variant} {b.key} {b.badness:.3g}->{c.badness:.3g}"
    return {name: {f"{k[0]}@{k[1]}": vars(v) for k, v in sorted(moves.items())} for name, moves in table.items()}


def render(result: dict[str, Any]) -> str:
    metrics = sorted({k for moves in result.values() for k in moves})
    configs = list(result)
    lines = ["| metric @ precision | " + " | ".join(f"{c}: max abs / max rel" for c in configs) + " |",
             "|---|" + "---|" * len(configs)]
    for key in metrics:
        cells = []
        for c in configs:
            m = result[c].get(key)
            cells.append("-" if m is None else f"{m['abs_any']:.2g} / {m['rel_any']:.0%}")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
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
    names = list(dict.fromkeys([REFERENCE, *args.configs]))
    if not args.analyse:
        run_configs(args.out, names, args.models, args.samples)
    result = analyse(args.out, names)
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
