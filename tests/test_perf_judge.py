"""harness.gate.judge: the one judge on each kind of evidence, with known truth and negative controls.

Each kind gets a regression it must call, an A/A it must pass, and a noisy A/A that may be
INCONCLUSIVE or PASS but never a REGRESSION. The canary-adjusted two-run evidence is generated the
way a loaded machine makes it: every segment of calls, and the canary block before it, slowed by
the same random factor.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.gate.compare import DEFAULT_POLICIES, compare_runs
from harness.gate.evidence import CanaryBlocks, Evidence, EvidenceKind
from harness.gate.judge import judge
from harness.gate.policy import POLICY, markdown
from harness.gate.row import Verdict
from harness.perf.canary import WORKLOAD, Canary, Interleaved
from tests.perf_records import measured_processes

SEGMENT = 25


def run(seed: int, *, scale: float = 1.0, machine: float = 0.0, segments: int = 40,
        machine_scale: float = 1.0) -> tuple[np.ndarray, CanaryBlocks]:
    """One run's calls and its interleaved canary: ``machine`` is the log-sd of the machine's speed
    from segment to segment (both slowed alike); ``machine_scale`` slows the whole run's machine."""
    rng = np.random.default_rng(seed)
    speed = machine_scale * rng.lognormal(0.0, machine, segments) if machine else np.full(segments, machine_scale)
    calls = 2.0 * scale * rng.lognormal(0.0, 0.05, (segments, SEGMENT)) * speed[:, None]
    canary = 0.08 * speed * rng.lognormal(0.0, 0.02, segments)
    return calls.ravel(), CanaryBlocks(tuple(canary), tuple(range(SEGMENT, SEGMENT * segments + 1, SEGMENT)))


def two_runs(base: tuple[np.ndarray, CanaryBlocks], cand: tuple[np.ndarray, CanaryBlocks], *,
             adjusted: bool = True) -> dict[str, Verdict]:
    ev = Evidence(EvidenceKind.TWO_RUNS, "v", "latency_ms", ("p50", "p90"), base[0], cand[0],
                  canary=(base[1], cand[1]) if adjusted else None)
    rows = judge(ev, DEFAULT_POLICIES)
    assert all(r.evidence == "two-runs" and r.counts == (base[0].size, cand[0].size) for r in rows)
    if adjusted:
        assert all("canary-adjusted, 40+40 segments" in r.reason for r in rows), rows
    return {r.stat: r.verdict for r in rows}


def test_two_runs_canary_adjusted_sees_through_a_wandering_machine() -> None:
    """Segment-to-segment machine noise of 30 % (canary and model alike): unadjusted, a +25 % slowdown
    is lost in it (never called); adjusted, it is a REGRESSION; the same noise around no change, and
    a candidate whose whole machine ran 40 % slower, are never REGRESSION (4 seeds each)."""
    slower = two_runs(run(1, machine=0.3), run(2, scale=1.25, machine=0.3))
    assert slower["p50"] is Verdict.REGRESSION, slower
    raw = two_runs(run(1, machine=0.3), run(2, scale=1.25, machine=0.3), adjusted=False)
    assert raw["p50"] is not Verdict.REGRESSION, raw
    for seed in range(4):
        same = two_runs(run(10 + seed, machine=0.3), run(50 + seed, machine=0.3))
        assert Verdict.REGRESSION not in same.values(), (seed, same)
        busier = two_runs(run(10 + seed, machine=0.1), run(50 + seed, machine=0.1, machine_scale=1.4))
        assert busier["p50"] in (Verdict.PASS, Verdict.INCONCLUSIVE), (seed, busier)


def test_two_runs_quiet_a_a_passes_and_a_slowdown_fails_through_compare_runs() -> None:
    """The records' ``canary`` segments reach the judge through the reader (compare_runs)."""
    def rec(sample: tuple[np.ndarray, CanaryBlocks]) -> dict[str, object]:
        entry = {"samples": sample[0].tolist(), "canary": {"workload": WORKLOAD, "block_medians": list(sample[1].medians),
                                                           "segment_ends": list(sample[1].ends)}}
        return {"schema": "harness.result/1", "id": "test_latency[v]", "variant": "v", "suite": "perf", "verdict": "pass",
                "metrics": {}, "env": {"fingerprint": "f"},
                "perf": {"latency_ms": entry, "cold_start_runs": measured_processes()}}

    same = compare_runs([rec(run(1))], [rec(run(2))])
    p50 = next(r for r in same.rows if r.stat == "p50")
    assert p50.verdict is Verdict.PASS and "canary-adjusted" in p50.reason and same.exit_code == 0, p50
    slower = compare_runs([rec(run(1))], [rec(run(2, scale=1.25))])
    assert next(r for r in slower.rows if r.stat == "p50").verdict is Verdict.REGRESSION and slower.exit_code == 1
    misaligned = rec(run(2, scale=1.25))
    misaligned["perf"]["latency_ms"]["samples"] = misaligned["perf"]["latency_ms"]["samples"][:500]  # type: ignore[index]
    plain = compare_runs([rec(run(1))], [misaligned])
    assert "canary-adjusted" not in next(r for r in plain.rows if r.stat == "p50").reason  # the record-level rule


