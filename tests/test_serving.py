"""Judging a model as it is served: a real MLServer on 127.0.0.1 serving the harness's own
artifacts (bert-tiny FP32 and INT8, and two deliberately faulty graphs), judged through the
Open Inference Protocol over HTTP and gRPC.

Negative controls: the same check passes on the faithful model and fails, naming the check,
on the INT8 file served under an FP32 claim and on a graph whose answer depends on the
request's batch size (only the concurrency check can see it). Refusals are exit 2 with one
line; failed and slow requests during a sweep are counted; a server that dies mid-sweep ends
the perf case as an error with the measured steps kept. tests/serving/mlserver.py starts and
stops the servers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.cli import main
from tests.serving import mlserver as ms
from tests.serving.venv_server import Relaunching

pytest.importorskip("tritonclient.http", reason="the serving client (pip install 'model-harness[serving]')")

SMALL = ["--samples", "8", "--batch-size", "4"]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """bert-tiny's FP32 and INT8 artifacts as the harness builds them, and two faulty graphs."""
    from harness.core import Precision, RunOptions, Settings, Variant
    from harness.judge.workspace import Workspace
    from harness.runners import PROVIDERS
    from harness.serving.artifacts import variant_files

    ws = Workspace(RunOptions(settings=Settings(samples=8, batch_size=4)))
    out = {p: variant_files(ws, Variant("bert-tiny", Precision(p), PROVIDERS["ort_cpu"]))[2][0].path
           for p in ("fp32", "int8")}
    marian = variant_files(ws, Variant("marian-tiny", Precision.FP32, PROVIDERS["ort_cpu"]))[2]
    out.update({f"marian-{g.graph.name}": g.path for g in marian})
    root = tmp_path_factory.mktemp("faulty")
    out["batch1"] = _wrong_at_batch_one(out["fp32"], root / "batch1.onnx")
    out["wrong_io"] = _other_io(root / "wrong_io.onnx")
    return out


def _wrong_at_batch_one(src: Path, dst: Path) -> Path:
    """The faithful graph plus 0.05 on every logit when the request holds one row: right for
    whole batches, wrong for single requests (a batch size baked into a graph, PITFALLS #2)."""
    model = onnx.load(str(src))
    g = model.graph
    g.output[0].name = "logits"
    for node in g.node:
        node.output[:] = ["logits_raw" if o == "logits" else o for o in node.output]
    g.initializer.extend([helper.make_tensor("two", TensorProto.INT64, [], [2]),
                          helper.make_tensor("bump", TensorProto.FLOAT, [], [0.05]),
                          helper.make_tensor("zero", TensorProto.INT64, [], [0])])
    g.node.extend([helper.make_node("Shape", ["logits_raw"], ["shape"]),
                   helper.make_node("Gather", ["shape", "zero"], ["rows"], axis=0),
                   helper.make_node("Less", ["rows", "two"], ["single"]),
                   helper.make_node("Cast", ["single"], ["single_f"], to=TensorProto.FLOAT),
                   helper.make_node("Mul", ["single_f", "bump"], ["delta"]),
                   helper.make_node("Add", ["logits_raw", "delta"], ["logits"])])
    onnx.save(model, str(dst))
    return dst


def _other_io(dst: Path) -> Path:
    x = helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 3])
    graph = helper.make_graph([helper.make_node("Relu", ["pixel_values"], ["scores"])], "other", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(dst))
    return dst


@pytest.fixture(scope="module")
def live(files, tmp_path_factory) -> Iterator[Relaunching]:
    models = [ms.ServedFile("bert", files["fp32"], max_batch_size=4, max_batch_time=0.005),
              ms.ServedFile("bert-int8", files["int8"], precision="fp32"),
              ms.ServedFile("bert-batch1", files["batch1"]),
              ms.ServedFile("other-io", files["wrong_io"]),
              ms.ServedFile("bert-flaky", files["fp32"], faults={"fail_every": 4, "slow_every": 7, "slow_s": 2.0}),
              *(ms.ServedFile(f"marian-{role}", files[f"marian-{role}"])
                for role in ("encoder", "decoder", "decoder_with_past"))]
    running = Relaunching(lambda: ms.start_or_skip(tmp_path_factory.mktemp("mlserver"), models), "MLServer")
    yield running
    running.stop()
    assert running.server.process.poll() is not None


