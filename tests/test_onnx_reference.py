"""The ONNX reference backend (``ref_cpu``): the standard's own semantics of a file, as a judge.

End to end, ``harness run --providers ref_cpu`` judges bert-tiny's FP32 and dynamic-INT8 exports and
passes, and ``harness check`` judges a file with it beside ONNX Runtime: the reference's outputs
are ONNX Runtime's within float rounding, so where the two disagree with PyTorch alike the file
is at fault, not the runtime. The unit tests pin the two operators onnx's own reference gets wrong
(each against the specification's definition, with onnx's failure as the control), the refusal of
contrib operators, and that a judge-only backend is never timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch  # noqa: F401  (imported before in-process runs; docs/pitfalls.md #6)
from onnx import TensorProto, helper
from waiting import PATIENCE

from harness.cli import main
from harness.core import Precision
from harness.perf.headline import default_providers
from harness.runners import PROVIDERS, backends
from harness.runners.onnxref_runner import OnnxReferenceBackend, RefGraphRunner
from harness.suites import timed_backend
from tests.conftest import variant


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]


def _save(graph: onnx.GraphProto, path: Path, opset: int) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_gather_elements_with_smaller_indices_follows_the_specification(tmp_path: Path) -> None:
    # BERT's buffered token_type_ids: int64 data (1, 256), position indices (1, 16) on axis 1
    graph = helper.make_graph(
        [helper.make_node("GatherElements", ["data", "idx"], ["out"], axis=1)], "g",
        [helper.make_tensor_value_info("data", TensorProto.INT64, [1, 256]),
         helper.make_tensor_value_info("idx", TensorProto.INT64, [1, 16])],
        [helper.make_tensor_value_info("out", TensorProto.INT64, [1, 16])])
    path = _save(graph, tmp_path / "gather.onnx", 17)
    data = np.arange(256, dtype=np.int64).reshape(1, 256) * 10
    idx = np.arange(16, dtype=np.int64).reshape(1, 16)[:, ::-1].copy()
    idx[0, 0] = -1  # a negative index counts from the end
    from onnx.reference import ReferenceEvaluator

    with pytest.raises(ValueError, match="cannot reshape"):  # the control: onnx's own implementation
        ReferenceEvaluator(str(path)).run(None, {"data": data, "idx": idx})
    out = RefGraphRunner(str(path)).run({"data": data, "idx": idx})["out"]
    np.testing.assert_array_equal(out, [[2550, *range(140, -1, -10)]])


def test_dequantize_linear_before_opset_19_is_evaluated(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["x", "scale", "zero"], ["y"])], "dq",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[helper.make_tensor("scale", TensorProto.FLOAT, [], [0.5]),
                     helper.make_tensor("zero", TensorProto.INT8, [], [2])])
    path = _save(graph, tmp_path / "dq.onnx", 17)
    x = np.array([[2, 4, -2], [0, 10, 127]], dtype=np.int8)
    from onnx.reference import ReferenceEvaluator

    with pytest.raises(RuntimeError, match="No implementation for operator 'DequantizeLinear'"):  # the control
        ReferenceEvaluator(str(path)).run(None, {"x": x})
    runner = RefGraphRunner(str(path))
    np.testing.assert_array_equal(runner.run({"x": x})["y"], (x.astype(np.float32) - 2) * 0.5)
    assert runner.settings()["replaced_operators"] == ["GatherElements", "DequantizeLinear"]
    # from opset 19 on, onnx's own DequantizeLinear runs (with the block quantization later opsets add)
    assert RefGraphRunner(str(_save(graph, tmp_path / "dq19.onnx", 19))).replaced == ["GatherElements"]


def test_contrib_operators_are_refused_by_name(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("FastGelu", ["x"], ["y"], domain="com.microsoft")], "contrib",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    onnx.save(model, tmp_path / "fused.onnx")
    with pytest.raises(ValueError, match=r"standard operators only; this file uses com\.microsoft\.FastGelu"):
        RefGraphRunner(str(tmp_path / "fused.onnx"))
    reason = OnnxReferenceBackend.unavailable_reason(variant("bert-tiny", "int4", "ref_cpu"))
    assert reason is not None and "MatMulNBits" in reason
    assert OnnxReferenceBackend.unavailable_reason(variant("bert-tiny", "int8", "ref_cpu")) is None


def test_a_judge_only_backend_is_never_timed() -> None:
    ref = PROVIDERS["ref_cpu"]
    assert backends()[ref.backend].timed is False
    assert ref not in default_providers()  # harness bench's default columns
    assert PROVIDERS["ov_cpu"] in default_providers()  # the control: another CPU runtime of ONNX files joins
    spec = None  # the filter reads the variant only
    assert not timed_backend(spec, variant("bert-tiny", "fp32", "ref_cpu"))  # type: ignore[arg-type]
    assert timed_backend(spec, variant("bert-tiny", "fp32", "ort_cpu"))  # type: ignore[arg-type]


def test_harness_run_ref_cpu_judges_fp32_and_int8_and_skips_perf(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))",
                           "run", "--models", "bert-tiny", "--providers", "ref_cpu", "--precisions", "fp32", "int8",
                           "--samples", "8", "--perf", "--out", str(out)],
                          capture_output=True, text=True, timeout=PATIENCE, cwd=Path(__file__).resolve().parents[1])
    records = _records(out)
    verdicts = {r["id"]: r["verdict"] for r in records}
    assert proc.returncode == 0, [(r["id"], r["verdict"], r.get("reason")) for r in records] or proc.stderr[-2000:]
    assert verdicts["test_logits_parity[bert-tiny-fp32-ref_cpu]"] == "pass"
    assert verdicts["test_logits_parity[bert-tiny-int8-ref_cpu]"] == "pass"
    assert not [i for i in verdicts if i.startswith(("test_latency", "test_cold_start"))], verdicts  # never timed
    fp32 = next(r for r in records if r["id"] == "test_logits_parity[bert-tiny-fp32-ref_cpu]")
    assert fp32["metrics"]["model.logits.norm_max_abs"] <= 1e-4  # FP32 numpy: float rounding only


def _bert_tiny_file(workspace, precision: Precision) -> Path:
    """The harness's own export of bert-tiny at ``precision`` (a faithful file)."""
    from harness.export.artifacts import onnx_artifact

    model = workspace.model("bert-tiny")
    family = workspace.family(model)
    return onnx_artifact(model, family, family.graphs(model)[0], precision, workspace.runtimes.settings_for(model),
                         workspace.runtimes.artifacts).path()


