"""harness.perf measurement pieces: timing loops (with scripted clocks, never absolute
times), record entries, shaped feeds, budgets, interleaving, generation timing and the
fresh-process child."""

from __future__ import annotations

import gc
import itertools
import json
import sys
from collections import Counter
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.core import Precision, UsageError, Variant
from harness.families.shaped_feeds import shapeable, shaped_feeds
from harness.perf import bench, budgets, child, coldstart, latency, memory
from harness.perf.canary import SEGMENT_CALLS
from harness.perf.generation import sample_generation
from harness.perf.measure import (
    LOOP,
    SETTLE_CALLS,
    BenchmarkEngine,
    HarnessEngine,
    PerfSettings,
    engine_for,
    latency_entry,
    latency_key,
    parse_sizes,
    time_calls,
    timed_call,
)
from harness.runners import PROVIDERS
from harness.runners.base import GraphRef, GraphRunner


def variant(model: str, precision: str = "fp32", provider: str = "ort_cpu") -> Variant:
    return Variant(model, Precision(precision), PROVIDERS[provider])


def scripted_clock(*ticks_ns: int):
    it = iter(ticks_ns)
    return lambda: next(it)


# --------------------------------------------------------------------------- timing loops


def test_time_calls_times_each_call_alone_after_warmup():
    calls, syncs = [], []
    clock = scripted_clock(0, 1_000_000, 5_000_000, 7_500_000, 10_000_000, 10_250_000)
    samples = time_calls(lambda: calls.append(1), 3, warmup=7, sync=lambda: syncs.append(1), clock=clock)
    assert samples == [1.0, 2.5, 0.25]
    assert len(calls) == 10 and len(syncs) == 10  # warmup calls are synchronised too, but not timed


def test_time_calls_freezes_the_heap_without_walking_it_and_settles_before_timing():
    """No full collection walks the harness's heap for a timed loop -- not before it (loop version 2
    collected first: 0.1-0.25 s and cold caches per loop), not during it --, the heap is frozen for
    every call (settle and timed), unfrozen afterwards, and SETTLE_CALLS untimed calls come first."""
    events: list[str] = []
    frozen: list[int] = []

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            events.append(f"gc{info['generation']}")

    def call() -> None:
        events.append("call")
        frozen.append(gc.get_freeze_count())

    ticks = iter(range(0, 10**9, 1000))
    before = gc.get_freeze_count()
    gc.callbacks.append(on_gc)
    try:
        samples = time_calls(call, 4, warmup=0, clock=lambda: next(ticks))
    finally:
        gc.callbacks.remove(on_gc)
    assert "gc2" not in events
    assert events.count("call") == SETTLE_CALLS + 4 and len(samples) == 4
    assert min(frozen) > before  # the harness's heap is out of reach of collections while timing
    assert gc.get_freeze_count() == before  # and unfrozen afterwards
    assert LOOP["version"] == 3 and "not collected" in LOOP["gc"]


def test_latency_entry_says_what_the_timing_loop_did():
    entry = latency_entry([1.0, 2.0], warmup=3, engine="harness")
    assert entry["loop"] == LOOP and entry["loop"]["settle_calls"] == SETTLE_CALLS
    assert json.loads(json.dumps(entry))["loop"]["version"] == LOOP["version"]


def test_time_calls_rejects_zero_rounds():
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        time_calls(lambda: None, 0)


class FakeBenchmark:
    def __init__(self, disabled: bool = False) -> None:
        self.disabled, self.extra_info, self.calls = disabled, {}, []

    def pedantic(self, target, rounds, iterations, warmup_rounds):
        self.calls.append((rounds, iterations, warmup_rounds))
        for _ in range(warmup_rounds + rounds):
            target()
        self.stats = SimpleNamespace(stats=SimpleNamespace(data=[0.001 * (i + 1) for i in range(rounds)]))


def test_benchmark_engine_uses_one_call_per_round_and_returns_ms():
    fixture, hits = FakeBenchmark(), []
    engine = engine_for(fixture, sync=lambda: hits.append("sync"))
    assert isinstance(engine, BenchmarkEngine) and engine.name == "pytest-benchmark"
    samples = engine(lambda: hits.append("call"), 3, 2)
    assert samples == pytest.approx([1.0, 2.0, 3.0])
    assert fixture.calls == [(3, 1, SETTLE_CALLS)]  # warm-up rounds at least SETTLE_CALLS (time_calls' order)
    assert hits == ["call", "sync"] * (3 + SETTLE_CALLS)
    with pytest.raises(RuntimeError, match="one metric per test"):
        engine(lambda: None, 3, 0)


