"""Repro bundles beyond numeric cases (issue 14): a failing generation case, a latency budget
breach and an erroring case each write a bundle on one cache, and ``harness repro`` judges it
again in another process with an empty cache and another working directory. The generation
case also carries its forensics (the divergent steps) into the record and the HTML card."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.generation.forensics import NEAR_TIE_MARGIN, TOP_K
from tests.test_repro import _repro

SUITES = Path(__file__).resolve().parents[1] / "harness" / "suites"


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _edit(bundle: Path, tmp: Path, edit) -> Path:
    copy = tmp / "edited"
    shutil.copytree(bundle, copy)
    manifest = json.loads((copy / "bundle.json").read_text())
    edit(manifest)
    (copy / "bundle.json").write_text(json.dumps(manifest))
    return copy


# -- generation ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gen_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """llama-tiny INT8 really diverges from PyTorch on some sentences: an exact-token gate fails it."""
    tmp = tmp_path_factory.mktemp("gen")
    config = tmp / "harness.toml"
    config.write_text("[tolerances.int8]\ngen_token_exact_match = 1.0\n")
    out = tmp / "run"
    code = main(["run", "--suites", str(SUITES / "test_generation_parity.py"), "--config", str(config), "--models",
                 "llama-tiny", "--precisions", "int8", "--providers", "ort_cpu", "--out", str(out), "--pytest-args",
                 "--harness-gen-samples", "8", "--harness-gen-max-new-tokens", "8"])
    assert code == 1
    return out


def test_generation_failure_records_forensics_in_record_and_html(gen_run: Path):
    (record,) = _records(gen_run)
    entries = record["data"]["generation_forensics"]
    assert 1 <= len(entries) <= 3
    for e in entries:
        assert len(e["reference"]["top"]) == len(e["variant"]["top"]) == TOP_K
        assert e["reference"]["chosen"] != e["variant"]["chosen"] and e["faithful"]
        assert e["near_tie"] == (e["reference_margin"] < NEAR_TIE_MARGIN)
        assert e["reference"]["top"][0]["id"] == e["reference"]["chosen"]  # greedy picks the reference's top-1
        assert e["variant"]["top"][0]["id"] == e["variant"]["chosen"]
    assert "divergent steps (teacher-forced top-k" in record["reason"]
    assert f"sentence {entries[0]['index']} step {entries[0]['step']}:" in record["reason"]
    assert main(["report", str(gen_run), "--html", str(gen_run / "report.html")]) == 0
    html = (gen_run / "report.html").read_text()
    assert 'class="forensics"' in html and "first divergent step" in html


def test_generation_bundle_reproduces_with_an_empty_cache(gen_run: Path, tmp_path: Path):
    (record,) = _records(gen_run)
    bundle = Path(record["data"]["repro_bundles"]["generation"])
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["kind"] == "generation" and manifest["settings"]["max_new_tokens"] == 8
    assert len(manifest["sources"]) == len(manifest["reference"]["tokens"]) == 8
    assert (bundle / "tokenizer" / "tokenizer_config.json").is_file()
    assert all(a["bundled"] for a in manifest["artifacts"].values())
    out = tmp_path / "outcome.json"
    done = _repro(bundle, tmp_path, "--json", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REPRODUCES" in done.stdout and "tokenizer outputs: identical to the recording" in done.stdout
    assert "variant tokens identical to the recorded variant decode: 8/8" in done.stdout
    outcome = json.loads(out.read_text())
    assert outcome["failures_now"][0] == "gen_token_exact_match"  # then the closed-loop cached-decoding checks
    assert all(f.startswith("cached_decoding.") for f in outcome["failures_now"][1:])
    assert outcome["metrics_now"]["gen_token_exact_match"] == pytest.approx(
        record["metrics"]["gen_token_exact_match"])
    assert all(s["top1_now"] == s["top1_recorded"] for s in outcome["divergent_steps_now"])


def test_generation_bundle_with_a_loosened_gate_does_not_reproduce(gen_run: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]):
    (record,) = _records(gen_run)

    def loosen(m: dict) -> None:
        for t in m["thresholds"]:
            if t["metric"] == "gen_token_exact_match":
                t["threshold"] = 0.0

    capsys.readouterr()  # in this process: the empty-cache property is the test above's
    assert main(["repro", str(_edit(Path(record["data"]["repro_bundles"]["generation"]), tmp_path, loosen))]) == 0
    assert "DOES NOT REPRODUCE: now passing gen_token_exact_match" in capsys.readouterr().out


def test_generation_bundle_with_a_changed_tokenizer_is_refused(gen_run: Path, tmp_path: Path):
    (record,) = _records(gen_run)
    copy = tmp_path / "bundle"
    shutil.copytree(Path(record["data"]["repro_bundles"]["generation"]), copy)
    with (copy / "tokenizer" / "tokenizer.json").open("a") as fh:
        fh.write(" ")
    done = _repro(copy, tmp_path)
    assert done.returncode == 2 and "tokenizer/tokenizer.json does not match its recorded sha256" in done.stderr


@pytest.mark.parametrize("damage", ["graph", "family", "settings"])
def test_a_malformed_generation_bundle_is_one_line_exit_2(gen_run: Path, tmp_path: Path, damage: str,
                                                          capsys: pytest.CaptureFixture[str]):
    (record,) = _records(gen_run)

    def edit(m: dict) -> None:
        if damage == "graph":
            m["artifacts"] = {"encoder": m["artifacts"]["model"]}
        elif damage == "family":
            m["family"] = "no-such-family"
        else:
            m["settings"]["max_new_tokens"] = 0

    capsys.readouterr()
    assert main(["repro", str(_edit(Path(record["data"]["repro_bundles"]["generation"]), tmp_path, edit))]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert {"graph": "lack the decoding graph(s) model", "family": "unknown family 'no-such-family'",
            "settings": "max_new_tokens must be >= 1"}[damage] in err


# -- perf budget ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def perf_breach(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """A latency budget no variant meets: the run fails and writes a perf bundle; (record, bundle)."""
    tmp = tmp_path_factory.mktemp("perf")
    config = tmp / "harness.toml"
    config.write_text("[models.bert-tiny.budgets]\np50_ms = 0.001\n")
    out = tmp / "run"
    assert main(["run", "--suites", str(SUITES / "test_perf.py"), "-k", "test_latency", "--config", str(config),
                 "--models", "bert-tiny", "--precisions", "int8", "--providers", "ort_cpu", "--perf",
                 "--perf-samples", "10", "--perf-warmup", "1", "--out", str(out)]) == 1
    (record,) = _records(out)
    return record, Path(record["data"]["repro_bundles"]["perf"])


def test_latency_budget_breach_bundle_is_measured_again(perf_breach: tuple[dict, Path], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]):
    record, bundle = perf_breach
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["kind"] == "perf" and manifest["budget"] == {"p50_ms": 0.001}
    assert manifest["measured"]["p50_ms"] == pytest.approx(record["metrics"]["perf.p50_ms"])
    done = _repro(bundle, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "p50_ms: now" in done.stdout and "recorded" in done.stdout and "timings depend on the machine" in done.stdout
    assert "REPRODUCES: 1 recorded budget breach(es) fail again" in done.stdout

    def generous(m: dict) -> None:
        m["budget"]["p50_ms"] = 1e9

    capsys.readouterr()
    assert main(["repro", str(_edit(bundle, tmp_path, generous))]) == 0
    assert "DOES NOT REPRODUCE: now passing p50_ms" in capsys.readouterr().out


def test_a_budget_measured_as_nan_again_is_a_breach_not_a_pass(perf_breach: tuple[dict, Path],
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]):
    """``harness repro`` judges a perf bundle's budgets by the suites' one rule: a number that could
    not be measured (NaN) breaches its budget, as it fails the suite case (it compared False both
    ways with ``value > limit``, so a broken re-measurement read as "does not reproduce")."""
    import math

    from harness.repro import perf as repro_perf

    _, bundle = perf_breach
    measured = repro_perf.remeasure

    def unmeasurable(*args, **kwargs):
        now, entry, source = measured(*args, **kwargs)
        return {**now, "p50_ms": math.nan}, entry, source

    monkeypatch.setattr(repro_perf, "remeasure", unmeasurable)
    capsys.readouterr()
    assert main(["repro", str(bundle)]) == 1
    assert "REPRODUCES: 1 recorded budget breach(es) fail again" in capsys.readouterr().out


# -- erroring case ---------------------------------------------------------------------------------------
def test_erroring_case_bundle_raises_the_same_error_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """TorchScript bakes encoder-custom's batch size into a Reshape: the artifact raises on the
    corpus batches (tests/test_faults.py), so the case errors."""
    out = tmp_path / "run"
    assert main(["run", "--suites", str(SUITES / "test_logits_parity.py"), "--models", "encoder-custom",
                 "--precisions", "fp32", "--providers", "ort_cpu", "--exporter", "torchscript", "--samples", "16",
                 "--batch-size", "8", "--out", str(out)]) == 1
    (record,) = _records(out)
    assert record["verdict"] == "error"
    bundle = Path(record["data"]["repro_bundles"]["model"])
    manifest = json.loads((bundle / "bundle.json").read_text())
    error = manifest["error"]
    assert manifest["kind"] == "error" and error["stage"] == "run" and error["type"] != "ReplayedError"
    assert "Reshape" in error["message"] and "Traceback" in error["traceback"]
    done = _repro(bundle, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "type same; normalised message same" in done.stdout and f"REPRODUCES: {error['type']} again" in done.stdout

    def other_error(m: dict) -> None:
        m["error"]["message"] = "a different message"

    capsys.readouterr()
    assert main(["repro", str(_edit(bundle, tmp_path, other_error))]) == 0
    assert "DOES NOT REPRODUCE: a different error" in capsys.readouterr().out


def test_normalize_drops_what_differs_between_machines():
    from harness.repro.errortext import normalize

    a = normalize("Load model from /home/a/cache/x-1/model.onnx failed at /src/ort/core/x.h:91 (obj 0x7f12ab)")
    b = normalize("Load model from C:\\Users\\b\\model.onnx failed at /build/ort/core/x.h:88 (obj 0x55aa)")
    assert a == b == "Load model from model.onnx failed at <source> (obj 0x?)"
    assert "/model/encoder/layers.0/Reshape_4" in normalize("node /model/encoder/layers.0/Reshape_4 failed")


def _identity_onnx(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_an_error_the_file_does_not_raise_writes_no_bundle(tmp_path: Path):
    """Only the runtime's refusal of the file is bundled: an exception raised elsewhere (the
    harness's code, an export) is not reproducible from the file, so no bundle claims it is."""
    import numpy as np

    from harness.repro import load_bundle
    from harness.repro.error import outcome, write_error_bundle
    from tests.conftest import variant

    onnx_file = _identity_onnx(tmp_path / "model.onnx")
    v = variant("bert-tiny", "fp32", "ort_cpu")
    fine = [{"x": np.ones(3, np.float32)}]
    assert write_error_bundle(tmp_path / "none", variant=v, graph="model", artifact=onnx_file, batches=fine,
                              exc=ValueError("a bug in the harness"), runtime=None, threads=1) is None
    assert not (tmp_path / "none").exists()
    wrong = [*fine, {"x": np.ones((2, 3), np.float32)}]  # the runtime refuses a rank-2 feed for a rank-1 input
    bundle = write_error_bundle(tmp_path / "b", variant=v, graph="model", artifact=onnx_file, batches=wrong,
                                exc=RuntimeError("replayed"), runtime=None, threads=1)
    assert bundle is not None
    loaded = load_bundle(bundle)
    assert loaded.kind == "error" and loaded.manifest["error"]["batch"] == 1
    assert loaded.manifest["error"]["case_type"] == "RuntimeError"
    done = outcome(loaded, None, 1)
    assert done.reproduces and done.data["same_type"] and done.data["same_message"]
