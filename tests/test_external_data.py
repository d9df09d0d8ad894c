"""ONNX external data (models over 2 GB) proven on the zoo's tiny models by forcing it.

``--external-data always`` sends bert-tiny and marian-tiny through export, FP16 and INT8 with
their weights in ``model.onnx.data``: the same code path a multi-GB model takes, without a
multi-GB file. A corrupted data file in the cache must be noticed and the entry rebuilt.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from waiting import PATIENCE

from harness.core import Precision
from harness.export import external
from harness.export.cache import ArtifactCache

ROOT = Path(__file__).resolve().parents[1]


def _mlp(n: int = 64) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "W")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", n])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _weights_are_external(path: Path) -> bool:
    """Every initializer over 1 KiB lives in the data file, none in the graph."""
    model = onnx.load(str(path), load_external_data=False)
    big = [t for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL or len(t.raw_data) > 1024]
    return bool(big) and all(t.data_location == TensorProto.EXTERNAL for t in big)


def test_the_mode_and_the_size_decide():
    assert not external.use_external("auto", 10**6) and external.use_external("auto", 2 * 10**9)
    assert external.use_external("always", 1) and not external.use_external("never", 3 * 10**9)
    with pytest.raises(ValueError, match="sometimes"):
        external.use_external("sometimes", 1)


def test_save_and_normalize_store_weights_as_asked(tmp_path):
    small = external.save(_mlp(), tmp_path / "a.onnx", "auto")
    assert external.external_files(small) == [] and not (tmp_path / "a.onnx.data").exists()
    forced = external.save(_mlp(), tmp_path / "b.onnx", "always")
    assert external.external_files(forced) == ["b.onnx.data"] and _weights_are_external(forced)
    assert external.file_initializer_bytes(forced) == external.initializer_bytes(_mlp()) == 64 * 64 * 4
    # torch.onnx.export's one-file-per-tensor layout is gathered into the one data file
    scattered = tmp_path / "c" / "model.onnx"
    scattered.parent.mkdir()
    onnx.save_model(_mlp(), str(scattered), save_as_external_data=True, all_tensors_to_one_file=False,
                    size_threshold=0)
    assert external.external_files(scattered) == ["W"]
    external.normalize(scattered, "always")
    assert external.external_files(scattered) == ["model.onnx.data"] and not (scattered.parent / "W").exists()
    external.normalize(scattered, "never")  # and back into one protobuf
    assert external.external_files(scattered) == [] and not (scattered.parent / "model.onnx.data").exists()
    onnx.checker.check_model(str(scattered))


def test_corrupted_external_data_in_the_cache_is_detected_and_rebuilt(tmp_path, caplog):
    cache = ArtifactCache(tmp_path)
    calls = []

    def build(tmp: Path) -> Path:
        calls.append(tmp)
        return external.save(_mlp(), tmp / "model.onnx", "always")

    first = cache.get_or_build("m-model-fp32", {"w": "abc"}, build)
    assert set(first.files) == {"model.onnx", "model.onnx.data"} and first.built
    assert not cache.get_or_build("m-model-fp32", {"w": "abc"}, build).built
    data = first.path("model.onnx.data")
    raw = bytearray(data.read_bytes())
    raw[100] ^= 0xFF  # one flipped byte in one weight: the graph file is untouched
    data.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, logger="harness.cache"):
        again = cache.get_or_build("m-model-fp32", {"w": "abc"}, build)
    assert again.built and len(calls) == 2
    assert "model.onnx.data does not match its recorded sha256" in caplog.text
    assert again.path("model.onnx.data").read_bytes() != bytes(raw)


def test_external_data_outside_the_entry_is_refused_at_build(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    def build(tmp: Path) -> None:
        external.save(_mlp(), outside / "model.onnx", "always")
        proto = onnx.load(str(outside / "model.onnx"), load_external_data=False)
        for tensor in proto.graph.initializer:
            for entry in tensor.external_data:
                if entry.key == "location":
                    entry.value = "../../elsewhere/model.onnx.data"
        onnx.save(proto, str(tmp / "model.onnx"))

    with pytest.raises(RuntimeError, match="is not a file of the cache entry"):
        ArtifactCache(tmp_path / "cache").get_or_build("m", {"w": "x"}, build)
    assert not [p for p in (tmp_path / "cache").glob("m-*") if p.is_dir()]  # no entry, no temporary left


def test_bisect_and_check_run_on_forced_external_artifacts(workspace, tmp_path, capsys):
    from dataclasses import replace

    from harness.debug.bisect import bisect_graph, bisect_tolerance
    from harness.export.artifacts import onnx_artifact

    model = workspace.model("bert-tiny")
    family = workspace.family(model)
    graph = family.graphs(model)[0]
    settings = replace(workspace.runtimes.settings_for(model), external_data="always")
    fp32, fp16 = (onnx_artifact(model, family, graph, p, settings, workspace.runtimes.artifacts)
                  for p in (Precision.FP32, Precision.FP16))
    assert "external_data" in json.loads((fp16.directory / "meta.json").read_text())["parts"]
    for entry in (fp32, fp16):
        assert "model.onnx.data" in entry.files and _weights_are_external(entry.path())
    report = bisect_graph(fp32.path(), fp16.path(), family.feeds(model, graph, workspace.batches(model)[0]),
                          bisect_tolerance(Precision.FP16))
    assert len(report.tensors) > 50 and report.first_divergent is None
    # harness check on the file: onnxruntime finds model.onnx.data beside it
    from harness.cli import main
    from harness.zoo.base import materialize, resolve

    out = tmp_path / "check"
    code = main(["check", "--reference", str(materialize(resolve("bert-tiny"))), "--onnx", str(fp32.path()),
                 "--samples", "4", "--out", str(out)])
    err = capsys.readouterr().err
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert code == 0 and record["verdict"] == "pass", err + record["reason"]
    assert record["metrics"]["model.logits.norm_max_abs"] < 1e-5
    # harness bisect on the same forced artifacts (the CLI takes --external-data like harness run)
    assert main(["bisect", "--models", "bert-tiny", "--precisions", "fp16", "--samples", "4", "--external-data",
                 "always", "--out", str(tmp_path / "bisect")]) == 0
    bisected = json.loads((tmp_path / "bisect" / "bisect.json").read_text())
    bisected_fp16 = Path(bisected["artifacts"]["fp16"])
    assert (bisected_fp16.parent / "model.onnx.data").is_file() and bisected["counts"]["compared"] > 50


def test_forced_external_data_through_the_matrix(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))",
           "run", "--suites", str(ROOT / "harness" / "suites" / "test_logits_parity.py"),
           "--models", "bert-tiny", "marian-tiny", "--precisions", "fp32", "fp16", "int8", "int8-static",
           "--providers", "ort_cpu", "--samples", "2", "--int8-calibration-samples", "8",
           "--external-data", "always", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=PATIENCE)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    judged = {r["variant"]: r for r in records}
    assert len(judged) == 8, proc.stdout[-3000:] + proc.stderr[-2000:]
    for variant, record in judged.items():
        assert record["settings"]["external_data"] == "always"
        assert "--external-data always" in record["rerun"]
        graphs = [name for name in record["artifacts"] if name.endswith("model.onnx")]
        assert graphs, variant
        for name in graphs:
            graph = Path(record["artifacts"][name]["path"])
            data = record["artifacts"][f"{name}.data"]
            assert Path(data["path"]).is_file() and data["bytes"] > record["artifacts"][name]["bytes"], (variant, name)
            assert external.external_files(graph) == ["model.onnx.data"] and _weights_are_external(graph)
    # every forced artifact runs and is judged (marian's static INT8 verdict is a quantisation matter)
    assert all(r["verdict"] == "pass" for v, r in judged.items() if v != "marian-tiny-int8-static-ort_cpu"), \
        {v: r["reason"] for v, r in judged.items() if r["verdict"] != "pass"}
    assert judged["marian-tiny-int8-static-ort_cpu"]["verdict"] in ("pass", "fail")
    assert "model.logits.cosine" in judged["bert-tiny-int8-static-ort_cpu"]["metrics"]


def test_the_perf_child_loads_forced_external_artifacts(tmp_path):
    """The cold-start child opens the artifact by path in a fresh process: the data file must follow."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))",
           "run", "--suites", str(ROOT / "harness" / "suites" / "test_perf.py"), "--models", "bert-tiny",
           "--precisions", "int8", "--providers", "ort_cpu", "--perf", "--perf-samples", "3", "--perf-warmup", "1",
           "--perf-repeats", "1", "--external-data", "always", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=PATIENCE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    records = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    cold = records["test_cold_start_memory[bert-tiny-int8-ort_cpu]"]
    assert cold["verdict"] == "pass" and cold["perf"]["cold_start_ms"]["load"] > 0
    assert cold["settings"]["external_data"] == "always"
