"""The accuracy gate on real runs: the issue's done-when, with three small ``harness run``s shared
by every test of the module (8 sentences each; bert-tiny at every precision and provider, MiniLM
INT8 on ONNX Runtime):

* ``per_channel``: MiniLM INT8 with per-channel weight scales (``--int8-per-channel``): the baseline
  a release that silently lost per-channel scales is compared with;
* ``default``: the default settings, 1 thread: the blessed run, and the run calibrated on;
* ``threads2``: the same build on 2 threads, with the calibrated ``harness.toml``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import PATIENCE

from harness.gate.accuracy import compare_accuracy
from harness.gate.calibrate import calibrate
from harness.gate.compare import Verdict
from harness.results.record import Record
from harness.results.rundir import read_results

SUITES = Path(__file__).resolve().parents[1] / "harness" / "suites"
SELECT = ["--models", "bert-tiny", "minilm-l6", "--samples", "8", "-k", "bert-tiny or minilm-l6-int8-ort_cpu"]
EMBEDDING = "model.sentence_embedding.embedding_cosine"


def harness_run(out: Path, *args: str, threads: int = 1) -> int:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    argv = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))",
            "run", "--suites", str(SUITES), "--out", str(out), "--threads", str(threads), *args]
    done = subprocess.run(argv, env=env, cwd=out.parent, capture_output=True, text=True, timeout=PATIENCE)
    (out.parent / f"{out.name}.log").write_text(done.stdout + done.stderr)
    return done.returncode


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("accuracy-runs")
    out = {name: root / name for name in ("per_channel", "default", "threads2")}
    assert harness_run(out["per_channel"], "--models", "minilm-l6", "--precisions", "int8", "--providers", "ort_cpu",
                       "--samples", "8", "--int8-per-channel", "-k", "embedding") == 0, (root / "per_channel.log").read_text()
    assert harness_run(out["default"], *SELECT) == 0, (root / "default.log").read_text()
    snippet = calibrate(read_results(out["default"]), source=str(out["default"])).to_toml()
    (root / "harness.toml").write_text(snippet)
    out["snippet"] = root / "harness.toml"
    out["threads2_code"] = Path(str(harness_run(out["threads2"], *SELECT, "--config", str(root / "harness.toml"),
                                                threads=2)))
    return out


def test_same_build_passes_its_own_baseline_on_1_and_2_threads(runs):
    default = read_results(runs["default"])
    itself = compare_accuracy(default, default)
    assert itself.exit_code == 0 and {r.verdict for r in itself.rows} == {Verdict.PASS}
    two = compare_accuracy(default, read_results(runs["threads2"]))
    assert len(two.rows) == len(itself.rows) > 50 and not two.missing
    assert two.exit_code == 0, two.to_markdown()
    assert any("threads" in n for n in two.notes()), "the changed thread settings are shown"


def test_minilm_int8_without_per_channel_regresses_against_a_per_channel_baseline(runs):
    default = read_results(runs["default"])
    result = compare_accuracy(read_results(runs["per_channel"]), default)
    regressed = {(r.variant, r.metric): r for r in result.rows if r.gating_regression}
    row = regressed.get(("minilm-l6-int8-ort_cpu", "embedding_cosine"))
    assert row is not None, result.to_markdown()
    assert row.base > row.cand and "int8_per_channel: true -> false" in row.reason
    assert "embedding_cosine" in result.headline() and result.exit_code == 1
    # ... while the absolute gate still passes it
    case = next(r for r in default if r.id == "test_embedding_parity[minilm-l6-int8-ort_cpu]")
    assert case.verdict == "pass" and case.metrics[EMBEDDING] >= case.thresholds[EMBEDDING]["threshold"]


def test_fp16_error_doubling_is_a_regression(runs):
    default = read_results(runs["default"])

    def doubled(rec: Record) -> Record:
        if rec.precision != "fp16":
            return rec
        from dataclasses import replace

        return replace(rec, metrics={k: v * 2 if k.endswith(("norm_max_abs", "rel_l2", "mean_abs")) else v
                                     for k, v in rec.metrics.items()})

    result = compare_accuracy(default, [doubled(r) for r in default])
    regressed = {(r.variant, r.metric) for r in result.rows if r.gating_regression}
    assert ("bert-tiny-fp16-ort_cpu", "norm_max_abs") in regressed and result.exit_code == 1
    assert all(v.endswith(("fp16-ort_cpu", "fp16-torch_cpu")) for v, _ in regressed)


def test_calibration_on_the_default_run_is_passed_by_the_next_run(runs):
    snippet = runs["snippet"].read_text()
    assert "[models.bert-tiny.tolerances.int8]" in snippet
    assert runs["threads2_code"].name == "0", (runs["threads2"].parent / "threads2.log").read_text()[-3000:]
    records = read_results(runs["threads2"])
    case = next(r for r in records if r.id == "test_logits_parity[bert-tiny-int8-ort_cpu]")
    applied = case.thresholds["model.logits.norm_max_abs"]["threshold"]
    assert applied < 0.15, "the calibrated, tighter tolerance was the one applied"
    assert all(r.verdict in ("pass", "skip") for r in records)
    json.dumps([r.to_dict() for r in records])  # the records stay strict JSON
