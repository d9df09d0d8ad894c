"""INT4 weight-only is a precision of its own: detected in files, accepted by name, built in the matrix.

INT4 is how LLMs ship on ONNX Runtime (``MatMulNBits`` with ``bits=4``, or block-quantized int4
``DequantizeLinear``). Judged as INT8 it would meet gates measured for another precision; refused
by name, it could not be judged at all.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.check.layout import read_artifact
from harness.check.request import choose_precision
from harness.core import Precision, UsageError, parse_precision
from harness.export.int4 import quantize_int4
from harness.metrics.registry import METRICS
from harness.metrics.spec import Thresholds


def _matmul(path: Path) -> Path:
    weight = numpy_helper.from_array(np.random.RandomState(0).randn(64, 32).astype(np.float32), "W")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 32])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    return path


def _nbits(src: Path, out: Path, bits: int, qdq: bool = False) -> Path:
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    fmt = QuantFormat.QDQ if qdq else QuantFormat.QOperator
    quantizer = MatMulNBitsQuantizer(onnx.load(str(src)), bits=bits, block_size=32, is_symmetric=True, quant_format=fmt)
    quantizer.process()
    onnx.save(quantizer.model.model, str(out))
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("int4")
    fp32 = _matmul(root / "fp32.onnx")
    (root / "harness").mkdir()
    return {"fp32": fp32, "harness": quantize_int4(fp32, root / "harness"),
            "nbits4": _nbits(fp32, root / "nbits4.onnx", 4), "qdq4": _nbits(fp32, root / "qdq4.onnx", 4, qdq=True),
            "nbits8": _nbits(fp32, root / "nbits8.onnx", 8)}


def test_int4_weights_are_detected_as_int4_with_the_evidence(files):
    for name in ("harness", "nbits4"):
        found = read_artifact(files[name])
        assert found.precision == "int4", name
        assert found.precision_reason == "1 MatMulNBits op(s) with bits=4, block_size 32"
    qdq = read_artifact(files["qdq4"])
    assert (qdq.precision, qdq.precision_reason) == ("int4", "1 DequantizeLinear op(s) of int4 weights, block_size 32")
    # negative controls: 8-bit MatMulNBits is INT8, an unquantized MatMul FP32
    assert read_artifact(files["nbits8"]).precision == "int8"
    assert read_artifact(files["fp32"]).precision == "fp32"


def test_the_harness_int4_artifact_runs_and_stays_near_fp32(files):
    x = np.random.RandomState(1).randn(3, 64).astype(np.float32)
    ref = ort.InferenceSession(str(files["fp32"]), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ort.InferenceSession(str(files["harness"]), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    cosine = float((ref * got).sum() / np.linalg.norm(ref) / np.linalg.norm(got))
    assert 0.98 < cosine < 1.0  # quantized (not a copy), and still the same function


def test_int4_is_a_precision_by_name_and_the_loosest_of_a_mixed_set(files):
    assert parse_precision("int4", option="--precisions") is Precision.INT4
    with pytest.raises(UsageError, match="--precisions: unknown precision 'int3'.*int4"):
        parse_precision("int3", option="--precisions")
    mixed = [read_artifact(files["fp32"]), read_artifact(files["nbits8"]), read_artifact(files["nbits4"])]
    precision, note = choose_precision(None, mixed)
    assert precision is Precision.INT4 and "judged at the loosest, int4" in note


def test_int4_defaults_are_its_own_where_measured_and_int8s_elsewhere():
    assert Thresholds(int8=0.5).get("int4") == 0.5
    assert Thresholds(int8=0.5, int4=0.3).get("int4") == 0.3
    assert Thresholds(int8=0.5, int4=0.3).get("int8-static") == 0.5
    own = [s.name for s in METRICS if s.thresholds is not None and s.thresholds.int4 is not None]
    assert own, "INT4's measured defaults are declared in harness.metrics.registry"
    for name in own:  # measured INT4 gates are never tighter than INT8's: the weaker precision
        spec = METRICS[name]
        int4, int8 = spec.thresholds.get("int4"), spec.thresholds.get("int8")
        assert int4 is not None and int8 is not None
        assert (int4 <= int8) if spec.direction.value == "higher" else (int4 >= int8), name


def _records(out: Path) -> dict[str, dict]:
    import json

    return {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def test_int4_in_the_matrix_is_judged_by_its_own_measured_gates(tmp_path):
    """``--precisions int4`` builds the MatMulNBits artifact of the trained numbers-llama and judges it:
    it decodes every held-out answer as PyTorch does and passes INT4's gates, while its logits move
    more than INT8's gates allow (the INT4 defaults are not INT8's, and must not be)."""
    from harness.cli import main

    out = tmp_path / "run"
    code = main(["run", "--models", "numbers-llama", "--precisions", "int4", "--providers", "ort_cpu",
                 "-k", "logits_parity", "--out", str(out), "--progress", "off"])
    record = _records(out)["test_logits_parity[numbers-llama-int4-ort_cpu]"]
    assert code == 0 and record["verdict"] == "pass", record.get("reason")
    assert record["precision"] == "int4"
    artifact = Path(record["artifacts"]["model/model.onnx"]["path"])
    assert read_artifact(artifact).precision == "int4"  # the matrix's INT4 file is what check detects as INT4
    norm = record["metrics"]["model.logits.norm_max_abs"]
    assert record["thresholds"]["model.logits.norm_max_abs"]["threshold"] == METRICS["norm_max_abs"].thresholds.int4
    assert METRICS["norm_max_abs"].thresholds.int8 < norm  # INT8's gate would fail this correct file


def test_bisect_refuses_int4_in_one_line(capsys):
    from harness.cli import main

    assert main(["bisect", "--models", "numbers-llama", "--precisions", "int4"]) == 2
    err = capsys.readouterr().err
    assert "--precisions: int4 is not bisected" in err and "Traceback" not in err
