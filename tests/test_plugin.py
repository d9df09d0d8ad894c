"""The pytest plugin end to end (pytester): ids, one record per case, verdicts, xdist."""

from __future__ import annotations

import json
from pathlib import Path

import onnxruntime  # noqa: F401,E402
import pytest

# pytester's in-process runs drop modules first imported inside them; native extensions
# (onnx's protobuf registry) abort when imported twice, so import the stack up front.
import harness.export.artifacts  # noqa: F401,E402
import harness.judge.numeric  # noqa: F401,E402
import harness.judge.workspace  # noqa: F401,E402
import harness.runners  # noqa: F401,E402

SUITE = '''
from harness.judge.numeric import GateFailure


def test_logits_parity(variant, harness):
    harness.numeric_parity().assert_ok()
'''

VERDICTS = '''
import pytest
from harness.judge.numeric import GateFailure


@pytest.fixture
def broken():
    raise RuntimeError("fixture exploded")


def test_gate(variant, harness):
    harness.metrics["answer"] = 41.0
    raise GateFailure("answer: 41 (must be >= 42)")


def test_crash(variant, harness):
    raise ValueError("runner crashed")


def test_setup_error(variant, harness, broken):
    pass


def test_ok(variant, harness):
    harness.metrics["answer"] = 42.0
'''


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines() if line.strip()]


def test_matrix_ids_records_and_skip_reasons(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_suite_under_test=SUITE)
    out = tmp_path / "run"
    result = pytester.runpytest_inprocess(
        "--harness-models=bert-tiny", "--harness-precisions=fp32,int8",
        "--harness-providers=torch_cpu,ort_cpu,ort_cuda", f"--harness-out={out}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, skipped=2)
    result.stdout.fnmatch_lines(["*harness summary*", "*results: *results.jsonl*"])
    records = {r["id"]: r for r in _records(out)}
    assert set(records) == {f"test_logits_parity[bert-tiny-{p}-{v}]" for p in ("fp32", "int8")
                            for v in ("torch_cpu", "ort_cpu", "ort_cuda")}
    ok = records["test_logits_parity[bert-tiny-int8-ort_cpu]"]
    assert ok["verdict"] == "pass" and ok["schema"] == "harness.result/1"
    assert ok["precision"] == "int8" and ok["backend"] == "onnxruntime" and ok["provider"] == "ort_cpu"
    assert len(ok["model_sha256"]) == 64
    assert ok["metrics"]["model.logits.cosine"] > 0.99
    assert ok["thresholds"]["model.logits.cosine"]["op"] == ">="
    assert all(len(a["sha256"]) == 64 for a in ok["artifacts"].values())
    assert ok["env"]["fingerprint"] and "onnxruntime" in ok["env"]["versions"]
    skipped = records["test_logits_parity[bert-tiny-fp32-ort_cuda]"]
    assert skipped["verdict"] == "not-run"  # ort_cuda was asked for by name: not green
    assert skipped["reason"].startswith("CUDAExecutionProvider not available; installed: [")
    all_cases = (out / "summary.md").read_text().split("## All cases", 1)[1].split("\n## ", 1)[0]
    assert all_cases.count("| `test_logits_parity[") == 6  # one row per case (the coverage section has its own)
    assert result.ret == 1  # plain pytest too: a requested variant that did not run is not green


def test_verdicts_fail_error_and_setup_error(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_verdicts=VERDICTS)
    out = tmp_path / "run"
    result = pytester.runpytest_inprocess("--harness-models=bert-tiny", "--harness-precisions=fp32",
                                          "--harness-providers=torch_cpu", f"--harness-out={out}")
    result.assert_outcomes(passed=1, failed=2, errors=1)
    by_test = {r["id"].split("[")[0]: r for r in _records(out)}
    assert by_test["test_gate"]["verdict"] == "fail"
    assert "answer: 41" in by_test["test_gate"]["reason"]
    assert by_test["test_gate"]["metrics"] == {"answer": 41.0}  # metrics survive a failure
    assert by_test["test_crash"]["verdict"] == "error"
    assert by_test["test_crash"]["reason"] == "ValueError: runner crashed"
    assert by_test["test_setup_error"]["verdict"] == "error"
    assert "fixture exploded" in by_test["test_setup_error"]["reason"]
    assert by_test["test_ok"]["verdict"] == "pass"


def test_unknown_option_values_are_usage_errors(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite_under_test=SUITE)
    result = pytester.runpytest_inprocess("--harness-precisions=fp64")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--precisions: unknown precision 'fp64' (did you mean 'fp16'?)*"])


def test_xdist_produces_the_same_records_as_serial(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_suite_under_test=SUITE, test_verdicts=VERDICTS)
    args = ["--harness-models=bert-tiny", "--harness-precisions=fp32,fp16", "--harness-providers=torch_cpu,ort_cpu",
            "-p", "no:cacheprovider"]
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    pytester.runpytest_subprocess(*args, f"--harness-out={serial}")
    result = pytester.runpytest_subprocess(*args, f"--harness-out={parallel}", "-n", "2")
    result.stdout.fnmatch_lines(["*2 workers*"])
    def key(r):
        return (r["id"], r["verdict"], r["reason"].split(" at ")[0])
    assert sorted(map(key, _records(serial))) == sorted(map(key, _records(parallel)))
    assert len(_records(parallel)) == 4 + 4 * 4


FAILING = '''
from harness.families.seq2seq import Seq2SeqFamily


def test_faulty_decoder(variant, harness):
    harness.numeric_parity(family=Seq2SeqFamily(encoder_mask=False)).assert_ok()
'''


def test_failure_leaves_a_rerun_command_and_the_failing_batch(pytester: pytest.Pytester, tmp_path):
    import numpy as np

    pytester.makepyfile(test_fault_suite=FAILING)
    out = tmp_path / "run"
    pytester.runpytest_inprocess("--harness-models=marian-tiny", "--harness-precisions=fp32",
                                 "--harness-providers=ort_cpu", "--harness-samples=16", f"--harness-out={out}")
    (record,) = _records(out)
    assert record["verdict"] == "fail"
    assert record["rerun"] == ("harness run --suites test_fault_suite.py --models marian-tiny --precisions fp32 "
                               "--providers ort_cpu --samples 16 --batch-size 8 --opset 17 "
                               "-k 'test_faulty_decoder and marian-tiny-fp32-ort_cpu'")
    dumps = record["data"]["failing_batches"]
    assert set(dumps) == {"decoder", "decoder_with_past"}
    arrays = np.load(dumps["decoder"])
    assert {"input.input_ids", "input.encoder_attention_mask", "reference.logits", "variant.logits"} <= set(arrays)
    assert np.abs(arrays["reference.logits"] - arrays["variant.logits"]).max() > 1e-3


def test_sessions_without_models_stay_light(pytester: pytest.Pytester):
    """The plugin is installed environment-wide: a test session that never asks for a model
    must not pay for importing torch / transformers / scipy (measured: 6.8 s -> 1.6 s)."""
    pytester.makepyfile(test_plain='''
import sys


def test_nothing_heavy_was_imported():
    heavy = [m for m in ("torch", "transformers", "onnxruntime", "scipy") if m in sys.modules]
    assert not heavy, heavy
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
