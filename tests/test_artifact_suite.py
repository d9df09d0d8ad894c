"""The suite config's ``[models.<name>.artifacts]`` are judged by the suites themselves.

The artifacts are raw ``torch.onnx.export`` files with other I/O names (tests/test_check.py's
hand exports); a faithful one passes, one with a single weight row 10% off fails, and only
ONNX Runtime providers at precisions that have an artifact become cases.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.zoo.base import materialize, resolve
from tests.test_check import _bert_onnx

SUITE = (Path(__file__).resolve().parents[1] / "harness" / "suites" / "test_artifact_parity.py").read_text()


def test_config_artifacts_become_cases_and_are_judged(pytester: pytest.Pytester, tmp_path):
    shutil.copytree(materialize(resolve("bert-tiny")), pytester.path / "models" / "clf")
    exports = pytester.path / "exports"
    exports.mkdir()
    _bert_onnx(exports / "good.onnx")
    _bert_onnx(exports / "bad.onnx", perturb=True)
    pytester.makefile(".toml", harness="""
[run]
models = ["clf"]
precisions = ["fp32", "fp16", "int8"]
providers = ["torch_cpu", "ort_cpu"]
samples = 8

[models.clf]
path = "models/clf"

[models.clf.tolerances.fp16]
norm_max_abs = 1e-4

[models.clf.artifacts]
fp32 = "exports/good.onnx"
fp16 = "exports/bad.onnx"
""")
    pytester.makepyfile(test_team_artifacts=SUITE)
    out = tmp_path / "run"
    result = pytester.runpytest_subprocess(f"--harness-out={out}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    records = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert set(records) == {"test_artifact_parity[clf-fp32-ort_cpu]", "test_artifact_parity[clf-fp16-ort_cpu]"}
    good, bad = records["test_artifact_parity[clf-fp32-ort_cpu]"], records["test_artifact_parity[clf-fp16-ort_cpu]"]
    assert good["verdict"] == "pass"
    assert max(v for k, v in good["metrics"].items() if k.endswith("norm_max_abs")) < 1e-5
    assert bad["verdict"] == "fail" and "norm_max_abs" in bad["reason"]
    assert any(a.get("sha256") for a in bad["artifacts"].values())
