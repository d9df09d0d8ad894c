"""``harness perf-compare --env-a/--env-b``: two environments (interpreter commands) time the same
ONNX file in alternating blocks (harness.gate.envpair); a slowdown injected into one environment's
onnxruntime is a REGRESSION, the same environment twice is not, and bad input is one line, exit 2."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.cli import main


def slow_sitecustomize(times: int) -> str:
    """A ``sitecustomize`` that makes ``onnxruntime.InferenceSession.run`` ``times`` times slower by
    busy-waiting after every call (CPU work, invisible to the environment fingerprint)."""
    return f"""
import time
import onnxruntime as _ort
_run = _ort.InferenceSession.run
def _slow(self, *a, **k):
    start = time.perf_counter_ns()
    out = _run(self, *a, **k)
    until = time.perf_counter_ns() + {times - 1} * (time.perf_counter_ns() - start)  # {times}x the call
    while time.perf_counter_ns() < until:
        pass
    return out
_ort.InferenceSession.run = _slow
"""


SLOW = slow_sitecustomize(3)


def _model(path: Path) -> Path:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((256, 256)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Tanh", ["h"], ["y"])],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 256])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _env(directory: Path) -> str:
    path = os.pathsep.join(p for p in (str(directory), os.environ.get("PYTHONPATH", "")) if p)
    return f"env PYTHONPATH={path} {sys.executable}"


def test_environment_pairs_detect_a_slower_runtime(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _model(tmp_path / "m.onnx")
    slow, plain = tmp_path / "slow", tmp_path / "plain"
    slow.mkdir()
    plain.mkdir()
    (slow / "sitecustomize.py").write_text(SLOW, encoding="utf-8")
    out = tmp_path / "ab.json"
    args = ["perf-compare", str(model), "--pairs", "10", "--block", "20", "--warmup", "5", "--batch-size", "8",
            "--threads", "1", "--stats", "p50"]
    assert main([*args, "--env-b", _env(slow), "--json", str(out)]) == 1
    text = capsys.readouterr().out
    assert "environments, two processes alternating in blocks, 10 fresh process pairs" in text
    assert "environment B: env PYTHONPATH=" in text
    data = json.loads(out.read_text())
    assert data["process_pairs"] == 10 and sorted(set(data["groups"])) == list(range(10))  # a new child pair each time
    assert data["mode"] == "environments" and data["rows"][0]["verdict"] == "REGRESSION"
    assert data["rows"][0]["ratio"] > 1.5 and data["environments"]["B"]["onnxruntime"]
    # the same environment on both sides: never a regression
    assert main([*args, "--env-b", _env(plain), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["rows"][0]["verdict"] != "REGRESSION"


def test_environment_pairs_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _model(tmp_path / "m.onnx")
    assert main(["perf-compare", str(model)]) == 2
    assert "give a candidate ONNX file, or --env-b" in capsys.readouterr().err
    assert main(["perf-compare", str(model), "--env-b", str(tmp_path / "no-python")]) == 2
    assert "environment B: cannot run" in capsys.readouterr().err
    assert main(["perf-compare", str(model), "--env-b", f"{sys.executable} -c 'import sys; sys.exit(3)'"]) == 2
    assert "environment B" in capsys.readouterr().err
