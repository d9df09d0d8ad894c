"""``harness check`` goes through the run's pipeline stages (``harness.case.pipeline``), so a failing
foreign artifact leaves the same evidence as a failing suite case: the worst batch as ``.npz`` and a
repro bundle that ``harness repro`` judges again in a fresh process with an empty cache -- the
bundle is written in the *file's* own I/O names (``tokens``/``attn_mask``/``scores``), not the
reference's, so the file runs as it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from test_check import _bert_onnx, _dir  # noqa: E402  (the hand-made foreign exports)
from waiting import PATIENCE


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("foreign")
    return {"good": _bert_onnx(root / "good.onnx"), "bad": _bert_onnx(root / "bad.onnx", perturb=True)}


def _check(onnx: Path, out: Path, *extra: str) -> tuple[int, dict]:
    code = main(["check", "--reference", str(_dir("bert-tiny")), "--onnx", str(onnx), "--samples", "16",
                 "--no-generation", "--out", str(out), *extra])
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    return code, record


def _repro(bundle: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``harness repro`` in a fresh process: empty HARNESS_CACHE, another working directory."""
    cache, cwd = tmp / "empty-cache", tmp / "elsewhere"
    cache.mkdir()
    cwd.mkdir()
    cmd = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", "repro", str(bundle),
           "--json", str(tmp / "outcome.json")]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env={**os.environ, "HARNESS_CACHE": str(cache)},
                          timeout=PATIENCE)
    assert not list(cache.iterdir()), "repro must not build or cache anything"
    return done


def test_failing_check_leaves_a_bundle_that_reproduces_and_a_failing_batch(files, tmp_path):
    out = tmp_path / "run"
    code, record = _check(files["bad"], out)
    assert code == 1 and record["verdict"] == "fail"
    bundles, dumps = record["data"]["repro_bundles"], record["data"]["failing_batches"]
    assert set(bundles) == {"model"} and set(dumps) == {"model"}
    case_dir = out / "cases" / record["id"]  # where the HTML report looks (case_dir_name)
    assert Path(bundles["model"]) == case_dir / "repro-model"

    # the failing batch: the file's inputs in reference names, the reference and the file's outputs
    with np.load(dumps["model"]) as batch:
        assert {"input.input_ids", "input.attention_mask", "reference.logits", "variant.logits"} <= set(batch.files)
        assert np.abs(batch["reference.logits"] - batch["variant.logits"]).max() > 5e-6  # the worst element: 1.1e-5

    manifest = json.loads((Path(bundles["model"]) / "bundle.json").read_text())
    assert manifest["inputs"] == ["attn_mask", "tokens"]  # the file's own names, so it runs as it is
    assert [o["name"] for o in manifest["outputs"]] == ["scores"]
    assert ("scores", "norm_max_abs") in [(f["output"], f["metric"]) for f in manifest["verdict"]["failures"]]
    assert manifest["artifact"]["bundled"] and manifest["artifact"]["file"] == "bad.onnx"

    done = _repro(Path(bundles["model"]), tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REPRODUCES" in done.stdout
    outcome = json.loads((tmp_path / "outcome.json").read_text())
    then = record["metrics"]["model.logits.norm_max_abs"]
    assert outcome["metrics_now"]["scores"]["norm_max_abs"] == pytest.approx(then, rel=1e-6)


def test_passing_check_and_bundles_off_leave_no_evidence(files, tmp_path):
    """Negative controls: a faithful export writes nothing; ``--repro-bundles off`` writes no bundle
    (the failing batch is still dumped, as in ``harness run``)."""
    code, record = _check(files["good"], tmp_path / "good")
    assert code == 0 and "repro_bundles" not in record["data"] and "failing_batches" not in record["data"]
    assert not (tmp_path / "good" / "cases").exists()
    code, record = _check(files["bad"], tmp_path / "off", "--repro-bundles", "off")
    assert code == 1 and "repro_bundles" not in record["data"] and set(record["data"]["failing_batches"]) == {"model"}


def _breaking_onnx(path: Path) -> Path:
    """A file that loads and matches the reference's I/O but raises when it runs: its output is a
    Reshape to a fixed 5x3, which no corpus batch fills."""
    import onnx
    from onnx import TensorProto, helper

    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [5, 3])
    nodes = [helper.make_node("Cast", ["tokens"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Reshape", ["f", "shape"], ["scores"])]
    graph = helper.make_graph(nodes, "breaks", [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["b", "t"])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["b", 2])], [shape])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), str(path))
    return path


def test_a_file_that_raises_leaves_an_error_bundle_that_reproduces(tmp_path):
    """The error stage, as for a suite case whose artifact the runtime refuses: the verdict is
    ``error`` and the bundle (``kind: error``) raises the same error again under ``harness repro``."""
    code, record = _check(_breaking_onnx(tmp_path / "breaks.onnx"), tmp_path / "run")
    assert code == 1 and record["verdict"] == "error" and "Reshape" in record["reason"] + str(record["data"])
    bundle = Path(record["data"]["repro_bundles"]["model"])
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["kind"] == "error" and manifest["inputs"] == ["tokens"] and manifest["error"]["stage"] == "run"
    done = _repro(bundle, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REPRODUCES" in done.stdout
