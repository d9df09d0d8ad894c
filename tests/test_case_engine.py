"""One case, three front ends, one engine (harness/engine/).

bert-tiny's FP32 export, judged (a) by ``harness run`` (the suite case, the harness's own build), (b) by
``harness check`` on the same file and (c) by ``harness check --endpoint`` on the same file served by a
real MLServer (tests/serving/mlserver.py). A ``norm_max_abs`` bound no FP32 export can meet makes every
front end fail the same check: the negative control is the same three with the model's own tolerances,
which pass. Identical across the three: the gated checks (metric and threshold), the verdict, the
head's coverage, and the side outputs -- the worst failing batch as ``.npz`` with the same inputs and
the same reference outputs; a repro bundle and (``--profile``) the session's profile, under the same
graph name, wherever there is a file to bundle and a session to profile (a served model has neither).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from tests.serving.faults import bert_tiny_fp32

pytest.importorskip("tritonclient.http", reason="the serving client (pip install 'model-harness[serving]')")

SIZES = ["--samples", "8", "--batch-size", "4"]
#: a bound no FP32 export meets (kernel rounding alone is ~1e-7): every front end fails the same check
IMPOSSIBLE = 1e-12


@pytest.fixture(scope="module")
def artifact() -> Path:
    """bert-tiny's FP32 ONNX file, as the harness builds it (the cache's own file)."""
    return Path(bert_tiny_fp32())


def _record(out: Path, suite: str) -> dict:
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return next(r for r in records if r["suite"] == suite)


def through_run(tmp: Path, bound: float | None) -> dict:
    tmp.mkdir(parents=True, exist_ok=True)
    config = tmp / "harness.toml"
    config.write_text(f"[tolerances.fp32]\nnorm_max_abs = {bound}\n" if bound is not None else "")
    out = tmp / "run"
    main(["run", "--config", str(config), "--models", "bert-tiny", "--precisions", "fp32", "--providers", "ort_cpu",
          "-k", "test_logits_parity", "--profile", *SIZES, "--out", str(out)])
    return _record(out, "test_logits_parity")


def through_check(tmp: Path, bound: float | None, *source: str) -> dict:
    """``harness check`` on ``source`` (``--profile`` is in it where there is a session to profile)."""
    out = tmp / "check"
    tolerance = ["--tolerance", f"norm_max_abs={bound}"] if bound is not None else []
    main(["check", "--reference", "bert-tiny", *source, "--no-generation", *tolerance, *SIZES, "--out", str(out)])
    return _record(out, "check")


def gated(record: dict) -> dict[str, dict]:
    """The checks on what the graph computes (a file's static checks, ``<graph>.artifact.*``, aside:
    a served model has no file to read)."""
    return {k: v for k, v in record["thresholds"].items() if k.split(".")[1] != "artifact"}


def coverage(record: dict) -> dict:
    """The head's coverage, the file's static checks aside (as in ``gated``)."""
    cov = dict(record["data"]["coverage"])
    cov["gated"] = [g for g in cov["gated"] if not g.endswith("/artifact")]
    return cov


def dumped(record: dict) -> dict[str, np.ndarray]:
    """The failing-batch dump's inputs and reference outputs (the variant's own outputs differ by runtime)."""
    (path,) = record["data"]["failing_batches"].values()
    with np.load(path) as arrays:
        return {k: arrays[k] for k in arrays.files if not k.startswith("variant.")}


@pytest.mark.parametrize("bound", [IMPOSSIBLE, None], ids=["failing", "passing"])
def test_one_case_three_front_ends_same_checks_coverage_and_evidence(artifact, mlserver_bert, tmp_path, bound):
    run = through_run(tmp_path / "a", bound)
    files = through_check(tmp_path / "b", bound, "--onnx", str(artifact), "--profile")
    served = through_check(tmp_path / "c", bound, "--endpoint", mlserver_bert.http, "--served-model", "bert")
    expected = "fail" if bound is not None else "pass"
    assert [r["verdict"] for r in (run, files, served)] == [expected] * 3, [r["reason"] for r in (run, files, served)]
    assert gated(run) == gated(files) == gated(served) and gated(run)
    assert coverage(run) == coverage(files) == coverage(served) and coverage(run)["required"] == ["model/logits"]
    assert run["data"]["coverage"] == files["data"]["coverage"]  # two files: the static checks too
    # the profiling stage: one session per graph, named as the graph (a served model has no session here)
    assert set(run["data"]["profile"]) == set(files["data"]["profile"]) == {"model"}
    assert run["data"]["profile"]["model"].keys() == files["data"]["profile"]["model"].keys()
    trace = Path(files["data"]["profile"]["model"]["trace"])  # the file's own ONNX Runtime trace, in its case directory
    assert trace.is_file() and trace.parent == tmp_path / "b" / "check" / "cases" / files["id"]
    assert files["settings"]["runtime"]["profile"] is True
    assert files["data"]["profile"]["model"]["runs"] >= 2  # every corpus batch and shape probe ran on the profiled session
    assert not served["data"].get("profile")
    for record in (files, served):  # the same numbers, up to the runtime serving them
        for key in gated(run):
            assert np.isclose(record["metrics"][key], run["metrics"][key], rtol=0.05, atol=1e-6), key
    if bound is None:
        assert not any(r["data"].get("failing_batches") for r in (run, files, served))
        return
    assert [r["reason"].count("norm_max_abs") for r in (run, files, served)] == [1, 1, 1]
    evidence = [dumped(r) for r in (run, files, served)]
    for other in evidence[1:]:
        assert other.keys() == evidence[0].keys()
        assert all(np.array_equal(other[k], evidence[0][k]) for k in other)
    assert set(run["data"]["repro_bundles"]) == set(files["data"]["repro_bundles"]) == {"model"}
    assert not served["data"].get("repro_bundles")  # nothing to bundle: the served model is no file
