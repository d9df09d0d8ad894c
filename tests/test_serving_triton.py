"""Judging a model served by a real Triton Inference Server: the ``tritonserver`` 2.51 that
PyPI's ``nvidia-pytriton`` bundles, on CPU, its python backend running ONNX Runtime on the
batches Triton's dynamic batcher forms (tests/serving/pytriton_models.py).

Over HTTP (binary tensor extension) and gRPC the faithful bert-tiny passes parity, the
concurrency check and a short load sweep whose steps carry Triton's own statistics (queue and
compute time, executed batch sizes); the served record holds Triton's model config
(max_batch_size, dynamic batching). Negative control: the same server serving a classifier
weight scaled by 1.5 fails the numeric check.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.serving import triton_server as ts
from tests.serving.faults import BERT_TINY_CHECK as SMALL
from tests.serving.faults import bert_tiny_fp32, scaled_classifier
from tests.serving.venv_server import Relaunching, required

pytest.importorskip("tritonclient.http", reason="the serving client (pip install 'model-harness[serving]')")

@pytest.fixture(scope="module")
def triton(tmp_path_factory) -> Iterator[Relaunching]:
    fp32 = bert_tiny_fp32()
    root = tmp_path_factory.mktemp("triton")
    models = {"bert": fp32, "bert-scaled": scaled_classifier(fp32, root / "scaled.onnx")}
    live = Relaunching(lambda: required(lambda: ts.start(root / "server", models), ts.REQUIRE_ENV, "Triton"), "Triton")
    yield live
    live.stop()


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_a_real_triton_serves_the_faithful_model_judged_with_its_statistics(triton, tmp_path, capsys, transport):
    code, text, suites = triton.judged(
        lambda srv: [*SMALL, "--endpoint", srv.http if transport == "http" else srv.grpc, "--served-model", "bert",
                     "--perf", "--concurrency", "1", "4", "--sweep-window", "0.3", "--step-budget", "3"],
        tmp_path / "run", capsys)
    assert code == 0, text + triton.server.tail()
    assert {s: r["verdict"] for s, r in suites.items()} == {"check": "pass", "check_concurrency": "pass",
                                                            "check_perf": "pass"}
    served = suites["check"]["data"]["served"]["model"]
    assert served["server"]["name"] == "triton" and served["platform"] == "python"
    assert served["max_batch_size"] == 8 and served["dynamic_batching"] is not None  # Triton's /config
    assert served["transport"]["tensors"] == "binary"  # Triton lists binary_tensor_data; gRPC is raw bytes
    assert suites["check"]["metrics"]["model.logits.cosine"] > 0.9999
    steps = suites["check_perf"]["perf"]["serving"]["steps"]
    assert all(s["server"] and s["server"]["compute_infer_ms"] > 0 for s in steps), steps  # statistics extension


def test_a_scaled_weight_served_by_triton_fails(triton, tmp_path, capsys):
    code, text, suites = triton.judged(lambda srv: [*SMALL, "--endpoint", srv.grpc, "--served-model", "bert-scaled"],
                                       tmp_path / "run", capsys)
    assert code == 1, text + triton.server.tail()
    assert suites["check"]["verdict"] == "fail" and "model/logits" in suites["check"]["reason"], suites["check"]["reason"]
