"""The accuracy gate at session end (``--harness-baseline-save`` / ``--harness-baseline-compare``),
with the logits suite on one small variant (bert-tiny FP16 on ONNX Runtime, 8 sentences)."""

from __future__ import annotations

import json
from pathlib import Path

import onnxruntime  # noqa: F401
import pytest

# pytester's in-process runs drop modules first imported inside them; native extensions
# (onnx's protobuf registry) abort when imported twice, so import the stack up front.
import harness.export.artifacts  # noqa: F401
import harness.gate.accuracy  # noqa: F401
import harness.judge.numeric  # noqa: F401
import harness.judge.workspace  # noqa: F401
import harness.runners  # noqa: F401

SUITE = (Path(__file__).resolve().parents[1] / "harness" / "suites" / "test_logits_parity.py").read_text()
ARGS = ["--harness-models=bert-tiny", "--harness-precisions=fp16", "--harness-providers=ort_cpu",
        "--harness-samples=8", "--harness-threads=1", "-p", "no:cacheprovider"]
KEY = "model.logits.norm_max_abs"


def test_session_end_gate_judges_accuracy_against_the_baseline(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_logits=SUITE)
    store = tmp_path / "baselines"
    args = [*ARGS, f"--harness-baseline-store={store}"]
    first = pytester.runpytest_inprocess(*args, f"--harness-out={tmp_path / 'a'}", "--harness-baseline-save=main")
    assert first.ret == 0
    first.stdout.fnmatch_lines(["*saved baseline 'main': 0 perf record(s), 1 accuracy record(s)*"])
    same = pytester.runpytest_inprocess(*args, f"--harness-out={tmp_path / 'b'}", "--harness-baseline-compare=main")
    assert same.ret == 0
    same.stdout.fnmatch_lines(["*OK: no accuracy regression*"])
    # Bless a baseline whose FP16 error was a third of today's: today's is then 3x worse.
    path = store / "main" / "results.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        row["metrics"][KEY] /= 3
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    worse = pytester.runpytest_inprocess(*args, f"--harness-out={tmp_path / 'c'}", "--harness-baseline-compare=main")
    assert worse.ret == 1, "a regression against the baseline fails the session although every case passed"
    worse.stdout.fnmatch_lines(["*accuracy vs baseline*", "*REGRESSION*", "*FAIL: 1 accuracy regression(s) (norm_max_abs)*"])
    report = json.loads((tmp_path / "c" / "accuracy-compare.json").read_text())
    assert report["exit_code"] == 1 and report["counts"]["REGRESSION"] == 1
    assert "norm_max_abs" in (tmp_path / "c" / "accuracy-compare.md").read_text()
    # a margin override (option table: --harness-accuracy-margin) widens it for this model and precision
    wide = pytester.runpytest_inprocess(*args, f"--harness-out={tmp_path / 'd'}", "--harness-baseline-compare=main",
                                        "--harness-accuracy-margin=bert-tiny:fp16:norm_max_abs=300%")
    assert wide.ret == 0
    bad = pytester.runpytest_inprocess(*args, "--harness-baseline-compare=main",
                                       "--harness-accuracy-margin=fp16:norm_max=1")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR and "did you mean 'norm_max_abs'" in bad.stderr.str()