@pytest.fixture
def server(live: Relaunching) -> ms.Server:
    """The module's server, started again first if it died during an earlier test."""
    return live.serving()


def _check(argv: list[str], out: Path, capsys) -> tuple[int, str, list[dict]]:
    code = main(["check", *argv, "--out", str(out)])
    captured = capsys.readouterr()
    results = out / "results.jsonl"
    records = [json.loads(x) for x in results.read_text().splitlines()] if results.exists() else []
    return code, captured.out + captured.err, records


def _by_suite(records: list[dict]) -> dict[str, dict]:
    return {r["suite"]: r for r in records}


def test_faithful_served_model_passes_with_metadata_and_a_sweep(server, tmp_path, capsys):
    out = tmp_path / "run"
    code, text, records = _check(["--reference", "bert-tiny", "--endpoint", server.http, "--served-model", "bert",
                                  *SMALL, "--perf", "--concurrency", "1", "2", "--sweep-window", "0.3",
                                  "--step-budget", "2"], out, capsys)
    assert code == 0, text
    suites = _by_suite(records)
    assert {s: r["verdict"] for s, r in suites.items()} == {"check": "pass", "check_concurrency": "pass",
                                                            "check_perf": "pass"}
    served = suites["check"]["data"]["served"]["model"]
    assert served["platform"] == "onnxruntime_onnx" and served["server"]["name"] == "mlserver"
    assert [t["name"] for t in served["inputs"]] == ["input_ids", "attention_mask"]
    assert suites["check"]["settings"]["endpoint"]["url"] == server.http
    assert suites["check"]["metrics"]["model.logits.cosine"] > 0.9999
    conc = suites["check_concurrency"]
    assert "model@concurrent.logits.max_abs" in conc["metrics"] and conc["data"]["concurrency"]["model"]["requests"] == 8
    perf = suites["check_perf"]["perf"]
    assert perf["latency_ms"]["concurrency"] == 1 and perf["latency_ms"]["samples"]
    assert perf["latency_ms[concurrency=2]"]["engine"] == "oip-http"
    assert [s["concurrency"] for s in perf["serving"]["steps"]] == [1, 2] and perf["serving"]["errors"] == 0
    assert "concurrency  2: p50" in text
    # the sweep's records go through the baseline gate and the HTML report like any perf record
    store = tmp_path / "baselines"
    assert main(["baseline", "save", str(out), "--name", "served", "--baseline-store", str(store)]) == 0
    assert main(["baseline", "compare", str(out), "--name", "served", "--baseline-store", str(store)]) == 0
    assert main(["report", str(out), "--html", str(tmp_path / "r.html")]) == 0
    assert "latency_ms[concurrency=2]" in (tmp_path / "r.html").read_text()


def test_grpc_transport_judges_the_same_model(server, tmp_path, capsys):
    code, text, records = _check(["--reference", "bert-tiny", "--endpoint", server.grpc, "--served-model", "bert",
                                  *SMALL], tmp_path / "run", capsys)
    assert code == 0, text
    assert _by_suite(records)["check"]["settings"]["endpoint"]["protocol"] == "grpc"


def test_seq2seq_served_as_encoder_and_decoder_steps_is_judged_and_decodes(server, tmp_path, capsys):
    """marian-tiny as three served models (encoder, first decoder step, cached step): numeric
    parity of each, then greedy decoding through the server against PyTorch's."""
    roles = [f"--served-model={role}=marian-{role}" for role in ("encoder", "decoder", "decoder_with_past")]
    code, text, records = _check(["--reference", "marian-tiny", "--endpoint", server.grpc, *roles, *SMALL,
                                  "--gen-samples", "4"], tmp_path / "run", capsys)
    suites = _by_suite(records)
    assert code == 0, text
    assert {s: r["verdict"] for s, r in suites.items()} == {"check": "pass", "check_concurrency": "pass",
                                                            "check_generation": "pass"}
    assert set(suites["check"]["data"]["served"]) == {"encoder", "decoder", "decoder_with_past"}
    assert any(k.startswith("encoder@concurrent.") for k in suites["check_concurrency"]["metrics"])


