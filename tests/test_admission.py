"""Resource admission: a model directory or an ONNX file whose declared sizes would not fit is
refused with one line naming the input and the estimate, exit 2, before it is loaded -- a
``config.json`` with an enormous vocab_size or layer count, a multi-GB ``tokenizer.json``, a graph
whose shapes expand to tens of GB, more nodes than ``--max-nodes`` (docs/reliability.md,
"Untrusted inputs"). Nothing here allocates what it refuses: that is the point."""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx import TensorProto, helper
from untrusted_fixtures import bert_with_external_data, edited_model_dir, expanding_graph

from harness.cli import main
from harness.core.admission import Limits, config_estimate, node_count
from harness.zoo.base import materialize, resolve


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bert_with_external_data(tmp_path_factory.mktemp("bert") / "good")


def _reference() -> Path:
    return materialize(resolve("bert-tiny"))


def _check(reference: Path, onnx_file: Path, out: Path, capsys: pytest.CaptureFixture[str],
           *extra: str) -> tuple[int, str]:
    code = main(["check", "--reference", str(reference), "--onnx", str(onnx_file), "--samples", "4",
                 "--no-generation", "--out", str(out), *extra])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return code, captured.err


@pytest.mark.parametrize("key,value,words", [
    ("vocab_size", 10**11, "vocab_size 100,000,000,000"),
    ("num_hidden_layers", 10**7, "10,000,000 layers"),
])
def test_a_config_that_declares_an_enormous_model_is_refused_before_loading(
        bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: int, words: str) -> None:
    model = edited_model_dir(_reference(), tmp_path / "model", **{key: value})
    code, err = _check(model, bert, tmp_path / "out", capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"harness: error: {model}: needs about ") and words in err, err
    assert "more than this machine's available memory" in err and "refused before loading" in err
    # the same line from harness run, before any case
    code = main(["run", "--models", str(model), "--precisions", "fp32", "--providers", "ort_cpu",
                 "--out", str(tmp_path / "run")])
    assert code == 2 and words in capsys.readouterr().err
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_a_multi_gigabyte_tokenizer_is_refused_by_its_size(bert: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    model = edited_model_dir(_reference(), tmp_path / "model")
    with (model / "tokenizer.json").open("r+b") as fh:  # sparse: 4 GiB on paper, no disk used
        fh.truncate(4 * 1024**3)
    code, err = _check(model, bert, tmp_path / "out", capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"{model / 'tokenizer.json'}: needs about 40.00 GiB (a 4.00 GiB file, about 10x its size" in err, err


def test_a_graph_whose_shapes_expand_to_tens_of_gigabytes_is_refused(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    bomb = expanding_graph(tmp_path / "bomb.onnx")
    assert bomb.stat().st_size < 1000  # a tiny file
    code, err = _check(_reference(), bomb, tmp_path / "out", capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "its largest tensor 'big' (100,000 x 100,000) at 37.25 GiB" in err, err


def test_max_memory_and_max_nodes_set_the_policy(bert: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _check(_reference(), bert, tmp_path / "a", capsys, "--max-nodes", "100")
    assert code == 2 and err.count("\n") == 1 and "nodes, more than --max-nodes 100" in err, err
    code, err = _check(_reference(), bert, tmp_path / "b", capsys, "--max-memory", "1M")
    assert code == 2 and "more than --max-memory (1.00 MiB)" in err, err
    code, err = _check(_reference(), bert, tmp_path / "c", capsys, "--max-memory", "lots")
    assert code == 2 and "--max-memory: expected a size such as 8G" in err, err
    code, err = _check(_reference(), bert, tmp_path / "d", capsys, "--max-memory", "8G", "--max-nodes", "5000")
    assert code == 0, err  # the same file within the limits


def test_node_count_includes_subgraphs_and_the_real_zoo_models_fit() -> None:
    inner = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])] * 3, "body", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    outer = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=inner, else_branch=inner)], "g",
                              [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    assert node_count(helper.make_model(outer)) == 7
    import json

    config = json.loads((_reference() / "config.json").read_text())
    estimate = config_estimate(_reference(), config, Limits())
    assert estimate is not None and estimate.bytes < 200 * 1024**2, estimate  # bert-tiny: small


HUNGRY_SUITE = '''
import numpy
import pytest


@pytest.mark.harness(families=["encoder"])
def test_a_hungry(variant, harness):
    numpy.empty(8 * 1024**3, dtype=numpy.uint8)  # 8 GiB asked for at once (never touched: harmless uncapped)


@pytest.mark.harness(families=["encoder"])
def test_b_modest(variant, harness):
    harness.metrics["done"] = 1.0
'''


def test_a_case_that_allocates_past_max_memory_is_its_own_error_and_the_others_are_kept(tmp_path: Path) -> None:
    """Admission judges what files declare; a case can still ask for more. Under --max-memory
    the process running the cases is capped, so that case fails alone (an ``error`` record naming
    the allocation) instead of the OOM killer ending the run; the next case runs and is recorded."""
    import json
    import subprocess
    import sys

    from waiting import PATIENCE

    suite = tmp_path / "suite" / "test_memory_hungry.py"
    suite.parent.mkdir()
    suite.write_text(HUNGRY_SUITE)
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", "run",
                           "--suites", str(suite), "--models", "bert-tiny", "--precisions", "fp32", "--providers",
                           "ort_cpu", "--max-memory", "2G", "--out", str(out)],
                          capture_output=True, text=True, timeout=PATIENCE)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    records = {r["id"].split("[")[0]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert records["test_a_hungry"]["verdict"] == "error"
    assert "MemoryError: Unable to allocate 8.00 GiB" in records["test_a_hungry"]["reason"]
    assert records["test_b_modest"]["verdict"] == "pass"
