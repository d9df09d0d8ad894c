"""Paired interleaved A/B and multi-run baselines (issue 13)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from waiting import PATIENCE

from harness.gate.compare import Verdict
from harness.gate.paired import PairedSamples, exit_code, interleave, judge_paired


def _drifting(pairs: int, block: int, factor: float, seed: int = 0) -> PairedSamples:
    """Latencies whose level drifts 3x over the session (a neighbour comes and goes); B is A x factor."""
    rng = np.random.default_rng(seed)
    level = np.linspace(1.0, 3.0, pairs)[:, None] * np.where(np.arange(pairs) % 3 == 0, 2.0, 1.0)[:, None]
    a = level * (0.2 + 0.01 * rng.standard_normal((pairs, block)))
    b = level * factor * (0.2 + 0.01 * rng.standard_normal((pairs, block)))
    return PairedSamples(a, b, ("A",) * pairs)


def test_drift_cancels_in_pairs_a_over_a_passes():
    rows = judge_paired(_drifting(20, 50, 1.0))
    assert all(r.verdict is not Verdict.REGRESSION for r in rows) and exit_code(rows) == 0


def test_a_real_slowdown_is_a_regression_despite_drift():
    rows = judge_paired(_drifting(20, 50, 1.25))
    assert {r.stat: r.verdict for r in rows} == {"p50": Verdict.REGRESSION, "p90": Verdict.REGRESSION}
    assert exit_code(rows) == 1
    p50 = rows[0]
    assert p50.ci_lo > 1.05 and p50.ratio == pytest.approx(1.25, rel=0.03)


def _process_biased(groups: int, per_group: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A/A pairs timed by ``groups`` process pairs: each process pair's B child is a few percent
    faster or slower than its A child for the whole of its life (where its buffers landed), which
    every pair of that process pair repeats; over process pairs the bias averages out."""
    rng = np.random.default_rng(seed)
    bias = np.repeat(np.exp(rng.normal(0.0, 0.06, groups)), per_group)[:, None]
    a = 0.2 + 0.002 * rng.standard_normal((groups * per_group, 40))
    return a, a * bias * (1 + 0.002 * rng.standard_normal(a.shape))


def test_a_process_pairs_shared_bias_counts_once_per_process_pair_not_once_per_block_pair():
    """One process pair whose B child is 8 % slower: nine block pairs of it read as a significant
    REGRESSION when judged per pair, and as one process pair -- too few to judge -- when the
    samples say which process pair timed them (harness.gate.envpair). Over ten process pairs the
    same kind of per-process bias is noise between them: an A/A, not a change."""
    a = 0.2 + 0.001 * np.random.default_rng(1).standard_normal((9, 40))
    b = a * 1.08
    per_pair = judge_paired(PairedSamples(a, b, ("A",) * 9), ("p50",))[0]
    assert per_pair.verdict is Verdict.REGRESSION
    one_process = judge_paired(PairedSamples(a, b, ("A",) * 9, (0,) * 9), ("p50",))[0]
    assert one_process.verdict is Verdict.INCONCLUSIVE and "too few process pairs: 1 < 8" in one_process.reason
    for seed in range(5):
        a, b = _process_biased(10, 3, seed)
        groups = tuple(np.repeat(np.arange(10), 3))
        row = judge_paired(PairedSamples(a, b, ("A",) * 30, groups), ("p50",))[0]
        assert row.verdict is not Verdict.REGRESSION and "paired, 30 pairs in 10 process pairs" in row.reason


def test_too_few_pairs_is_inconclusive():
    rows = judge_paired(_drifting(4, 50, 2.0))
    assert all(r.verdict is Verdict.INCONCLUSIVE and "too few pairs" in r.reason for r in rows)


def test_interleave_alternates_order_and_times_each_side():
    ticks = iter(range(0, 10**9, 1000))
    seen = []
    samples = interleave(lambda: seen.append("A"), lambda: seen.append("B"), pairs=10, block=3, warmup=0,
                         clock=lambda: next(ticks))
    assert samples.a.shape == samples.b.shape == (10, 3)
    assert set(samples.first) == {"A", "B"}
    # each block is one run of the perf suite's loop: SETTLE_CALLS untimed calls, then the timed ones
    from harness.perf.loop import SETTLE_CALLS

    assert seen.count("A") == seen.count("B") == 10 * (SETTLE_CALLS + 3)
    assert seen[:SETTLE_CALLS + 3] in (["A"] * (SETTLE_CALLS + 3), ["B"] * (SETTLE_CALLS + 3))  # a block is one side's
    assert np.all(samples.a == 0.001)


