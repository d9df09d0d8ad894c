"""The canary (harness.perf.canary, harness.gate.canary): a comparison whose canaries moved is
INCONCLUSIVE (machine drift) unless the change clears the threshold beyond the drift; a real slowdown with quiet canaries is
still a REGRESSION; the between-run spread only ever widens an interval and raises a p-value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from harness.gate.canary import DRIFT_TOLERANCE, judge_drift, widen
from harness.gate.compare import Verdict, compare_runs
from harness.perf.canary import WORKLOAD, Canary, make_call
from tests.perf_records import measured_processes

VARIANT = "encoder-custom-fp32-ort_cpu"
ENV = {"fingerprint": "f", "threads": {"ort_intra_op": 1}}


def calls(seed: int, n: int = 1000, scale: float = 1.0) -> list[float]:
    rng = np.random.default_rng(seed)
    return (2.0 * scale * rng.lognormal(0.0, 0.05, n)).tolist()


def canary(seed: int, scale: float = 1.0) -> dict[str, Any]:
    rng = np.random.default_rng(seed + 1000)
    return {"workload": WORKLOAD, "samples": (0.08 * scale * rng.lognormal(0.0, 0.04, 240)).tolist(), "blocks": 4}


def rec(samples: list[float], canary_entry: dict[str, Any] | None) -> dict[str, Any]:
    perf: dict[str, Any] = {"latency_ms": {"samples": samples}, "cold_start_runs": measured_processes()}
    if canary_entry is not None:
        perf["canary_ms"] = canary_entry
    return {"schema": "harness.result/1", "id": f"test_latency[{VARIANT}]", "variant": VARIANT, "suite": "perf",
            "verdict": "pass", "metrics": {}, "env": ENV, "perf": perf}


def p50(result: Any) -> Any:
    return next(r for r in result.rows if r.metric == "latency_ms.p50")


def test_canary_is_deterministic_and_recorded() -> None:
    assert make_call()() == make_call()()
    c = Canary(calls=10)
    c.block()
    c.block()
    entry = c.entry()
    assert entry["workload"] == WORKLOAD and entry["blocks"] == 2 and len(entry["samples"]) == 20
    assert all(s > 0 for s in entry["samples"])


def test_a_canary_block_holds_numpys_blas_to_one_thread_and_gives_it_back() -> None:
    """The canary is two matrix multiplies: timed on a pool of BLAS threads it would measure the
    runner's core count and wake a pool beside the runtime's own threads."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def numpy_blas_threads() -> set[int]:  # numpy's own (scipy, torch may load BLAS libraries of their own)
        return {int(lib["num_threads"]) for lib in threadpool_info()
                if lib["user_api"] == "blas" and lib["filepath"].startswith(str(Path(np.__file__).parents[1]))
                and "numpy" in lib["filepath"]}

    seen: list[set[int]] = []
    c = Canary(calls=3)
    call = c.call

    def spied() -> float:
        seen.append(numpy_blas_threads())
        return call()

    c.call = spied
    with threadpool_limits(limits=2, user_api="blas"):
        assert numpy_blas_threads() == {2}, threadpool_info()
        c.block()
        assert numpy_blas_threads() == {2}  # given back after the block
    assert seen and all(threads == {1} for threads in seen), seen


def test_drifted_machine_is_inconclusive_not_a_regression() -> None:
    # same build, the machine 30% slower for the candidate: model and canary both slower
    drifted = compare_runs([rec(calls(1), canary(1))], [rec(calls(2, scale=1.3), canary(2, scale=1.3))])
    assert p50(drifted).verdict is Verdict.INCONCLUSIVE and "machine drift" in p50(drifted).reason
    assert drifted.exit_code == 0 and drifted.drift[VARIANT]["drifted"]
    assert any("machine drift" in n for n in drifted.notes())
    # negative control: without canaries the same numbers are a (false) REGRESSION
    blind = compare_runs([rec(calls(1), None)], [rec(calls(2, scale=1.3), None)])
    assert p50(blind).verdict is Verdict.REGRESSION
    # and a machine 30% faster is not an IMPROVEMENT
    faster = compare_runs([rec(calls(1), canary(1))], [rec(calls(2, scale=0.7), canary(2, scale=0.7))])
    assert p50(faster).verdict is Verdict.INCONCLUSIVE


def test_drift_vetoes_nothing_far_beyond_it() -> None:
    """A model 60 % slower on a machine the canary says ran 10 % slower: the lower bound clears the
    threshold beyond the drift, a REGRESSION that names the drift; a model 12 % slower on the same
    machine (its slowdown within the drift plus the threshold) stays INCONCLUSIVE."""
    far = compare_runs([rec(calls(1), canary(1))], [rec(calls(2, scale=1.6), canary(2, scale=1.1))])
    assert far.drift[VARIANT]["drifted"] and far.exit_code == 1
    assert p50(far).verdict is Verdict.REGRESSION and "beyond the machine drift: canary +" in p50(far).reason
    near = compare_runs([rec(calls(1), canary(1))], [rec(calls(2, scale=1.12), canary(2, scale=1.1))])
    assert p50(near).verdict is Verdict.INCONCLUSIVE and p50(near).reason.startswith("machine drift")


def test_real_slowdown_with_quiet_canaries_is_still_a_regression() -> None:
    result = compare_runs([rec(calls(1), canary(1))], [rec(calls(2, scale=1.25), canary(2))])
    row = p50(result)
    assert row.verdict is Verdict.REGRESSION and not result.drift[VARIANT]["drifted"]
    assert result.exit_code == 1


def test_between_run_spread_only_widens() -> None:
    lo, hi, p = widen(1.10, 1.08, 1.12, 1e-8, 0.05)
    assert lo < 1.08 and hi > 1.12 and p > 1e-8
    lo0, hi0, p0 = widen(1.10, 1.08, 1.12, 0.5, 0.0)  # no spread: the log-symmetric hull of the interval
    assert lo0 == 1.08 and 1.12 <= hi0 < 1.121 and p0 == 0.5
    base = np.asarray(canary(1)["samples"])
    quiet = judge_drift(base, np.asarray(canary(2)["samples"]))
    assert not quiet.drifted and quiet.between_sd >= 0.015
    small = judge_drift(base, base * (1 + DRIFT_TOLERANCE / 2))
    assert not small.drifted  # beyond the noise but below the tolerance
    assert judge_drift(None, base).between_sd == 0.015
