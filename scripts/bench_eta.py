#!/usr/bin/env python
"""Time one ETA estimate of the progress display on large synthetic runs, with and without what an
estimate shares between its cases.

The display computes an estimate after every finished case and four times a second while one
runs, in the run's own process. Priced by the cost model, each case left needs its suite's rate
and the means of the finished cases, each a pass over every finished case; an estimate that
recomputed them for each case left cost O(cases left x cases finished). This prints, per run
size, the median seconds of one estimate (a third of the cases finished, no history: the cost
model prices everything) computed both ways in alternation, and their ratio.

    python scripts/bench_eta.py                      # 200, 600 and 2000 cases
    python scripts/bench_eta.py --cases 600 --repeats 9

``HARNESS_BENCH_SMOKE=1``: 60 cases, one repeat (``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Mapping

from harness.perf import smoke
from harness.plugins.progress import Estimator, case_kinds

SUITES = ("test_logits_parity", "test_generation_parity", "test_latency", "test_cold_start_memory")


class Unshared(Estimator):
    """The estimate before: every case left recomputes the rates and the means on its own."""

    def expected(self, nodeid: str, finished: Mapping[str, float], scale: float,
                 history: Mapping[str, float] | None, memo: dict[Any, float | None] | None = None) -> float | None:
        return super().expected(nodeid, finished, scale, history, None)


def synthetic_run(cases: int) -> tuple[list[str], dict[str, float], dict[str, float]]:
    """Case ids over four suites and two backends, a weight each, and a duration for each case in
    the first third (what has finished)."""
    ids = [f"{SUITES[i % len(SUITES)]}[m{i}-fp32-{('ort_cpu', 'torch_cpu')[i % 2]}]" for i in range(cases)]
    weights = {case: 1.0 + (i % 7) / 3 for i, case in enumerate(ids)}
    finished = {f"s.py::{case}": 0.1 * weights[case] for case in ids[: cases // 3]}
    return ids, weights, finished


def seconds_of_one(estimator: Estimator, pending: list[str], finished: dict[str, float]) -> float:
    began = time.perf_counter()
    estimator.eta(pending, {}, finished, 1)
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, nargs="+", default=[200, 600, 2000], help="run sizes")
    parser.add_argument("--repeats", type=int, default=5, help="estimates timed per size and way")
    args = parser.parse_args(argv)
    smoke.announce(smoke.shrink(args, cases=[60], repeats=1))
    print(f"{'cases':>6} {'shared (s)':>11} {'unshared (s)':>13} {'ratio':>7}")
    for cases in args.cases:
        ids, weights, finished = synthetic_run(cases)
        kinds = case_kinds(ids)
        pending = [f"s.py::{case}" for case in ids[cases // 3:]]
        shared, unshared = Estimator(weights=weights, kinds=kinds), Unshared(weights=weights, kinds=kinds)
        assert shared.eta(pending, {}, finished, 1) == unshared.eta(pending, {}, finished, 1)  # one estimate
        times: dict[str, list[float]] = {"shared": [], "unshared": []}
        for _ in range(args.repeats):  # alternated, so drift on a shared machine hits both alike
            times["shared"].append(seconds_of_one(shared, pending, finished))
            times["unshared"].append(seconds_of_one(unshared, pending, finished))
        fast, slow = statistics.median(times["shared"]), statistics.median(times["unshared"])
        print(f"{cases:>6} {fast:>11.4f} {slow:>13.4f} {fast / slow:>7.3f}")
    return smoke.finish(0, verdicts=())


if __name__ == "__main__":
    raise SystemExit(main())
