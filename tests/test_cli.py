"""The CLI contract: exit 0 / 1 / 2, one-line errors, results + summary written."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import harness.judge.workspace  # noqa: F401  (see tests/test_plugin.py: import native stacks once)
from harness.cli import main

FAILING_SUITE = '''
from harness.judge.numeric import GateFailure


def test_always_drifts(variant, harness):
    harness.metrics["drift"] = 1.0
    raise GateFailure("drift = 1 (must be <= 0.1)")
'''


def test_bad_model_is_exit_2_with_one_line(capsys, tmp_path):
    assert main(["run", "--models", "bert-tyni", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["harness: error: --models: unknown model 'bert-tyni' (did you mean 'bert-tiny'?); known: "
                   + err[0].split("known: ")[1]]
    assert not (tmp_path / "results.jsonl").exists()


def test_bad_flag_is_exit_2(capsys):
    assert main(["run", "--precisions", "fp64"]) == 2
    assert "unknown precision 'fp64'" in capsys.readouterr().err


def test_missing_suites_dir_is_exit_2(capsys, tmp_path):
    assert main(["run", "--suites", str(tmp_path / "nope")]) == 2
    assert "--suites:" in capsys.readouterr().err


def test_run_passes_and_writes_results(tmp_path):
    out = tmp_path / "run"
    suite = Path(__file__).resolve().parents[1] / "harness" / "suites" / "test_logits_parity.py"
    code = main(["run", "--suites", str(suite), "--models", "bert-tiny", "--precisions", "fp32",
                 "--providers", "ort_cpu", "ort_cuda", "--allow-skip", "--out", str(out)])
    assert code == 0
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["verdict"] for r in records} == {"pass", "skip"}
    assert "test_logits_parity[bert-tiny-fp32-ort_cpu]" in (out / "summary.md").read_text()


def test_requested_provider_that_cannot_run_is_not_run_and_fails(tmp_path, capsys, monkeypatch):
    """--providers ort_cuda on a machine without CUDA: the case is not green (verdict not-run,
    exit 1), junit.xml reports it as a failure and the GitHub job summary says so."""
    out, summary = tmp_path / "run", tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code = main(["run", "--models", "bert-tiny", "--precisions", "fp32", "--providers", "ort_cuda",
                 "-k", "logits", "--junit-xml", str(tmp_path / "ci" / "junit.xml"), "--out", str(out)])
    assert code == 1
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["verdict"] == "not-run" and "CUDAExecutionProvider" in record["reason"]
    for junit in (out / "junit.xml", tmp_path / "ci" / "junit.xml"):
        failure = ET.parse(junit).getroot().find(".//testcase/failure")
        assert failure is not None and failure.get("type") == "not-run"
    assert "not-run" in summary.read_text() and "FAILED" in summary.read_text()


def test_run_fails_with_exit_1_and_keeps_records(tmp_path):
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_drift.py").write_text(FAILING_SUITE)
    out = tmp_path / "run"
    code = main(["run", "--suites", str(suites), "--models", "bert-tiny", "--precisions", "fp32",
                 "--providers", "torch_cpu", "--out", str(out)])
    assert code == 1
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["verdict"] == "fail" and record["metrics"] == {"drift": 1.0}


def test_doctor_lists_skip_reasons(capsys):
    assert main(["doctor", "--models", "bert-tiny", "--precisions", "fp32"]) == 0
    out = capsys.readouterr().out
    assert "onnxruntime execution providers:" in out
    assert "no CUDA device" in out and "variant(s) run here" in out  # grouped: one row per model
