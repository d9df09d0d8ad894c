"""Judging a KServe custom predictor: the real KServe model server (PyPI ``kserve``, its own
venv) serving bert-tiny's ONNX file through a ``kserve.Model`` subclass
(tests/serving/kserve_predictor.py).

Three of its models publish no tensors (``"inputs": [], "outputs": []``, KServe's default):
the harness feeds the reference's inputs by name and learns the outputs from the first
response. Negative controls: the same predictor serving a graph whose classifier weight is
scaled by 1.5 fails the numeric check; a graph whose inputs are named otherwise is refused in
one line carrying the server's own message until ``--map`` names them. A fourth model publishes
its metadata (``get_input_types()``) and is judged over HTTP and gRPC; a client that sends
binary tensors to a predictor refusing them falls back to JSON and says so.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest

from tests.serving import kserve_server as ks
from tests.serving.faults import BERT_TINY_CHECK as SMALL
from tests.serving.faults import bert_tiny_fp32, renamed_inputs, scaled_classifier
from tests.serving.mlserver import Server
from tests.serving.venv_server import Relaunching, check, required

pytest.importorskip("tritonclient.http", reason="the serving client (pip install 'model-harness[serving]')")

@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[Relaunching]:
    fp32 = bert_tiny_fp32()
    root = tmp_path_factory.mktemp("kserve")
    models = {"bert": fp32, "bert-described": fp32,
              "bert-scaled": scaled_classifier(fp32, root / "scaled.onnx"),
              "bert-renamed": renamed_inputs(fp32, root / "renamed.onnx", {"input_ids": "ids", "attention_mask": "mask"})}
    running = Relaunching(lambda: required(lambda: ks.start(root / "server", models, publish_metadata=("bert-described",),
                                                            refuse_binary=True), ks.REQUIRE_ENV, "KServe"), "KServe")
    yield running
    running.stop()


@pytest.fixture
def server(live: Relaunching) -> Server:
    """The module's server, started again first if it died during an earlier test."""
    return live.serving()


def test_a_predictor_without_metadata_is_judged_from_the_reference_inputs(server, tmp_path, capsys):
    code, text, suites = check([*SMALL, "--endpoint", server.http, "--served-model", "bert"], tmp_path / "run", capsys)
    assert code == 0, text
    assert {s: r["verdict"] for s, r in suites.items()} == {"check": "pass", "check_concurrency": "pass"}
    served = suites["check"]["data"]["served"]["model"]
    assert served["server"]["name"] == "kserve"
    assert [(t["name"], t["datatype"]) for t in served["inputs"]] == [("input_ids", "INT64"), ("attention_mask", "INT64")]
    assert [t["name"] for t in served["outputs"]] == ["logits"]
    assert "reference" in served["io_source"]["inputs"] and "first response" in served["io_source"]["outputs"]
    assert served["transport"]["tensors"] == "json"
    assert suites["check"]["metrics"]["model.logits.cosine"] > 0.9999


def test_a_scaled_weight_behind_the_same_predictor_fails(server, tmp_path, capsys):
    code, text, suites = check([*SMALL, "--endpoint", server.http, "--served-model", "bert-scaled"], tmp_path / "run", capsys)
    assert code == 1, text
    judged = suites["check"]
    assert judged["verdict"] == "fail" and "model/logits" in judged["reason"], judged["reason"]
    assert judged["metrics"]["model.logits.norm_max_abs"] > 0.1


def test_other_input_names_are_refused_with_the_servers_message_until_mapped(server, tmp_path, capsys):
    code, text, suites = check([*SMALL, "--endpoint", server.http, "--served-model", "bert-renamed"], tmp_path / "bad", capsys)
    assert code == 2 and not suites, text
    line = text.strip().splitlines()[-1]
    assert "bert-renamed" in line and "publishes no outputs" in line and "Traceback" not in text
    assert "ids" in line  # the server's own words (ONNX Runtime's missing-input error) reach the user
    code, text, suites = check([*SMALL, "--endpoint", server.http, "--served-model", "bert-renamed",
                                 "--map", "input_ids=ids", "--map", "attention_mask=mask"], tmp_path / "map", capsys)
    assert code == 0, text
    served = suites["check"]["data"]["served"]["model"]
    assert [t["name"] for t in served["inputs"]] == ["ids", "mask"]


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_a_predictor_publishing_its_metadata_is_judged_over_both_transports(server, tmp_path, capsys, transport):
    url = server.http if transport == "http" else server.grpc
    code, text, suites = check([*SMALL, "--endpoint", url, "--served-model", "bert-described"], tmp_path / "run", capsys)
    assert code == 0, text
    served = suites["check"]["data"]["served"]["model"]
    assert served["io_source"] == {"inputs": "metadata", "outputs": "metadata"}
    assert [t["shape"] for t in served["inputs"]] == [[None, None], [None, None]]
    assert served["transport"]["tensors"] == ("json" if transport == "http" else "binary")


def test_binary_tensors_refused_with_a_400_are_resent_as_json_and_recorded(server):
    from harness.serving.client import OipClient, TensorEncoding
    from harness.settings.endpoint import parse_endpoint

    client = OipClient(parse_endpoint(server.http, ["bert-described"]))
    try:
        client.preflight()
        model = client.model("bert-described")
        client.encoding = TensorEncoding(True, "asked for by the test")
        feeds = {"input_ids": np.ones((2, 6), dtype=np.int64), "attention_mask": np.ones((2, 6), dtype=np.int64)}
        out = client.infer(model, feeds)
    finally:
        client.close()
    assert out["logits"].shape == (2, 5)
    assert not client.encoding.binary and "binary tensor data is not supported" in client.encoding.why
    assert client.encoding.record("http") == {"tensors": "json", "why": client.encoding.why}
