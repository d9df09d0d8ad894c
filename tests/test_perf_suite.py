"""The performance suite and its pytest options end to end (pytester), and ``harness bench``.

Sample counts are tiny: these tests check what is recorded and decided, never how fast
anything is (no absolute time is asserted anywhere).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnxruntime  # noqa: F401,E402
import pytest

# pytester's in-process runs drop modules first imported inside them; native extensions
# (onnx's protobuf registry) abort when imported twice, so import the stack up front.
import harness.export.artifacts  # noqa: F401,E402
import harness.judge.numeric  # noqa: F401,E402
import harness.judge.workspace  # noqa: F401,E402
import harness.perf.generation  # noqa: F401,E402
import harness.runners  # noqa: F401,E402

SUITE = (Path(__file__).resolve().parents[1] / "harness" / "suites" / "test_perf.py").read_text()
FAST = ["--harness-perf-samples=12", "--harness-perf-warmup=2", "--harness-perf-repeats=1", "--harness-perf-tail-seconds=0",
        "--harness-threads=1", "-p", "no:cacheprovider"]

BUDGET_CONFTEST = '''
from harness.zoo.base import ModelSpec, materialize, register, registered
from harness.zoo.encoder_custom import ENCODER_CUSTOM

if "encoder-budget" not in registered():
    register(ModelSpec(name="encoder-budget", family="encoder", description="encoder-custom with budgets",
                       path=materialize(ENCODER_CUSTOM), budgets={"p50_ms": 1e-9, "artifact_mb": 1e6},
                       default=False))  # the registry outlives this run: keep it out of default model lists
'''


def _records(path: Path) -> dict[str, dict]:
    lines = (path / "results.jsonl").read_text().splitlines()
    return {r["id"]: r for r in map(json.loads, filter(None, lines))}


def test_suite_is_skipped_with_a_reason_and_no_records_without_the_option(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_perf=SUITE)
    out = tmp_path / "run"
    result = pytester.runpytest_inprocess("--harness-models=encoder-custom", f"--harness-out={out}", "-rs",
                                          "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*test_perf.py*performance suite not requested (use --harness-perf)*"])
    assert not (out / "results.jsonl").exists()


def test_perf_records_latency_cold_start_memory_and_saves_a_baseline(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_perf=SUITE)
    out, store = tmp_path / "run", tmp_path / "baselines"
    result = pytester.runpytest_inprocess(
        "--harness-models=encoder-custom", "--harness-precisions=fp32,int8", "--harness-providers=ort_cpu",
        "--harness-perf", "--harness-perf-batch-sizes=1,2", "--harness-perf-seq-lens=8", *FAST,
        f"--harness-out={out}", f"--harness-baseline-store={store}", "--harness-baseline-save=first")
    # skipped: the generation test (no generative model here) and test_artifact_perf (no config artifacts)
    result.assert_outcomes(passed=4, skipped=2)
    result.stdout.fnmatch_lines(["*harness perf: 12 samples after 2 warmup*", "*saved baseline 'first': 4 perf record(s)*"])
    records = _records(out)
    lat = records["test_latency[encoder-custom-fp32-ort_cpu]"]["perf"]
    assert set(k for k in lat if k.startswith("latency_ms")) == {"latency_ms", "latency_ms[bs=2,seq=8]"}
    primary = lat["latency_ms"]
    assert len(primary["samples"]) == 12 and primary["warmup"] == 2 and primary["batch_size"] == 1
    # pytest-benchmark times the primary metric, unless it disabled itself (it does in any xdist worker)
    engine = "harness" if os.environ.get("PYTEST_XDIST_WORKER") else "pytest-benchmark"
    assert primary["engine"] == engine and lat["latency_ms[bs=2,seq=8]"]["engine"] == "harness"
    assert primary["summary"]["low_confidence"]["p99"] is True
    assert lat["throughput"] == primary["throughput"] and lat["settings"]["threads"]["ort_intra_op_threads"] == 1
    cold = {v: records[f"test_cold_start_memory[encoder-custom-{v}-ort_cpu]"] for v in ("fp32", "int8")}
    for record in cold.values():
        perf = record["perf"]
        assert set(perf["cold_start_ms"]) == {"load", "first_inference", "import", "process"}
        assert perf["peak_rss_bytes"] > perf["imports_rss_bytes"] > perf["baseline_rss_bytes"] > 0
        assert record["env"]["fingerprint"] and record["env"]["threads"]["ort_intra_op_threads"] == 1
    assert cold["int8"]["perf"]["artifact_bytes"] < cold["fp32"]["perf"]["artifact_bytes"]
    saved = [json.loads(line) for line in (store / "first" / "results.jsonl").read_text().splitlines()]
    assert len(saved) == 4 and all("perf" in r for r in saved)
    # the latency record lists the file it timed with its cache key: the session-end gate re-times it paired
    timed = records["test_latency[encoder-custom-int8-ort_cpu]"]["artifacts"]["model/model.onnx"]
    assert timed["cache_key"] and timed["cache_entry"] == Path(timed["path"]).parent.name
    again = pytester.runpytest_inprocess(
        "--harness-models=encoder-custom", "--harness-precisions=fp32,int8", "--harness-providers=ort_cpu",
        "--harness-perf-batch-sizes=1,2", "--harness-perf-seq-lens=8", "-k", "latency", *FAST,
        f"--harness-out={tmp_path / 'again'}", f"--harness-baseline-store={store}", "--harness-baseline-compare=first",
        "--harness-allow-missing")  # only the latency cases: the cold-start rows are missing by intent
    report = json.loads((tmp_path / "again" / "perf-compare.json").read_text())
    assert report["mode"] == "paired" and report["mode_reason"].startswith("paired: 2 variant(s) re-timed"), \
        (report["mode_reason"], report["pairing"])
    assert {r["metric"] for r in report["rows"] if r["reason"].startswith("paired")} >= {
        "latency_ms.p50", "latency_ms[bs=2,seq=8].p50"}
    again.stdout.fnmatch_lines(["*note: paired: 2 variant(s) re-timed interleaved*"])
    assert again.ret == 0  # the same artifacts, re-timed side by side: no regression


def test_compare_option_fails_the_session_only_on_a_confirmed_regression(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_perf=SUITE)
    store = tmp_path / "baselines"
    args = ["--harness-models=encoder-custom", "--harness-precisions=fp32", "--harness-providers=ort_cpu",
            "-k", "cold_start", *FAST, f"--harness-baseline-store={store}"]
    first = pytester.runpytest_inprocess(*args, f"--harness-out={tmp_path / 'a'}", "--harness-baseline-save=main")
    assert first.ret == 0
    same = pytester.runpytest_inprocess(*args, f"--harness-out={tmp_path / 'b'}", "--harness-baseline-compare=main")
    assert same.ret == 0  # an unchanged artifact (and only advisory/inconclusive timing) passes
    same.stdout.fnmatch_lines(["*harness performance gate*", "*OK: no gating regression*"])
    # Bless a baseline whose artifact was half the size: the candidate's is then a regression.
    path = store / "main" / "results.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        row["perf"]["artifact_bytes"] //= 2
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    worse = pytester.runpytest_inprocess(*args, f"--harness-out={tmp_path / 'c'}", "--harness-baseline-compare=main",
                                         "--harness-baseline-save=main")
    assert worse.ret == 1
    worse.stdout.fnmatch_lines(["*artifact_bytes*REGRESSION*", "*FAIL: 1 gating regression*",
                                "*baseline 'main' not saved: the session failed*"])
    report = json.loads((tmp_path / "c" / "perf-compare.json").read_text())
    assert report["exit_code"] == 1
    assert json.loads(path.read_text().splitlines()[0])["perf"]["artifact_bytes"] == rows[0]["perf"]["artifact_bytes"]


def test_budgets_fail_the_case_with_number_and_budget(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_perf=SUITE)
    pytester.makeconftest(BUDGET_CONFTEST)
    out = tmp_path / "run"
    result = pytester.runpytest_inprocess("--harness-models=encoder-budget", "--harness-precisions=fp32",
                                          "--harness-providers=torch_cpu", "--harness-perf", "-k", "latency", *FAST,
                                          f"--harness-out={out}")
    result.assert_outcomes(failed=1)
    record = _records(out)["test_latency[encoder-budget-fp32-torch_cpu]"]
    assert record["verdict"] == "fail"
    assert "1 performance budget(s) exceeded" in record["reason"] and "budget p50_ms <= 1e-09" in record["reason"]
    assert record["thresholds"]["perf.p50_ms"] == {"threshold": 1e-9, "op": "<="}
    assert record["metrics"]["perf.p50_ms"] == record["perf"]["latency_ms"]["summary"]["p50"]


@pytest.mark.parametrize("argv, message", [
    (["--harness-perf", "--harness-perf-batch-sizes=0"], "--harness-perf-batch-sizes: must be >= 1, got 0"),
    (["--harness-baseline-compare=nope"], "unknown baseline 'nope'"),
    (["--harness-baseline-save=../x"], "invalid baseline name '../x'"),
])
def test_bad_perf_options_are_usage_errors(pytester: pytest.Pytester, tmp_path, argv, message):
    pytester.makepyfile(test_perf=SUITE)
    result = pytester.runpytest_inprocess(*argv, f"--harness-baseline-store={tmp_path}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_torch_child_loads_weights_in_a_fresh_process(workspace, tmp_path):
    from harness.core import Precision, Variant
    from harness.perf import coldstart
    from harness.runners import PROVIDERS

    fp16_torch = Variant("encoder-custom", Precision.FP16, PROVIDERS["torch_cpu"])

    model = workspace.model("encoder-custom")
    family = workspace.family(model)
    graphs = family.graphs(model)
    feeds = coldstart.write_feeds(tmp_path / "f.npz", {"model": family.feeds(model, graphs[0], ["one two", "three"])})
    args = coldstart.child_args(workspace, fp16_torch, model, family, graphs,
                                feeds, calls=1)
    (run,) = coldstart.fresh_runs(args, 1)
    assert set(run["load_ms_by_graph"]) == {"weights", "model"}  # shared weights, then each graph (FP16 copy)
    assert run["load_ms"] >= sum(run["load_ms_by_graph"].values())
    assert run["settings"]["torch"]["device"] == "cpu" and run["first_inference_ms"] > 0
    assert run["import_ms"] > 0 and run["process_ms"] > run["ready_ms"]


def test_bench_command_prints_and_writes_ratios(tmp_path, capsys, monkeypatch):
    from harness.cli import main

    monkeypatch.setenv("COLUMNS", "250")  # one table row per line, whatever the terminal

    out = tmp_path / "bench.json"
    code = main(["bench", "--models", "encoder-custom", "--providers", "torch_cpu", "ort_cpu", "--rounds", "2",
                 "--calls", "3", "--seq-len", "8", "--threads", "1", "--json", str(out),
                 "--markdown", str(tmp_path / "bench.md")])
    assert code == 0
    text = capsys.readouterr().out
    assert "ORT FP32 vs PyTorch eager FP32, latency" in text and "one forward call, batch 1 x 8 tokens" in text
    payload = json.loads(out.read_text())
    rows = {r["label"]: r for r in payload["rows"]}
    assert len(rows) == 5 and payload["settings"]["threads"] == 1
    size = rows["ORT INT8 vs ORT FP32, artifact size"]
    assert size["ratio"] < 1 and size["lo"] is None
    latency = rows["ORT INT8 vs ORT FP32, latency"]
    assert latency["lo"] <= latency["ratio"] <= latency["hi"]
    assert {k: v["n"] for k, v in payload["models"]["encoder-custom"]["summaries"].items()} == {
        "torch-fp32": 6, "ort-fp32": 6, "ort-int8": 6, "ort-fp16": 6}
    assert "| encoder-custom | ORT INT8 vs ORT FP32, artifact size |" in (tmp_path / "bench.md").read_text()


def test_bench_command_rejects_bad_input(capsys):
    from harness.cli import main

    assert main(["bench", "--rounds", "0"]) == 2
    assert main(["bench", "--models", "encoder-custm"]) == 2
    assert main(["bench", "--providers", "ov_cpuu"]) == 2
    err = capsys.readouterr().err
    assert "--rounds: must be >= 1, got 0" in err and "did you mean 'encoder-custom'" in err
    assert "--providers: unknown provider 'ov_cpuu'" in err


def test_config_budgets_mean_and_cold_start_are_checked_not_errors(pytester: pytest.Pytester, tmp_path):
    """docs/config.md documents ``mean_ms`` and ``cold_start_ms``: a harness.toml declaring them once
    turned every perf case into an error (the validator knew them, the budget check did not).
    A subprocess, as CI runs it: the config overrides a zoo model for that run only."""
    pytester.makepyfile(test_perf=SUITE)
    pytester.makefile(".toml", harness="""
[run]
models = ["encoder-custom"]
precisions = ["fp32"]
providers = ["ort_cpu"]

[models.encoder-custom.budgets]
mean_ms = 1e-9
cold_start_ms = 1e9
""")
    out = tmp_path / "run"
    result = pytester.runpytest_subprocess("--harness-perf", "-k", "latency or cold_start", *FAST,
                                           f"--harness-out={out}")
    result.assert_outcomes(passed=1, failed=1)
    records = _records(out)
    latency = records["test_latency[encoder-custom-fp32-ort_cpu]"]
    assert latency["verdict"] == "fail" and "budget mean_ms <= 1e-09" in latency["reason"]
    assert latency["metrics"]["perf.mean_ms"] == latency["perf"]["latency_ms"]["summary"]["mean"]
    cold = records["test_cold_start_memory[encoder-custom-fp32-ort_cpu]"]
    assert cold["verdict"] == "pass"
    measured = cold["perf"]["cold_start_ms"]
    assert cold["metrics"]["perf.cold_start_ms"] == measured["load"] + measured["first_inference"]
    assert cold["thresholds"]["perf.cold_start_ms"] == {"threshold": 1e9, "op": "<="}
