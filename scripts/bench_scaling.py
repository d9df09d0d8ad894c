#!/usr/bin/env python
"""Cost as work grows: wall time and per-phase time against samples and models.

Runs ``harness run`` (numeric parity by default: ``-k test_logits_parity``) with
``--samples`` 32 -> 128 -> 512 on one model, then with 1 -> 4 models at the smallest sample
count, every run with ``--fresh-references`` so references and variant outputs are really
computed (artifacts stay cached: export cost does not depend on samples). For each step it
prints wall seconds and the phases summed over the run's records (``reference``, ``variant``,
``metrics``...), and the log-log slope between consecutive steps: 1.0 is linear, above ~1.2
something grows faster than the work and deserves a look.

    python scripts/bench_scaling.py
    python scripts/bench_scaling.py --samples 32 128 512 --models bert-tiny encoder-custom minilm-l6 marian-tiny
    python scripts/bench_scaling.py --time-model encoder-custom-12x768 --time-samples 400   # cold vs warm only

Exit 0, or 1 when a run did not finish (an exit other than 0 or 1: its row says ``exit N``).
``HARNESS_BENCH_SMOKE=1``: 1 and 2 samples on bert-tiny at FP32 on ONNX Runtime, without the priming run
(it only keeps export time out of the timed steps) and without timing one run twice (the 1-model
step is the first samples step; ``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = "from harness.cli import entrypoint; raise SystemExit(entrypoint())"


def run(args: list[str], out: Path) -> tuple[float, dict[str, float], int]:
    """(wall s, phase seconds summed over the records, exit code)."""
    start = time.perf_counter()
    code = subprocess.call([sys.executable, "-c", CLI, "run", "--out", str(out), *args],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    phases: dict[str, float] = {}
    results = out / "results.jsonl"
    if results.is_file():
        for line in results.read_text().splitlines():
            rec = json.loads(line)
            claimed = 0.0
            for name, seconds in (rec.get("phases") or {}).items():
                phases[name] = phases.get(name, 0.0) + seconds
                claimed += seconds
            phases["other"] = phases.get("other", 0.0) + max(rec.get("duration_s", 0.0) - claimed, 0.0)
    return wall, phases, code


def slope(x0: float, x1: float, y0: float, y1: float) -> float:
    if min(x0, x1, y0, y1) <= 0 or x0 == x1:
        return math.nan
    return math.log(y1 / y0) / math.log(x1 / x0)


def table(title: str, xs: list[int], label: str, results: list[tuple[float, dict[str, float], int]]) -> None:
    print(f"\n{title}")
    print(f"{label:>8} {'wall s':>8} {'slope':>6} {'reference':>10} {'slope':>6} {'variant':>8} {'slope':>6} "
          f"{'metrics':>8} {'other':>7}")
    for i, (x, (wall, ph, code)) in enumerate(zip(xs, results)):
        ref, var = ph.get("reference", 0.0), ph.get("variant", 0.0)
        if i:
            p_wall, p_ph, _ = results[i - 1]
            slopes = [f"{slope(xs[i - 1], x, a, b):6.2f}" for a, b in
                      ((p_wall, wall), (p_ph.get("reference", 0.0), ref), (p_ph.get("variant", 0.0), var))]
        else:
            slopes = ["     –"] * 3
        print(f"{x:>8} {wall:8.1f} {slopes[0]} {ref:10.2f} {slopes[1]} {var:8.2f} {slopes[2]} "
              f"{ph.get('metrics', 0.0):8.2f} {ph.get('other', 0.0):7.2f}{'' if code in (0, 1) else f'  exit {code}'}")


def corpus_size(model: str) -> int:
    """Sentences in the model's corpus (a run never judges more)."""
    from types import SimpleNamespace

    from harness.judge.corpora import CorpusStore
    from harness.zoo.base import ModelCatalog

    return len(CorpusStore.corpus(SimpleNamespace(spec=ModelCatalog().resolve(model))).sources)  # type: ignore[arg-type]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[32, 128, 512])
    parser.add_argument("--models", nargs="+", default=["bert-tiny", "encoder-custom", "minilm-l6", "marian-tiny"])
    parser.add_argument("-k", dest="keyword", default="test_logits_parity", help="pytest -k (default: numeric parity)")
    parser.add_argument("--time-model", default=None, help="only: cold (fresh references) vs warm run of this model")
    parser.add_argument("--time-samples", type=int, default=400)
    args = parser.parse_args()
    from harness.perf import smoke

    changes = smoke.shrink(args, samples=[1, 2], models=["bert-tiny"], time_samples=2)
    narrow = list(smoke.RUN_ARGS) if smoke.active() else []  # the run's matrix; the arguments below win
    if smoke.active():
        changes += ["precisions fp32", "providers ort_cpu", "no priming run", "no run timed twice"]
    smoke.announce(changes)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
          f"HARNESS_CACHE={os.environ.get('HARNESS_CACHE', '(default)')}")
    with tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp:
        work = Path(tmp)
        if args.time_model:
            base = [*narrow, "--models", args.time_model, "--samples", str(args.time_samples), "-k", args.keyword]
            run(base, work / "prime")  # artifacts built (not timed)
            fresh = run([*base, "--fresh-references"], work / "fresh")
            warm = run(base, work / "warm")
            print(f"{args.time_model}, {args.time_samples} samples, {args.keyword}: references and outputs recomputed "
                  f"{fresh[0]:.1f} s (reference {fresh[1].get('reference', 0):.1f} s, variant "
                  f"{fresh[1].get('variant', 0):.1f} s); warm rerun {warm[0]:.1f} s; ratio {warm[0] / fresh[0]:.2f}")
            return smoke.finish(finished(fresh, warm), verdicts=())
        timed: dict[tuple[str, ...], tuple[float, dict[str, float], int]] = {}

        def step(arguments: list[str], out: Path) -> tuple[float, dict[str, float], int]:
            """``run``; a smoke run reuses a run it already timed with the same arguments."""
            if not smoke.active() or tuple(arguments) not in timed:
                timed[tuple(arguments)] = run(arguments, out)
            return timed[tuple(arguments)]

        first = args.models[0]
        if not smoke.active():  # artifacts built before the timed steps (a smoke run times nothing)
            run(["--models", *args.models, "--samples", str(min(args.samples)), "-k", args.keyword], work / "prime")
        by_samples = [step([*narrow, "--models", first, "--samples", str(n), "-k", args.keyword, "--fresh-references"],
                          work / f"s{n}") for n in args.samples]
        size = corpus_size(first)
        effective = [min(n, size) for n in args.samples]  # --samples beyond the corpus judge the whole corpus
        capped = f"; capped at the corpus's {size} sentences" if max(args.samples) > size else ""
        table(f"samples ({first}, {args.keyword}{capped})", effective, "samples", by_samples)
        counts = list(range(1, len(args.models) + 1))
        by_models = [step([*narrow, "--models", *args.models[:k], "--samples", str(min(args.samples)), "-k", args.keyword,
                          "--fresh-references"], work / f"m{k}") for k in counts]
        table(f"models ({', '.join(args.models)}; {min(args.samples)} samples)", counts, "models", by_models)
        print(f"\nload average {os.getloadavg()[0]:.2f} at end (a shared machine: read the slopes, not the seconds)")
    return smoke.finish(finished(*by_samples, *by_models), verdicts=())


def finished(*runs: tuple[float, dict[str, float], int]) -> int:
    """0 when every timed run finished (exit 0 or 1: a failed case is still a timed run), else 1."""
    return 0 if all(code in (0, 1) for _, _, code in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
