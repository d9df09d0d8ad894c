"""``harness export-triton``: a Triton model repository whose every config.pbtxt parses with
Triton's own model-config protobuf (tritonclient's ``model_config_pb2``), for each zoo family,
and the seed case: the TransformerEncoder at opset 17 with a declared TensorRT min/opt/max profile."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main

pytest.importorskip("tritonclient.grpc", reason="Triton's model-config protobuf ships in tritonclient (+ grpcio)")


def _config(folder: Path):
    from harness.serving.triton import parse_config

    return parse_config((folder / "config.pbtxt").read_text())


@pytest.mark.parametrize("model, graphs", [
    ("bert-tiny", ["bert-tiny-fp32"]),  # encoder
    ("marian-tiny", None),  # seq2seq: encoder + decoder step graphs
    ("llama-tiny", None),  # causal LM: one decoder step graph with a KV cache
])
def test_every_family_writes_configs_that_triton_parses(model, graphs, tmp_path, capsys):
    out = tmp_path / "repo"
    code = main(["export-triton", "--models", model, "--precisions", "fp32", "--providers", "ort_cpu",
                 "--threads", "1", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    folders = sorted(p for p in out.iterdir() if p.is_dir())
    if graphs is not None:
        assert [p.name for p in folders] == graphs
    assert folders and all((p / "1" / "model.onnx").is_file() for p in folders)
    for folder in folders:
        config = _config(folder)
        assert config.name == folder.name and config.platform == "onnxruntime_onnx"
        assert config.input and config.output
        assert config.instance_group[0].kind == config.instance_group[0].KIND_CPU
        assert config.parameters["intra_op_thread_count"].string_value == "1"
        if config.max_batch_size:  # batching along a dynamic leading dim: the batch dim is not in dims
            assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]
            assert config.dynamic_batching.max_queue_delay_microseconds == 100
        assert any(-1 in list(t.dims) for t in config.input)  # dynamic sequence axes stay dynamic
    assert "parsed with Triton's model-config protobuf" in text


def test_transformer_encoder_opset17_tensorrt_profile_and_batching(tmp_path, capsys):
    out = tmp_path / "repo"
    code = main(["export-triton", "--models", "encoder-custom", "--precisions", "fp32", "--providers", "ort_trt",
                 "--opset", "17", "--trt-profile", "input_ids:1x1,4x32,16x128",
                 "--trt-profile", "attention_mask:1x1,4x32,16x128", "--graph-optimization", "extended",
                 "--max-batch-size", "16", "--preferred-batch-sizes", "4", "16", "--max-queue-delay-us", "500",
                 "--instances", "2", "--out", str(out)])
    assert code == 0, capsys.readouterr()
    config = _config(out / "encoder-custom-fp32")
    assert config.max_batch_size == 16 and list(config.dynamic_batching.preferred_batch_size) == [4, 16]
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    assert config.instance_group[0].count == 2 and config.instance_group[0].kind == config.instance_group[0].KIND_GPU
    assert config.optimization.graph.level == 1  # "extended" in the ONNX Runtime backend's numbering
    trt = config.optimization.execution_accelerators.gpu_execution_accelerator[0]
    assert trt.name == "tensorrt" and trt.parameters["precision_mode"] == "FP32"
    assert trt.parameters["trt_profile_min_shapes"] == "input_ids:1x1,attention_mask:1x1"
    assert trt.parameters["trt_profile_opt_shapes"] == "input_ids:4x32,attention_mask:4x32"
    assert trt.parameters["trt_profile_max_shapes"] == "input_ids:16x128,attention_mask:16x128"
    import onnx

    assert onnx.load(str(out / "encoder-custom-fp32" / "1" / "model.onnx"), load_external_data=False) \
        .opset_import[0].version == 17


def test_a_profile_smaller_than_the_batch_clamps_max_batch_size(tmp_path, capsys):
    out = tmp_path / "repo"
    assert main(["export-triton", "--models", "encoder-custom", "--precisions", "fp32", "--providers", "ort_trt",
                 "--trt-profile", "input_ids:1x1,2x32,4x128", "--trt-profile", "attention_mask:1x1,2x32,4x128",
                 "--out", str(out)]) == 0
    assert "max_batch_size 8 -> 4" in capsys.readouterr().out
    assert _config(out / "encoder-custom-fp32").max_batch_size == 4


def test_bad_input_is_one_line_exit_2(tmp_path, capsys):
    from harness.core import UsageError
    from harness.serving.triton import parse_config

    with pytest.raises(UsageError, match="not a valid Triton model configuration"):
        parse_config('name: "x"\nmax_batch_sise: 4\n', "x/config.pbtxt")
    for argv, expected in ((["--providers", "torch_cpu"], "ONNX Runtime backend"),
                           (["--preferred-batch-sizes", "32"], "--preferred-batch-sizes"),
                           (["--plan", str(tmp_path / "none.plan")], "no such file")):
        code = main(["export-triton", "--models", "bert-tiny", "--precisions", "fp32", *argv,
                     "--out", str(tmp_path / "r")])
        err = capsys.readouterr().err
        assert code == 2 and expected in err and "Traceback" not in err, (argv, err)


def test_run_directory_exports_the_variants_it_judged_and_passed(tmp_path, capsys):
    from harness.core import Precision, RunOptions, Settings, Variant
    from harness.judge.workspace import Workspace
    from harness.runners import PROVIDERS
    from harness.serving.artifacts import variant_files

    ws = Workspace(RunOptions(settings=Settings(samples=8, batch_size=4)))
    onnx = variant_files(ws, Variant("bert-tiny", Precision.INT8, PROVIDERS["ort_cpu"]))[2][0].path
    run = tmp_path / "run"
    assert main(["check", "--reference", "bert-tiny", "--onnx", str(onnx), "--samples", "8", "--out", str(run)]) == 0
    capsys.readouterr()
    out = tmp_path / "repo"
    assert main(["export-triton", "--run", str(run), "--out", str(out)]) == 0
    assert [p.name for p in out.iterdir()] == ["bert-tiny-int8"]
    assert _config(out / "bert-tiny-int8").name == "bert-tiny-int8"
    assert main(["export-triton", "--run", str(tmp_path / "none"), "--out", str(out)]) == 2
    assert "no such file" in capsys.readouterr().err
