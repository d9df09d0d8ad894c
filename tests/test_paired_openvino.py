"""Paired timing goes through the backend interface, so it works on OpenVINO (``ov_cpu``) too:
``perf-compare`` in one process and across two environments' timing children, and
``baseline compare --perf`` of an ``ov_cpu`` variant. Each passes an A/A and catches a graph with
three extra MatMuls (a real extra cost, four times the work); the environment children say they
loaded OpenVINO, and a provider whose backend runs no ONNX files is one line, exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import openvino  # noqa: F401  (a declared test dependency: missing is a failure, not a skip)

from tests.test_baseline_paired import FAST, _compare, _graph, write_run
from tests.test_baseline_paired import cache as cache  # noqa: F401  (the export-cache fixture)
from tests.test_cli_baseline import run
from tests.test_paired import _cli

#: one thread and 256 rows per call: the extra MatMuls' cost, not OpenVINO's per-call overhead, sets the ratio
PAIRS = ["--pairs", "10", "--block", "20", "--warmup", "5", "--threads", "1", "--seq-len", "256"]


def _files(tmp_path: Path) -> tuple[Path, Path]:
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    for directory, extra in ((fast, 0), (slow, 3)):
        directory.mkdir()
        _graph(directory, extra)
    return fast / "model.onnx", slow / "model.onnx"


def test_perf_compare_times_openvino_and_catches_extra_work(tmp_path):
    fast, slow = _files(tmp_path)
    same = _cli("perf-compare", str(fast), str(fast), "--providers", "ov_cpu", *PAIRS, "--json", str(tmp_path / "aa.json"))
    assert same.returncode == 0, same.stdout + same.stderr
    assert "provider ov_cpu" in same.stdout
    slower = _cli("perf-compare", str(fast), str(slow), "--providers", "ov_cpu", *PAIRS, "--json", str(tmp_path / "ab.json"))
    rows = {r["stat"]: r for r in json.loads((tmp_path / "ab.json").read_text())["rows"]}
    assert slower.returncode == 1 and rows["p50"]["verdict"] == "REGRESSION" and rows["p50"]["ratio"] > 1.5, slower.stdout
    refused = _cli("perf-compare", str(fast), str(fast), "--providers", "torch_cpu")
    assert refused.returncode == 2 and "runs no ONNX files" in refused.stderr and "ov_cpu" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_environment_pairs_load_the_file_with_openvino(tmp_path):
    fast, slow = _files(tmp_path)
    done = _cli("perf-compare", str(fast), str(slow), "--env-a", sys.executable, "--env-b", sys.executable,
                "--providers", "ov_cpu", "--pairs", "8", "--block", "20", "--warmup", "5", "--threads", "1", "--seq-len", "256")
    assert "environment A:" in done.stdout and "openvino " in done.stdout and "onnxruntime" not in done.stdout.split(
        "paired A/B")[0], done.stdout + done.stderr
    assert done.returncode == 1 and "REGRESSION" in done.stdout, done.stdout


def test_baseline_compare_perf_pairs_an_openvino_variant(tmp_path, cache, capsys):
    store = tmp_path / "b"
    saved = write_run(tmp_path / "main", cache, provider="ov_cpu", seq=256)
    run(["baseline", "save", str(saved), "--name", "main", "--baseline-store", str(store)], capsys)
    code, doc, out = _compare(tmp_path, write_run(tmp_path / "same", cache, provider="ov_cpu", seq=256), store, capsys,
                              "--perf", *FAST)
    assert doc["mode"] == "paired" and doc["pairing"] == {"toy-fp32-ov_cpu": "paired (from the cache)"}, out
    assert code == 0, out
    code, doc, out = _compare(tmp_path, write_run(tmp_path / "slow", cache, extra=3, provider="ov_cpu", seq=256), store, capsys,
                              "--perf", *FAST)
    p50 = next(r for r in doc["rows"] if r["metric"] == "latency_ms.p50")
    assert doc["mode"] == "paired" and code == 1 and p50["verdict"] == "REGRESSION" and p50["ratio"] > 1.5, out