def test_engine_falls_back_to_the_harness_loop():
    assert isinstance(engine_for(None), HarnessEngine)
    assert isinstance(engine_for(FakeBenchmark(disabled=True)), HarnessEngine)


# --------------------------------------------------------------------------- settings and record entries


def test_perf_settings_validate_with_option_names():
    with pytest.raises(UsageError, match="--harness-perf-samples: must be >= 1"):
        PerfSettings(samples=0)
    with pytest.raises(UsageError, match="--harness-perf-batch-sizes"):
        PerfSettings(batch_sizes=(0,))
    assert parse_sizes("1,8 32", "--x") == (1, 8, 32)
    assert parse_sizes(None, "--x") is None
    with pytest.raises(UsageError, match="--harness-perf-seq-lens: 'x' is not an integer"):
        parse_sizes("8,x", "--harness-perf-seq-lens")


def test_latency_keys():
    assert latency_key() == "latency_ms"
    assert latency_key(batch_size=8, seq_len=64) == "latency_ms[bs=8,seq=64]"
    assert latency_key(graph="decoder_with_past") == "latency_ms[graph=decoder_with_past]"
    assert latency_key(gen="tpot", kv="on") == "latency_ms[gen=tpot,kv=on]"


def test_latency_entry_keeps_samples_and_flags_low_confidence_percentiles():
    samples = [2.0] * 40 + [4.0] * 10
    entry = latency_entry(samples, warmup=5, engine="harness", items_per_call=8, graph="model")
    assert entry["samples"] == samples and entry["warmup"] == 5 and entry["graph"] == "model"
    s = entry["summary"]
    assert s["n"] == 50 and s["p50"] == 2.0 and s["max"] == 4.0
    assert s["low_confidence"] == {"p50": False, "p90": True, "p95": True, "p99": True}
    assert entry["throughput"] == pytest.approx(8 * 1000.0 / 2.4)  # items per second at the mean


# --------------------------------------------------------------------------- what is timed


def _int64_identity(path):
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.INT64, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, ["n"])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_timed_call_runs_the_ort_session_on_feeds_cast_once(tmp_path):
    from harness.runners.ort_runner import OrtGraphRunner

    runner = OrtGraphRunner(str(_int64_identity(tmp_path / "m.onnx")), "CPUExecutionProvider")
    call = timed_call(runner, {"x": np.array([1, 2, 3], dtype=np.int32), "unused": np.zeros(1)})
    (out,) = call()
    assert out.dtype == np.int64 and out.tolist() == [1, 2, 3]


def test_timed_call_goes_through_run_for_other_runners():
    class Counting(GraphRunner):
        input_names, output_names, seen = ["a"], ["b"], []

        def _run(self, feeds):
            self.seen.append(feeds["a"])
            return {"b": feeds["a"]}

    runner = Counting()
    call = timed_call(runner, {"a": np.ones(2)})
    call()
    call()
    assert len(runner.seen) == 2