def test_int8_served_under_an_fp32_claim_fails_the_numeric_check(server, tmp_path, capsys):
    code, text, records = _check(["--reference", "bert-tiny", "--endpoint", server.http,
                                  "--served-model", "bert-int8", *SMALL], tmp_path / "run", capsys)
    assert code == 1
    check = _by_suite(records)["check"]
    assert check["verdict"] == "fail" and check["precision"] == "fp32"
    assert "precision=fp32" in check["data"]["precision"]  # what the server declared
    assert "[model/logits]" in check["reason"] or "model/logits" in check["reason"]


def test_a_batch_size_dependent_server_fails_the_concurrency_check_by_name(server, tmp_path, capsys):
    code, text, records = _check(["--reference", "bert-tiny", "--endpoint", server.http,
                                  "--served-model", "bert-batch1", *SMALL], tmp_path / "run", capsys)
    assert code == 1
    suites = _by_suite(records)
    conc = suites["check_concurrency"]
    assert conc["verdict"] == "fail" and "model@concurrent/logits" in conc["reason"], conc["reason"]
    assert conc["metrics"]["model@concurrent.logits.max_abs"] == pytest.approx(0.05, rel=1e-3)


@pytest.mark.parametrize("argv, expected", [
    (["--served-model", "nope"], "model 'nope': not found"),
    (["--served-model", "bert", "--served-version", "7"], "version '7'"),
    (["--served-model", "other-io"], "other-io"),
])
def test_refusals_are_one_line_exit_2(server, tmp_path, capsys, argv, expected):
    code, text, records = _check(["--reference", "bert-tiny", "--endpoint", server.http, *argv, *SMALL],
                                 tmp_path / "run", capsys)
    assert code == 2, text
    err = text.strip().splitlines()
    assert expected in err[-1] and "Traceback" not in text
    assert not records


def test_unreachable_and_misused_flags_are_refused_before_work(tmp_path, capsys):
    port = ms.free_port()
    for argv, expected in (
        (["--endpoint", f"http://127.0.0.1:{port}", "--served-model", "bert"], "unreachable"),
        (["--endpoint", f"grpc://127.0.0.1:{port}", "--served-model", "bert"], "unreachable"),
        (["--endpoint", "ftp://127.0.0.1:1", "--served-model", "bert"], "unknown scheme"),
        (["--endpoint", "http://127.0.0.1:99999", "--served-model", "bert"], "port"),
        (["--endpoint", "http://127.0.0.1:1"], "--served-model"),
        (["--served-model", "bert"], "--endpoint"),
        (["--endpoint", "http://10.1.2.3:8000", "--served-model", "bert", "--perf"], "load sweep targets only"),
    ):
        code = main(["check", "--reference", "bert-tiny", *argv, "--request-timeout", "5", "--out",
                     str(tmp_path / "x")])
        captured = capsys.readouterr()
        assert code == 2, (argv, captured.out, captured.err)
        assert expected in captured.err and "Traceback" not in captured.err + captured.out, (argv, captured.err)


def test_sweep_counts_failed_and_timed_out_requests(server, files):
    """Every 4th request fails (HTTP 500), every 7th takes 2 s against a 0.5 s timeout: both
    counted as errors; the successful ones are measured."""
    from harness.serving.client import OipClient
    from harness.serving.sweep import SweepSettings, perf_fields, sweep
    from harness.settings.endpoint import parse_endpoint

    endpoint = parse_endpoint(server.http, ["bert-flaky"], timeout_s=0.5)
    client = OipClient(endpoint)
    client.preflight()
    model = client.model("bert-flaky")
    feeds = {"input_ids": np.ones((1, 8), dtype=np.int64), "attention_mask": np.ones((1, 8), dtype=np.int64)}
    steps = sweep(client, model, feeds, SweepSettings(concurrency=(2,), window_s=1.0, step_budget_s=4, budget_s=10))
    client.close()
    step = steps[0]
    assert step.errors > 0 and step.samples_ms and not step.stopped
    assert any("500" in e or "timed out" in e.lower() or "timeout" in e.lower() for e in step.error_examples)
    perf = perf_fields(steps, SweepSettings(concurrency=(2,)), "http")
    assert perf["latency_ms"]["errors"] == step.errors and perf["serving"]["errors"] == step.errors