def test_multirun_baseline_pools_runs_equally_and_takes_scalar_medians():
    from harness.gate.multirun import aggregate_runs
    from harness.results import Record

    def run(samples, rss):
        return [Record.from_dict({"id": "test_latency[m-fp32-ort_cpu]", "verdict": "pass", "variant": "m-fp32-ort_cpu",
                                  "perf": {"latency_ms": {"samples": samples}, "peak_rss_bytes": rss}})]

    (agg,) = aggregate_runs([run([1.0] * 100, 10), run([2.0] * 10, 30), run([3.0] * 20, 20)])
    pooled = agg.perf["latency_ms"]["samples"]
    assert len(pooled) == 30 and pooled.count(1.0) == pooled.count(2.0) == pooled.count(3.0) == 10
    assert agg.perf["peak_rss_bytes"] == 20 and agg.data["aggregated_runs"] == 3


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; raise SystemExit(entrypoint())",
                           *args], capture_output=True, text=True, timeout=PATIENCE)


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory):
    import torch

    path = tmp_path_factory.mktemp("pc") / "mlp.onnx"
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).eval()
    torch.onnx.export(model, (torch.randn(1, 16),), str(path), input_names=["x"], output_names=["y"], dynamo=False,
                      dynamic_axes={"x": {0: "batch"}})
    return path


def test_perf_compare_cli_a_over_a_and_bad_input(tiny_onnx, tmp_path):
    out = tmp_path / "ab.json"
    done = _cli("perf-compare", str(tiny_onnx), str(tiny_onnx), "--pairs", "10", "--block", "20", "--json", str(out))
    assert done.returncode in (0, 1), done.stderr
    assert "p50" in done.stdout and out.is_file()
    missing = _cli("perf-compare", str(tiny_onnx), str(tmp_path / "nope.onnx"))
    assert missing.returncode == 2 and "nope.onnx" in missing.stderr and "Traceback" not in missing.stderr
    provider = _cli("perf-compare", str(tiny_onnx), str(tiny_onnx), "--providers", "torch_cpu")
    assert provider.returncode == 2 and "--providers" in provider.stderr


def test_baseline_save_aggregates_several_run_dirs(tmp_path):
    from harness.gate.baseline import load_baseline
    from harness.results import Record, write_records

    dirs = []
    for i, samples in enumerate(([1.0] * 60, [2.0] * 60)):
        run = tmp_path / f"run{i}"
        run.mkdir()
        write_records(run / "results.jsonl", [Record.from_dict({
            "id": "test_latency[m-fp32-ort_cpu]", "verdict": "pass", "variant": "m-fp32-ort_cpu",
            "perf": {"latency_ms": {"samples": samples}}})])
        dirs.append(str(run))
    store = tmp_path / "store"
    done = _cli("baseline", "save", *dirs, "--name", "multi", "--baseline-store", str(store))
    assert done.returncode == 0, done.stderr
    assert "2 runs (aggregated)" in done.stdout
    (rec,) = load_baseline("multi", store).records
    assert sorted(set(rec.perf["latency_ms"]["samples"])) == [1.0, 2.0] and rec.data["aggregated_runs"] == 2
    empty = _cli("baseline", "save", "--name", "x", "--baseline-store", str(store))
    assert empty.returncode == 2 and "RUN_DIR" in empty.stderr


def test_joining_grouped_and_ungrouped_samples_is_refused():
    """A join that dropped the process pairs would judge per block pair without a word."""
    a = np.ones((2, 3))
    grouped, plain = PairedSamples(a, a, ("A", "B"), (0, 1)), PairedSamples(a, a, ("A", "B"))
    assert (grouped + grouped).groups == (0, 1, 2, 3) and (plain + plain).groups == ()
    with pytest.raises(ValueError, match="per process pair"):
        grouped + plain