def test_torch_timed_call_is_the_forward_pass_on_tensors_prepared_once():
    import torch

    from harness.runners.torch_runner import TorchGraphRunner

    class Recording(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[int] = []

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
            self.seen.append(id(x))
            assert not torch.is_grad_enabled()  # inference mode, as deployed
            return (x * 2,)

    module = Recording()
    runner = TorchGraphRunner(module, ["x"], ["y"], "cpu", torch.float32)
    call = runner.timed_call({"x": np.ones((1, 3), dtype=np.float64)})
    first, second = call(), call()
    assert len(set(module.seen)) == 1  # the same tensor both times: converted outside the timed region
    assert isinstance(first[0], torch.Tensor) and first[0].dtype == torch.float32
    assert torch.equal(first[0], second[0])
    assert runner.run({"x": np.ones((1, 3))})["y"].tolist() == [[2.0, 2.0, 2.0]]  # run() still numpy out


# --------------------------------------------------------------------------- shaped feeds and the plan


def test_shaped_feeds_fill_every_row_with_real_tokens(workspace):
    model = workspace.model("encoder-custom")
    family = workspace.family(model)
    graph = family.graphs(model)[0]
    feeds = shaped_feeds(model, family, graph, workspace.texts(model), 3, 16)
    assert feeds["input_ids"].shape == (3, 16) and feeds["attention_mask"].all()
    assert len({tuple(r) for r in feeds["input_ids"].tolist()}) == 3  # rows start at different sentences
    with pytest.raises(ValueError, match="exceeds the model's 512 positions"):
        shaped_feeds(model, family, graph, workspace.texts(model), 1, 513)


def test_causal_prefill_feeds_have_positions_and_an_empty_past(workspace):
    model = workspace.model("llama-tiny")
    family = workspace.family(model)
    graph = family.graphs(model)[0]
    feeds = shaped_feeds(model, family, graph, workspace.texts(model), 2, 8)
    assert feeds["position_ids"].tolist() == [list(range(8))] * 2
    assert feeds["past_key_values.0.key"].shape == (2, 2, 0, 16)


def test_plan_names_every_bucket_and_graph(workspace):
    model = workspace.model("marian-tiny")
    family = workspace.family(model)
    decoder = family.graphs(model)[1]
    assert not shapeable(decoder)
    with pytest.raises(ValueError, match="not by token ids"):
        shaped_feeds(model, family, decoder, ["a"], 1, 4)
    points, skipped = latency.plan(model, family, workspace.texts(model),
                                   PerfSettings(batch_sizes=(1, 2), seq_lens=(8, 300)))
    assert [p.key for p in points] == ["latency_ms", "latency_ms[bs=2,seq=8]", "latency_ms[graph=decoder]",
                                       "latency_ms[graph=decoder_with_past]"]
    assert skipped == ["bs=1,seq=300: longer than the model's 256 positions",
                       "bs=2,seq=300: longer than the model's 256 positions"]
    assert points[1].feeds["input_ids"].shape == (2, 8)
    assert set(latency.feeds_by_graph(points)) == {"encoder", "decoder", "decoder_with_past"}


def test_measure_times_the_first_point_with_the_given_engine(workspace):
    model = workspace.model("encoder-custom")
    family = workspace.family(model)
    points, _ = latency.plan(model, family, workspace.texts(model), PerfSettings(seq_lens=(8, 16)))
    v = variant("encoder-custom")
    runner = workspace.backend(v, model).load(GraphRef(model, family, points[0].graph, v))
    out = latency.measure({"model": runner}, points, PerfSettings(samples=7, warmup=1, tail_seconds=0),
                          BenchmarkEngine(FakeBenchmark()))
    assert out["latency_ms"]["engine"] == "pytest-benchmark" and len(out["latency_ms"]["samples"]) == 7
    assert out["latency_ms[bs=1,seq=16]"]["engine"] == "harness"
    assert (out["latency_ms"]["seq_len"], out["latency_ms[bs=1,seq=16]"]["seq_len"]) == (8, 16)
    # every metric says what the machine did while it was timed (harness.perf.contention)
    for key in ("latency_ms", "latency_ms[bs=1,seq=16]"):
        machine = out[key]["contention"]
        assert set(machine) == {"preemptions", "steal_pct", "load_avg", "seconds"} and machine["seconds"] > 0
        if sys.platform.startswith("linux"):
            assert isinstance(machine["preemptions"], int) and machine["preemptions"] >= 0


# --------------------------------------------------------------------------- budgets


def test_budgets_validate_and_check():
    with pytest.raises(UsageError, match=r"unknown budget 'p50' \(did you mean 'p50_ms'\?\)"):
        budgets.validate({"p50": 3}, "m")
    with pytest.raises(UsageError, match="must be a positive number"):
        budgets.validate({"p50_ms": -1}, "m")
    perf = {"latency_ms": {"summary": {"p50": 2.0, "p90": 3.0, "p95": 4.0, "p99": 9.0}},
            "peak_rss_bytes": 300 * 2**20, "artifact_bytes": 2**20, "cold_start_ms": {"load": 50.0, "first_inference": 2.0}}
    measured = budgets.measured_values(perf)
    assert measured["peak_rss_mb"] == 300 and measured["artifact_mb"] == 1 and measured["load_ms"] == 50
    checks = budgets.check({"p50_ms": 1.5, "artifact_mb": 2, "ttft_ms": 1}, measured)
    assert [(c.name, c.passed) for c in checks] == [("p50_ms", False), ("artifact_mb", True)]  # ttft not measured
    assert checks[0].message() == "latency p50 = 2 exceeds budget p50_ms <= 1.5"


def test_enforce_records_thresholds_and_fails_with_the_numbers():
    from harness.judge.numeric import GateFailure

    case = SimpleNamespace(model=SimpleNamespace(name="m", spec=SimpleNamespace(budgets={"peak_rss_mb": 100})),
                           variant=variant("m"), metrics={}, thresholds={})
    with pytest.raises(GateFailure, match=r"peak RSS \(MiB\) = 300 exceeds budget peak_rss_mb <= 100"):
        budgets.enforce(case, {"peak_rss_bytes": 300 * 2**20})
    assert case.metrics == {"perf.peak_rss_mb": 300.0}
    assert case.thresholds == {"perf.peak_rss_mb": {"threshold": 100.0, "op": "<="}}


# --------------------------------------------------------------------------- interleaving and ratios


def test_round_order_puts_every_contender_in_every_slot_equally():
    names = ["a", "b", "c"]
    slots = Counter((i, name) for r in range(12) for i, name in enumerate(bench.round_order(names, r)))
    assert set(slots.values()) == {4}
    followers = Counter((o[i], o[i + 1]) for r in range(6) for o in [bench.round_order(names, r)] for i in range(2))
    assert len(followers) == 6  # each contender follows each other one, not always the same neighbour


def test_interleave_alternates_blocks_and_collects_samples():
    order = []

    def block(name):
        return lambda n: (order.append(name), [1.0] * n)[1]

    samples = bench.interleave({"x": block("x"), "y": block("y")}, rounds=3, per_round=4, warmup_rounds=1)
    assert {k: len(v) for k, v in samples.items()} == {"x": 12, "y": 12}
    assert order == ["x", "y", "x", "y", "y", "x", "y", "x"]  # warmup, then rotated rounds
    with pytest.raises(ValueError, match="returned 1 samples, expected 2"):
        bench.interleave({"x": lambda n: [1.0]}, rounds=1, per_round=2, warmup_rounds=0)


def test_latency_ratio_recovers_a_known_factor():
    rng = np.random.default_rng(0)
    base = list(1.0 + rng.exponential(0.05, 400))
    cand = [2 * s for s in rng.permutation(base)]
    r = bench.latency_ratio("m", "cand vs base", {"b": base, "c": cand}, "b", "c", block_size=20)
    assert r.ratio == pytest.approx(2.0) and r.lo <= 2.0 <= r.hi
    assert r.reading() == "100% more latency, 0.50x speed"
    size = bench.size_ratio("m", "size", "fp32", "int8", 400, 100)
    assert size.ratio == 0.25 and size.lo is None and size.reading() == "75% smaller"
    assert "| m | size | 0.00 MiB | 0.00 MiB | 0.250 | exact | 75% smaller |" in bench.to_markdown([size])


# --------------------------------------------------------------------------- generation timing


class FakeStepper:
    def step(self, history):
        logits = np.zeros((history.shape[0], 5))
        logits[:, history.shape[1] % 5] = 1.0
        return logits


class FakeStarter:
    def start(self, ids, mask, expand, use_cache):
        return SimpleNamespace(prompt=np.zeros((ids.shape[0], 1), dtype=np.int64), stepper=FakeStepper())


def test_generation_timing_splits_first_token_from_later_ones():
    ticks = itertools.count(0, 1_000_000)  # every clock read is 1 ms after the previous one
    out = sample_generation(FakeStarter(), np.ones((2, 3), np.int64), np.ones((2, 3), np.int64), new_tokens=4,
                            repeats=2, warmup=0, clock=lambda: next(ticks))
    on = out[True]
    assert on.ttft_ms == [1.0, 1.0] and on.tpot_ms == [1.0] * 6 and on.total_ms == [4.0, 4.0]
    assert on.tokens[0].tolist() == [[1, 2, 3, 4]] * 2
    assert on.tokens_per_s(2, 4) == pytest.approx(2 * 4 * 2 / 0.008)


def test_generation_perf_on_a_real_translator(workspace):
    from harness.perf.generation import measure_generation

    model = workspace.model("marian-tiny")
    family = workspace.family(model)
    v = variant("marian-tiny")
    backend = workspace.backend(v, model)
    runners = {g.name: backend.load(GraphRef(model, family, g, v)) for g in family.graphs(model)}
    fields = measure_generation(model, family, runners, workspace.texts(model), PerfSettings(samples=12, new_tokens=5))
    gen = fields["generation"]
    assert gen["same_tokens_with_and_without_cache"] is True
    assert gen["repeats"] == 3 and gen["new_tokens"] == 5
    assert len(fields["latency_ms[gen=ttft,kv=on]"]["samples"]) == 3
    assert len(fields["latency_ms[gen=tpot,kv=off]"]["samples"]) == 3 * 4
    assert gen["kv=on"]["tokens_per_s"] > 0 and gen["kv_speedup"] > 0


# --------------------------------------------------------------------------- fresh processes


def test_a_child_times_its_level_between_canary_blocks_within_its_budget() -> None:
    """After its steady calls (and the peak-memory reading), a child times more calls for its level
    -- as many as ``STEADY_BUDGET_MS`` holds, at most ``MAX_STEADY_CALLS`` in all -- a canary block
    before each segment and one after the last; a model too slow for the budget gets none, and the
    two canary blocks it always had."""
    calls = []
    fast, entry = child._level(lambda: calls.append(1), [0.5] * 5)
    assert len(fast) == child.MAX_STEADY_CALLS - 5 and len(calls) > len(fast)  # each segment settles first
    assert entry["blocks"] == 1 + -(-len(fast) // SEGMENT_CALLS) and len(entry["samples"]) == entry["blocks"] * 15
    budgeted, _ = child._level(lambda: None, [20.0] * 5)  # 200 ms holds 10 calls of 20 ms: 5 more
    assert len(budgeted) == 5
    slow, slow_entry = child._level(lambda: None, [80.0] * 5)
    assert slow == [] and slow_entry["blocks"] == child.CANARY_BLOCKS


def test_child_floors_and_an_ort_cold_start(workspace, tmp_path):
    floor = memory.floors("onnxruntime")
    assert 0 < floor["baseline_rss_bytes"] < floor["imports_rss_bytes"]  # onnxruntime + numpy weigh tens of MB
    model = workspace.model("encoder-custom")
    family = workspace.family(model)
    graphs = family.graphs(model)
    feeds = coldstart.write_feeds(tmp_path / "f.npz", {"model": family.feeds(model, graphs[0], ["a b c", "d"])})
    v = variant("encoder-custom", "int8")
    args = coldstart.child_args(workspace, v, model, family, graphs, feeds, calls=2)
    runs = coldstart.fresh_runs(args, 2)
    assert all(r["first_inference_ms"] > 0 and r["load_ms"] > 0 and len(r["steady_ms"]) == 2 for r in runs)
    # a sub-millisecond model: more calls for its level, between canary blocks (harness.perf.child._level)
    assert all(2 < len(r["steady_ms"]) + len(r["level_ms"]) <= child.MAX_STEADY_CALLS for r in runs), runs
    assert all(r["canary"]["blocks"] == max(child.CANARY_BLOCKS, 1 + -(-len(r["level_ms"]) // SEGMENT_CALLS))
               for r in runs)
    fields = {**coldstart.cold_start_fields(runs), **memory.memory_fields(runs, floor)}
    assert fields["cold_start_ms"]["load"] == pytest.approx(float(np.median([r["load_ms"] for r in runs])))
    assert fields["peak_rss_bytes"] >= fields["memory"]["peak_rss_after_load_bytes"] > floor["imports_rss_bytes"]
    arena = fields["memory"]["settings"]["onnxruntime"]
    assert arena["enable_cpu_mem_arena"] is True and arena["providers"] == ["CPUExecutionProvider"]
    sizes = memory.artifact_fields(workspace, v, model, family, graphs)
    assert sizes["artifact_bytes"] == sum(sizes["artifact_files"].values()) > 0


def test_child_failures_carry_the_reason(tmp_path):
    from harness.runners.ort_runner import OrtBackend

    with pytest.raises(coldstart.ChildError, match="--loader is required"):
        coldstart.spawn(["--mode", "imports"])
    with pytest.raises(coldstart.ChildError, match="--spec and --feeds are required"):
        coldstart.spawn(["--loader", OrtBackend.loader_ref()])
    feeds = coldstart.write_feeds(tmp_path / "f.npz", {"model": {"x": np.zeros(1, np.int64)}})
    spec = json.dumps({"device": "CPUExecutionProvider", "graphs": {"model": str(tmp_path / "missing.onnx")}})
    with pytest.raises(coldstart.ChildError, match="exited with 1"):
        coldstart.spawn(["--loader", OrtBackend.loader_ref(), "--spec", spec, "--feeds", str(feeds)])


def test_cold_start_fields_are_medians_over_processes():
    runs = [{"import_ms": i, "load_ms": 10 * i, "first_inference_ms": i, "process_ms": 100 * i, "peak_rss_bytes": i * 2**20,
             "peak_rss_after_load_bytes": i * 2**20, "steady_ms": [1.0], "settings": {"x": 1}} for i in (1, 5, 3)]
    fields = coldstart.cold_start_fields(runs)
    assert fields["cold_start_ms"] == {"load": 30.0, "first_inference": 3.0, "import": 3.0, "process": 300.0}
    mem = memory.memory_fields(runs, {"baseline_rss_bytes": 2**20, "imports_rss_bytes": 2**20})
    assert mem["peak_rss_bytes"] == 3 * 2**20 and mem["memory"]["model_rss_bytes"] == 2 * 2**20
    assert mem["memory"]["gpu_peak_bytes"] is None and json.dumps(mem)