def _checked_on_both(path: Path, precision: str, tmp_path: Path, capsys, code: int) -> tuple[dict, dict]:
    """``harness check`` of ``path`` on ``ref_cpu`` and on ``ort_cpu`` (each exiting ``code``): both records."""
    by_id = {}
    for provider in ("ref_cpu", "ort_cpu"):
        out = tmp_path / provider
        got = main(["check", "--reference", "bert-tiny", "--onnx", str(path), "--precisions", precision,
                    "--providers", provider, "--samples", "8", "--out", str(out)])
        captured = capsys.readouterr()
        assert got == code, captured.err + captured.out
        by_id.update({r["id"]: r for r in _records(out)})
    return by_id[f"check[bert-tiny-{precision}-ref_cpu]"], by_id[f"check[bert-tiny-{precision}-ort_cpu]"]


def test_check_judges_a_file_with_the_reference_beside_onnx_runtime(workspace, tmp_path: Path, capsys) -> None:
    ref, ort = _checked_on_both(_bert_tiny_file(workspace, Precision.INT8), "int8", tmp_path, capsys, 0)
    assert ref["verdict"] == ort["verdict"] == "pass"
    # the same file's semantics: the reference and ONNX Runtime differ from PyTorch by the same amount
    key = next(k for k in ref["metrics"] if k.endswith("norm_max_abs"))
    assert ref["metrics"][key] == pytest.approx(ort["metrics"][key], rel=0.05, abs=1e-4)
    assert ref["metrics"][key] > 1e-3  # INT8 moved the logits: the agreement is not two zeros


def test_check_refuses_an_optimized_file_in_one_line(workspace, tmp_path: Path, capsys) -> None:
    """ONNX Runtime's transformer optimizer fuses bert-tiny into contrib operators: the reference
    cannot judge it, and says so in one line naming the file and the operators (exit 2)."""
    from onnxruntime.transformers.optimizer import optimize_model

    fused = tmp_path / "optimized.onnx"
    optimize_model(str(_bert_tiny_file(workspace, Precision.FP32)), model_type="bert", num_heads=2,
                   hidden_size=128).save_model_to_file(str(fused))
    code = main(["check", "--reference", "bert-tiny", "--onnx", str(fused), "--providers", "ref_cpu", "--samples", "8",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "optimized.onnx" in err and "com.microsoft." in err and "Traceback" not in err


def test_a_planted_fault_fails_on_the_reference_as_on_onnx_runtime(workspace, tmp_path: Path, capsys) -> None:
    """The negative control of the reference as a judge: one projection of the faithful FP32 export
    x1.05 (``plant.scale_weight``) fails on ``ref_cpu`` with ONNX Runtime's numbers -- the file's
    fault, seen the same by both -- while the faithful file passes on both (the test above)."""
    from plant import scale_weight

    faulty = scale_weight(_bert_tiny_file(workspace, Precision.FP32), tmp_path / "faulty")
    ref, ort = _checked_on_both(faulty, "fp32", tmp_path, capsys, 1)
    assert ref["verdict"] == ort["verdict"] == "fail"
    key = next(k for k in ref["metrics"] if k.endswith("norm_max_abs"))
    assert ref["metrics"][key] > ref["thresholds"][key]["threshold"]
    assert ref["metrics"][key] == pytest.approx(ort["metrics"][key], rel=0.01)
