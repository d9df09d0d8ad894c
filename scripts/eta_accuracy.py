"""How far the progress ETA was from the truth, replayed from a finished run directory.

    python scripts/eta_accuracy.py reports/run-20261202-080024 [--workers 1]

The cases are replayed in the order the run finished them (``results.jsonl``), each with the
duration it took: after every case the estimator (``harness.plugins.progress.Estimator``, with
the shard planner's cost weights and no durations history -- a first run) predicts the seconds
left, and the truth is the sum of the durations still to come (divided by the workers). Prints
the error of every estimate from the first third of the run on, and its worst and median.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from harness.plugins.progress import Estimator, case_weights


def replay(records: list[dict], workers: int = 1, weighted: bool = True) -> list[tuple[int, float, float]]:
    """[(cases finished, estimated seconds left, true seconds left)] from the first third on."""
    ids = [str(r["id"]) for r in records]
    seconds = [float(r.get("duration_s") or 0.0) for r in records]
    estimator = Estimator(weights=case_weights(ids) if weighted else None)
    out = []
    for done in range(max(len(ids) // 3, 1), len(ids)):
        finished = dict(zip(ids[:done], seconds[:done]))
        eta = estimator.eta(ids[done:], {}, finished, workers)
        truth = sum(seconds[done:]) / workers
        if eta is not None and truth > 0:
            out.append((done, eta, truth))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    records = [json.loads(line) for line in (args.run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
    for weighted in (True, False):
        rows = replay(records, args.workers, weighted)
        errors = [eta / truth - 1 for _, eta, truth in rows]
        name = "cost model" if weighted else "mean of finished cases"
        print(f"{name}: {len(rows)} estimates from case {rows[0][0]} of {len(records)}: "
              f"worst {max(errors, key=abs):+.0%}, median |error| {statistics.median(abs(e) for e in errors):.0%}, "
              f"within +-30 %: {sum(abs(e) <= 0.3 for e in errors)}/{len(errors)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