def paired(seed: int, scale: float = 1.0, noise: float = 0.0, pairs: int = 20) -> Evidence:
    rng = np.random.default_rng(seed)
    machine = rng.lognormal(0.0, noise, pairs)[:, None] if noise else 1.0
    a = 2.0 * rng.lognormal(0.0, 0.05, (pairs, 50)) * machine
    b = 2.0 * scale * rng.lognormal(0.0, 0.05, (pairs, 50)) * machine
    return Evidence(EvidenceKind.PAIRED, "v", "latency_ms", ("p50", "p90"), a, b, seed=seed)


@pytest.mark.parametrize(("scale", "noise", "allowed"), [
    (1.25, 0.3, {Verdict.REGRESSION}),  # drift shared by both sides of a pair cancels
    (1.0, 0.0, {Verdict.PASS}),
    (1.0, 0.3, {Verdict.PASS, Verdict.INCONCLUSIVE}),
])
def test_paired(scale: float, noise: float, allowed: set[Verdict]) -> None:
    for seed in range(5):
        rows = judge(paired(seed, scale, noise), DEFAULT_POLICIES)
        assert {r.verdict for r in rows} <= allowed, (seed, rows)
        assert all(r.evidence == "paired" and r.counts == (20, 20) for r in rows)
    few = judge(paired(0, 1.5, pairs=POLICY[EvidenceKind.PAIRED].min_units - 1), DEFAULT_POLICIES)
    assert all(r.verdict is Verdict.INCONCLUSIVE and "too few pairs" in r.reason for r in few)


@pytest.mark.parametrize(("base", "cand", "verdict"), [
    (400e6, 480e6, Verdict.REGRESSION),
    (400e6, 400e6, Verdict.PASS),
    (400e6, 412e6, Verdict.PASS),  # below the 5 % threshold
    (10e6, 20e6, Verdict.PASS),  # +100 % but below the 32 MiB floor: small numbers trip no relative threshold
    (400e6, 320e6, Verdict.IMPROVEMENT),
])
def test_single_numbers(base: float, cand: float, verdict: Verdict) -> None:
    ev = Evidence(EvidenceKind.SINGLE, "v", "peak_rss_bytes", ("peak_rss_bytes",), np.asarray([base]),
                  np.asarray([cand]), unit="bytes")
    (row,) = judge(ev, DEFAULT_POLICIES)
    assert row.verdict is verdict and row.metric == "peak_rss_bytes" and row.counts == (1, 1), row


def test_interleaved_segments_follow_the_samples_kept() -> None:
    """A stopping rule's calibration round is dropped and a tail sampler's extra calls come after
    the last segment: the entry's segments cover exactly the kept rounds, in order."""
    ticks = iter(range(1, 10**6))

    def timed(n: int, warmup: int) -> list[float]:
        return [float(next(ticks)) for _ in range(n)]

    interleaved = Interleaved(Canary(calls=5), segment=10, calls=3)
    rounds = interleaved.rounds(timed)
    rounds(3, 5)  # calibration, discarded
    kept = rounds(25, 0) + rounds(12, 0)
    entry = interleaved.entry(kept + [999.0, 998.0])  # a tail's extra calls
    assert entry is not None and entry["segment_ends"] == [10, 20, 25, 35, 37] and len(entry["block_medians"]) == 5
    assert CanaryBlocks.read(entry, len(kept) + 2) is not None
    assert CanaryBlocks.read(entry, 30) is None  # segments beyond the samples: not aligned, not used
    assert interleaved.entry([123.0]) is None


def test_the_docs_print_the_policy_table_rendered_from_the_one_declaration() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "perf-gate.md").read_text(encoding="utf-8")
    assert "\n".join(markdown()) in doc, "run scripts/render_metric_docs.py"


def test_two_runs_with_too_few_canary_segments_fall_back_to_the_record_level_rule() -> None:
    """A short run (here 5 segments of 25 calls, under the 8 the adjusted rule needs) is judged by
    the record-level rule: a +25 % slowdown is still a ratio and a verdict, never 'no ratio'."""
    rows = judge(Evidence(EvidenceKind.TWO_RUNS, "v", "latency_ms", ("p50",), *(s for s, _ in (run(1, segments=5),
                 run(2, scale=1.25, segments=5))), canary=(run(1, segments=5)[1], run(2, segments=5)[1])),
                 DEFAULT_POLICIES)
    (p50,) = rows
    assert "no ratio" not in p50.reason and "canary-adjusted" not in p50.reason, p50.reason
    assert p50.ratio == pytest.approx(1.25, rel=0.05) and p50.verdict is not Verdict.PASS, p50
