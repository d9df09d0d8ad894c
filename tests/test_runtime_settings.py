"""Runtime settings (issue 10): one typed record, declared per run / model / provider, validated
by the owning backend, a matrix axis whose default keeps the old ids, recorded per case and in
the rerun; TensorRT profiles trtexec-style; ORT profiling; static INT8; report highlights."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from waiting import PATIENCE

from harness.core import UsageError
from harness.core.runtime import RuntimeSettings, parse_provider_options, runtime_from_dict
from harness.runners.trt_profile import parse_shape_range, parse_trt_profile
from harness.settings.resolve import build_options

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "runtime-settings.toml"


# -- parsing and validation --------------------------------------------------------------------------------
def test_trtexec_profiles_parse_and_bad_ones_are_one_line():
    profile = parse_trt_profile(["input_ids:1x16,8x64,16x256"], "--trt-profile")
    assert profile["input_ids"].min == (1, 16) and profile["input_ids"].opt == (8, 64)
    assert profile["input_ids"].max == (16, 256) and profile["input_ids"].text() == "1x16,8x64,16x256"
    assert parse_trt_profile({"a": ["1x2", "2x2", "3x4"]}, "x")["a"].max == (3, 4)
    for bad, words in (("1x16,8x64", "min,opt,max"), ("1x16,8x8,16x256", "min <= opt <= max"),
                       ("1x16,8x64,16", "same rank"), ("1xA,8x64,16x256", "not a shape")):
        with pytest.raises(UsageError, match=words):
            parse_shape_range(bad, "--trt-profile input_ids")
    with pytest.raises(UsageError, match="INPUT:MIN,OPT,MAX"):
        parse_trt_profile(["1x16,8x64,16x256"], "--trt-profile")
    with pytest.raises(UsageError, match="PROVIDER:KEY=VALUE"):
        parse_provider_options(["device_id=0"], "--provider-option")


def test_ep_options_are_validated_by_the_backend_that_owns_the_provider():
    options = build_options({"models": ["bert-tiny"], "provider_options": [
        "ort_cuda:cudnn_conv_algo_search=HEURISTIC", "ort_cuda:device_id=0", "ort_trt:trt_fp16_enable=True"]})
    assert options.runtime.options_for("ort_cuda") == {"cudnn_conv_algo_search": "HEURISTIC", "device_id": "0"}
    cases = [("ort_cuda:cudnn_conv_algo_serch=HEURISTIC", "'cudnn_conv_algo_serch' is not an option of ort_cuda.*"
              "did you mean 'cudnn_conv_algo_search'"),
             ("ort_cuda:cudnn_conv_algo_search=FAST", "cudnn_conv_algo_search='FAST' is not valid.*HEURISTIC"),
             ("torch_cpu:device=1", "'torch_cpu' \\(pytorch\\) takes no provider options"),
             ("ort_gpu:device_id=0", "unknown provider 'ort_gpu'")]
    for given, words in cases:
        with pytest.raises(UsageError, match=words):
            build_options({"models": ["bert-tiny"], "provider_options": [given]})


def test_backend_validation_hook_is_overridable_per_backend():
    """A backend (OpenVINO's, say) declares its own keys through the same ClassVar/method."""
    from harness.core import Provider
    from harness.runners.base import Backend

    class Fake(Backend):
        name = "fake"
        providers = (Provider("fake_cpu", "fake", "FAKE"),)
        provider_option_keys = {"FAKE": {"streams": None, "hint": ("latency", "throughput")}}

        @classmethod
        def unavailable_reason(cls, variant):  # pragma: no cover - not run
            return None

        def load(self, *a):  # pragma: no cover - not run
            raise NotImplementedError

    Fake.validate_provider_options(Fake.providers[0], {"streams": "2", "hint": "latency"}, "x")
    with pytest.raises(UsageError, match="'hint'='fast'|hint='fast' is not valid"):
        Fake.validate_provider_options(Fake.providers[0], {"hint": "fast"}, "x")


def test_graph_optimization_axis_keeps_default_ids_and_only_multiplies_backends_that_honour_it():
    from harness.settings.matrix import matrix

    plain = [v.id for v in matrix(build_options(models=["bert-tiny"], precisions=["fp32"]))]
    assert plain == ["bert-tiny-fp32-torch_cpu", "bert-tiny-fp32-ort_cpu"]
    axis = build_options({"graph_optimization": ["disabled", "all"]}, models=["bert-tiny"], precisions=["fp32"])
    ids = [v.id for v in matrix(axis)]
    assert ids == ["bert-tiny-fp32-torch_cpu", "bert-tiny-fp32-ort_cpu-opt_disabled", "bert-tiny-fp32-ort_cpu"]
    with pytest.raises(UsageError, match="unknown level 'fused'"):
        build_options({"graph_optimization": ["fused"]}, models=["bert-tiny"])


def test_rerun_command_repeats_the_case_axis_value():
    from harness.settings.options import rerun_command

    case = {"model": "bert-tiny", "precision": "fp32", "provider": "ort_cpu", "variant": "bert-tiny-fp32-ort_cpu",
            "runtime": "graph_optimization=all"}
    command = rerun_command("suites/test_logits_parity.py::test_logits_parity[bert-tiny-fp32-ort_cpu]", case,
                            {"options": {"provider_options": ["ort_cuda:device_id=0"]}})
    argv = shlex.split(command)
    assert argv[argv.index("--graph-optimization") + 1] == "all"  # -k alone would also select -opt_disabled
    assert argv[argv.index("--provider-option") + 1] == "ort_cuda:device_id=0"


# -- the seed config ----------------------------------------------------------------------------------------
def test_example_runtime_config_loads_and_every_case_records_its_settings():
    from harness.judge.workspace import Workspace
    from harness.settings.matrix import matrix

    options = build_options({"config": EXAMPLE})
    assert options.runtime_axes == {"graph_optimization": ["disabled", "all"]}
    assert options.settings.int8_calibration == "entropy"
    ws = Workspace(options)
    variants = {v.id: v for v in matrix(options)}
    assert "encoder-custom-12x768-fp32-ort_trt-opt_disabled" in variants
    assert "marian-tiny-fp32-ort_cpu-opt_extended" in variants  # the model's own level, not the run's axis
    trt = ws.runtime_for(variants["encoder-custom-12x768-fp32-ort_trt"]).as_dict("ort_trt")
    assert trt["trt_profile"] == {"input_ids": "1x16,8x64,16x256", "attention_mask": "1x16,8x64,16x256"}
    assert trt["provider_options"] == {"ort_trt": {"trt_max_workspace_size": "4294967296",
                                                   "trt_builder_optimization_level": "3"}}
    cuda = ws.runtime_for(variants["marian-tiny-fp32-ort_cuda-opt_extended"]).as_dict("ort_cuda")
    assert cuda["provider_options"]["ort_cuda"]["cudnn_conv_algo_search"] == "EXHAUSTIVE"  # the model's wins
    assert cuda["provider_options"]["ort_cuda"]["gpu_mem_limit"] == "8589934592"  # the run's stays
    assert cuda["intra_op_threads"] == 2 and cuda["graph_optimization"] == "extended"
    # no GPU here: the CUDA / TensorRT cases skip with the exact reason, at run time
    reason = ws.runtimes.unavailable_reason(variants["encoder-custom-12x768-fp32-ort_cuda"])
    assert reason is None or "CUDAExecutionProvider not available" in reason


def test_config_errors_name_the_file_and_key(tmp_path):
    bad = tmp_path / "harness.toml"
    bad.write_text('[run]\nmodels = ["bert-tiny"]\n[run.provider_options.ort_cuda]\ncudnn_algo = "HEURISTIC"\n')
    with pytest.raises(UsageError, match=r"harness.toml: run.provider_options: .*'cudnn_algo' is not an option"):
        build_options({"config": bad})
    bad.write_text('[run]\nmodels = ["bert-tiny"]\n[run.trt_profile]\ninput_ids = "16x256,8x64,1x16"\n')
    with pytest.raises(UsageError, match=r"run.trt_profile: .*min <= opt <= max"):
        build_options({"config": bad})
    bad.write_text('[models.bert-tiny.runtime]\ngraph_optimization = ["all", "disabled"]\n')
    with pytest.raises(UsageError, match=r"models.bert-tiny.runtime.graph_optimization: a model takes one level"):
        build_options({"config": bad})


# -- the TensorRT profile the EP gets ----------------------------------------------------------------------
def test_explicit_trt_profile_replaces_the_derived_one_and_max_plus_one_is_outside():
    from harness.families.base import GraphSpec
    from harness.runners.trt_profile import ShapeProfileError, ShapeRange, profile_for

    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    graph = GraphSpec("model", ("input_ids", "attention_mask"), ("last_hidden_state",), axes)
    example = {n: np.ones((2, 5), np.int64) for n in graph.input_names}
    seed = ShapeRange((1, 16), (8, 64), (16, 256))
    profile = profile_for(graph, example, max_batch=8, max_seq=128).with_explicit({"input_ids": seed,
                                                                                 "model.attention_mask": seed}, "model")
    options = profile.provider_options()
    assert options["trt_profile_min_shapes"] == "input_ids:1x16,attention_mask:1x16"
    assert options["trt_profile_opt_shapes"] == "input_ids:8x64,attention_mask:8x64"
    assert options["trt_profile_max_shapes"] == "input_ids:16x256,attention_mask:16x256"
    inside = {n: np.ones((16, 256), np.int64) for n in graph.input_names}
    profile.check(inside)
    with pytest.raises(ShapeProfileError, match=r"input_ids \(17, 256\) outside .*outside the profile"):
        profile.check({n: np.ones((17, 256), np.int64) for n in graph.input_names})
    with pytest.raises(UsageError, match="rank 3"):
        profile.with_explicit({"input_ids": ShapeRange((1, 1, 1), (1, 1, 1), (1, 1, 1))})


# -- ORT session options are applied ------------------------------------------------------------------------
def test_session_options_reach_onnx_runtime(tmp_path):
    from harness.runners.ort_runner import OrtGraphRunner, session_settings

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    runtime = RuntimeSettings(intra_op_threads=1, inter_op_threads=2).merged(  # 1: ORT runs sequential
        {"graph_optimization": "disabled", "execution_mode": "parallel", "mem_pattern": False, "cpu_arena": False})
    runner = OrtGraphRunner(str(path), "CPUExecutionProvider", runtime=runtime, profile_prefix=str(tmp_path / "p"))
    live = session_settings(runner.session)
    assert live["graph_optimization_level"].endswith("ORT_DISABLE_ALL")
    assert live["execution_mode"].endswith("ORT_PARALLEL")
    assert live["enable_mem_pattern"] is False and live["enable_cpu_mem_arena"] is False
    for _ in range(3):
        runner.run({"x": np.array([-1.0, 2.0], np.float32)})
    from harness.runners.profiling import summarise_trace

    summary = summarise_trace(runner.end_profiling())
    assert summary["runs"] == 3 and summary["first_run_ms"] is not None and summary["steady_run_ms"] is not None
    assert summary["op_type_share"] == {"Relu": 1.0} and summary["top_nodes"][0]["calls"] == 3


def test_session_config_entries_are_checked_recorded_and_reach_onnx_runtime(tmp_path):
    from harness.runners.ort_runner import OrtGraphRunner, OrtSessionSettings
    from harness.settings.config_file import load_config

    given = ["session.intra_op.allow_spinning=0", "session.disable_prepacking = 1"]
    options = build_options({"models": ["bert-tiny"], "session_config": given})
    entries = (("session.disable_prepacking", "1"), ("session.intra_op.allow_spinning", "0"))
    assert options.runtime.of(OrtSessionSettings).session_config == entries  # sorted, spaces stripped
    # a TOML table says the same (booleans as ONNX Runtime's "1"/"0")
    toml = tmp_path / "harness.toml"
    toml.write_text('[run]\nsession_config = {"session.disable_prepacking" = true, '
                    '"session.intra_op.allow_spinning" = "0"}\n')
    assert build_options({"models": ["bert-tiny"], "config": str(toml)}).runtime.of(
        OrtSessionSettings).session_config == entries
    # recorded as an object, read back as the same entries
    record = options.runtime.as_dict()
    assert record["session_config"] == dict(entries)
    assert runtime_from_dict(record).of(OrtSessionSettings).session_config == entries
    manifest = json.loads(json.dumps(options.runtime.fields_dict()))  # a repro bundle's [[key, value], ...]
    assert runtime_from_dict(manifest).of(OrtSessionSettings).session_config == entries
    assert "session.intra_op.allow_spinning=0" in options.runtime.describe()

    # ONNX Runtime ignores a key it does not know: the harness refuses it, naming the nearest
    with pytest.raises(UsageError, match=r"--session-config: 'session.intra_op.allow_spining' .*did you mean "
                                         r"'session.intra_op.allow_spinning'"):
        build_options({"models": ["bert-tiny"], "session_config": ["session.intra_op.allow_spining=0"]})
    with pytest.raises(UsageError, match="KEY=VALUE"):
        build_options({"models": ["bert-tiny"], "session_config": ["session.disable_prepacking"]})
    toml.write_text('[run]\nsession_config = {"session.disable_prepack" = "1"}\n')
    with pytest.raises(UsageError, match="did you mean 'session.disable_prepacking'"):
        load_config(toml)

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    live = OrtGraphRunner(str(path), "CPUExecutionProvider", runtime=options.runtime).session.get_session_options()
    assert live.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert live.get_session_config_entry("session.disable_prepacking") == "1"
    plain = OrtGraphRunner(str(path), "CPUExecutionProvider", runtime=RuntimeSettings()).session.get_session_options()
    with pytest.raises(RuntimeError, match="does not have configuration"):  # the control: nothing set
        plain.get_session_config_entry("session.intra_op.allow_spinning")


# -- end to end: an axis, static INT8 and profiling in one harness run ---------------------------------------
def test_axis_static_int8_and_profile_end_to_end(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))",
           "run", "--suites", str(ROOT / "harness" / "suites" / "test_logits_parity.py"),
           "--models", "bert-tiny", "--precisions", "fp32", "int8-static", "--providers", "ort_cpu",
           "--graph-optimization", "disabled", "all", "--profile", "--samples", "8",
           "--int8-calibration-samples", "8", "--trt-profile", "input_ids:1x16,8x64,16x256", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=PATIENCE)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = {r["variant"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert set(records) == {"bert-tiny-fp32-ort_cpu", "bert-tiny-fp32-ort_cpu-opt_disabled",
                            "bert-tiny-int8-static-ort_cpu", "bert-tiny-int8-static-ort_cpu-opt_disabled"}
    fused, unfused = records["bert-tiny-fp32-ort_cpu"], records["bert-tiny-fp32-ort_cpu-opt_disabled"]
    assert fused["settings"]["runtime"]["graph_optimization"] == "all"
    assert unfused["settings"]["runtime"]["graph_optimization"] == "disabled"
    assert "--graph-optimization disabled" in unfused["rerun"] and "--profile" in unfused["rerun"]
    # the fused graph runs fused kernels, the unfused one does not: both judged against PyTorch
    fused_ops = set(fused["data"]["profile"]["model"]["op_type_share"])
    unfused_ops = set(unfused["data"]["profile"]["model"]["op_type_share"])
    assert fused_ops != unfused_ops and Path(fused["data"]["profile"]["model"]["trace"]).is_file()
    # ... and the fused graph is also judged against the unfused session of the same file
    assert fused["metrics"]["model.logits_vs_unfused.norm_max_abs"] < 1e-5
    assert "model.logits_vs_unfused.norm_max_abs" in fused["thresholds"]
    assert not any("_vs_unfused" in key for key in unfused["metrics"])
    # the shape sweep: batch 1 short, the widest batch at the longest sequence, the declared TensorRT
    # profile's min/opt/max (validated and recorded without a GPU): all run and are judged
    probes = {s["probe"]: s["shapes"]["input_ids"] for s in fused["data"]["shapes"] if s["probe"] != "corpus"}
    assert probes["TensorRT profile max 16x256"] == [16, 256] and probes["batch 8 x sequence 128 (longest)"] == [8, 128]
    assert any(p.startswith("batch 1 x sequence") and p.endswith("(shortest)") for p in probes)
    assert fused["metrics"]["model.shapes.shape_failures"] == 0
    assert fused["settings"]["runtime"]["trt_profile"] == {"input_ids": "1x16,8x64,16x256"}
    static = records["bert-tiny-int8-static-ort_cpu"]
    calibration = static["settings"]["int8_calibration"]
    assert calibration["first_index"] == 8 and calibration["sentences"] == 8  # disjoint from the 8 judged
    assert calibration["method"] == "minmax" and static["verdict"] == "pass"
    summary = (out / "summary.md").read_text()
    assert "Performance and runtime settings" in summary and "opt=disabled" in summary


def test_calibration_sentences_never_overlap_the_judged_ones():
    from harness.judge.workspace import Workspace

    ws = Workspace(build_options(models=["bert-tiny"], samples=8))
    model = ws.model("bert-tiny")
    judged, calibration = ws.texts(model), ws.corpora.calibration_texts(model)
    assert calibration and not set(judged) & set(calibration)


# -- reports --------------------------------------------------------------------------------------------------
def test_reports_show_p99_with_count_and_flag_generation_speed_and_settings():
    from harness.report.summary import render_summary
    from harness.report.tables import records_frame
    from harness.report.terminal import build_table

    record = {"id": "test_generation_perf[m-fp32-ort_cpu-opt_disabled]", "suite": "test_perf", "verdict": "pass",
              "variant": "m-fp32-ort_cpu-opt_disabled",
              "settings": {"runtime": {"graph_optimization": "disabled", "intra_op_threads": 1}},
              "perf": {"latency_ms": {"summary": {"p50": 1.5, "p99": 4.25, "n": 300, "low_confidence": {"p99": True}}},
                       "generation": {"kv=on": {"ttft_ms_p50": 3.5, "tpot_ms_p50": 1.25, "tokens_per_s": 812.0},
                                      "kv=off": {"ttft_ms_p50": 3.5, "tpot_ms_p50": 4.0, "tokens_per_s": 301.0}}}}
    summary = render_summary([record])
    assert "p99 4.25 ms (n=300, low confidence)" in summary
    assert "TTFT 3.5 ms, TPOT 1.25 ms, 812 tok/s (no cache: 301 tok/s)" in summary
    assert "opt=disabled threads=1" in summary
    frame = records_frame([record])
    row = frame.iloc[0]
    assert row["p99_ms"] == 4.25 and row["p99_samples"] == 300 and bool(row["p99_low_confidence"])
    assert row["ttft_ms"] == 3.5 and row["tpot_ms"] == 1.25 and row["tokens_per_s"] == 812.0
    assert row["runtime"] == "opt=disabled threads=1"
    assert [c.header for c in build_table([record]).columns][-1] == "perf / settings"
    plain = {k: v for k, v in record.items() if k not in ("perf", "settings")}
    assert [c.header for c in build_table([plain]).columns] == ["case", "verdict", "worst checks", "reason"]