def test_a_server_dying_mid_sweep_ends_the_case_as_an_error_keeping_the_steps(files, tmp_path, capsys):
    srv = ms.start_or_skip(tmp_path / "dying", [ms.ServedFile("bert", files["fp32"], faults={"exit_after": 120})])
    try:
        code, text, records = _check(["--reference", "bert-tiny", "--endpoint", srv.http, "--served-model", "bert",
                                      *SMALL, "--perf", "--concurrency", "1", "2", "4", "--sweep-window", "0.3",
                                      "--step-budget", "30", "--request-timeout", "5"], tmp_path / "run", capsys)
    finally:
        srv.stop()
    suites = _by_suite(records)
    assert suites["check"]["verdict"] == "pass"
    perf = suites["check_perf"]
    assert code == 1 and perf["verdict"] == "error" and "stopped answering" in perf["reason"], text
    assert perf["perf"]["latency_ms"]["samples"]  # what was measured before the server died is kept
    assert perf["perf"]["serving"]["stopped"]
    assert "Traceback" not in text


def test_a_server_that_dies_is_started_again_and_a_second_death_is_not_hidden(files, tmp_path, capsys):
    """The serving tests' guard against a third-party server dying under a shared runner: a
    server that stops mid-check is judged again once on a fresh one (its log kept, a warning in
    pytest's summary); a retry that dies too is returned failing; a later test starts a fresh
    server rather than meeting the dead one."""
    dying = [ms.ServedFile("bert", files["fp32"], faults={"exit_after": 1})]
    plans = iter([dying, dying, [ms.ServedFile("bert", files["fp32"])]])
    started = []

    def start() -> ms.Server:
        started.append(ms.start_or_skip(tmp_path / f"server{len(started)}", next(plans)))
        return started[-1]

    live = Relaunching(start, "MLServer")
    try:
        argv = lambda srv: ["--reference", "bert-tiny", "--endpoint", srv.http, "--served-model", "bert", *SMALL]  # noqa: E731
        with pytest.warns(UserWarning, match="MLServer died during the check"):
            code, text, _ = live.judged(argv, tmp_path / "first", capsys)
        assert code != 0 and len(started) == 2, text  # both died: the failure is returned, not retried away
        assert (tmp_path / "first-mlserver-died.log").read_text()  # the first server's log is kept
        code, text, suites = live.judged(argv, tmp_path / "later", capsys)
        assert len(started) == 3 and code == 0, text  # the dead server was replaced before the check
        assert suites["check"]["verdict"] == "pass"
    finally:
        live.stop()
        for srv in started:
            srv.stop()


def test_config_endpoint_table_is_judged(server, tmp_path, capsys):
    config = tmp_path / "harness.toml"
    config.write_text(f'[run]\nmodels = ["bert-tiny"]\nsamples = 8\nbatch_size = 4\n\n'
                      f'[models.bert-tiny.endpoint]\nurl = "{server.grpc}"\nmodel = "bert"\ntimeout_s = 20\n')
    code, text, records = _check(["--config", str(config)], tmp_path / "run", capsys)
    assert code == 0, text
    assert _by_suite(records)["check"]["settings"]["endpoint"]["url"] == server.grpc
    config.write_text('[models.bert-tiny.endpoint]\nurl = "http://127.0.0.1:1"\nmodle = "x"\n')
    code, text, _ = _check(["--config", str(config)], tmp_path / "bad", capsys)
    assert code == 2 and "modle" in text


def test_a_request_failing_mid_check_is_the_case_error_not_a_traceback(server, tmp_path, capsys):
    """bert-flaky answers HTTP 500 to every 4th request: the parity stage that meets it ends as
    ``error`` with the server's status and message; the check still writes its records."""
    code, text, records = _check(["--reference", "bert-tiny", "--endpoint", server.http,
                                  "--served-model", "bert-flaky", *SMALL], tmp_path / "run", capsys)
    assert code == 1 and "Traceback" not in text
    verdicts = {r["suite"]: r["verdict"] for r in records}
    assert "error" in verdicts.values(), verdicts
    reasons = " ".join(r["reason"] for r in records if r["verdict"] == "error")
    assert "injected failure" in reasons or "500" in reasons, reasons
