"""Repro bundles of what needs more than one call (issue 14, item 1): an erroring generation case
(a decoding graph the runtime refuses), a cold-start / memory / size budget breach (fresh
processes) and a time-to-first-token / per-token budget breach (the decode loop). Each is written
on one cache and judged again by ``harness repro`` with an empty cache, measuring the same way.
Budgets are set absurdly tight so the cases fail whatever the machine; no test asserts a time."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from tests.test_repro import _repro

SUITES = Path(__file__).resolve().parents[1] / "harness" / "suites"

#: llama-tiny with ``position_ids`` exported without dynamic axes: the graph takes only the export
#: example's shape, so ONNX Runtime refuses the decode's prompt (a file fault, not the harness's)
FIXED_POSITIONS_SUITE = '''
import pytest
from dataclasses import replace
from harness.families.causal_lm import CausalLMFamily
from harness.testing import GenerationRequest, judge


class FixedPositions(CausalLMFamily):
    def graphs(self, model):
        (graph,) = super().graphs(model)
        return [replace(graph, dynamic_axes={k: v for k, v in graph.dynamic_axes.items() if k != "position_ids"})]


@pytest.mark.harness(generates=True)
def test_fixed_positions(variant, harness):
    judge(harness, GenerationRequest(samples=4, batch_size=2, max_new_tokens=4), family=FixedPositions()).assert_ok()
'''


def _record(out: Path) -> dict:
    (line,) = (out / "results.jsonl").read_text().splitlines()
    return json.loads(line)


def _edit(bundle: Path, tmp: Path, edit) -> Path:
    copy = tmp / "edited"
    shutil.copytree(bundle, copy)
    manifest = json.loads((copy / "bundle.json").read_text())
    edit(manifest)
    (copy / "bundle.json").write_text(json.dumps(manifest))
    return copy


def _repro_here(bundle: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                *extra: str) -> tuple[int, str]:
    """``harness repro`` in this process (a fresh interpreter costs seconds of imports in CI) with an
    empty HARNESS_CACHE and another working directory; the cache must stay empty."""
    cache, cwd = tmp / "empty-cache-here", tmp / "elsewhere-here"
    cache.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HARNESS_CACHE", str(cache))
    monkeypatch.chdir(cwd)
    capsys.readouterr()
    code = main(["repro", str(bundle), *extra])
    assert not list(cache.iterdir()), "repro must not build or cache anything"
    return code, capsys.readouterr().out


# -- an erroring generation case ----------------------------------------------------------------------------
def test_erroring_generation_case_bundle_raises_the_same_error_again(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]):
    suite = tmp_path / "suite" / "test_fixed_positions.py"
    suite.parent.mkdir()
    suite.write_text(FIXED_POSITIONS_SUITE)
    out = tmp_path / "run"
    assert main(["run", "--suites", str(suite), "--models", "llama-tiny", "--precisions", "fp32", "--providers",
                 "ort_cpu", "--out", str(out)]) == 1
    record = _record(out)
    assert record["verdict"] == "error"
    bundle = Path(record["data"]["repro_bundles"]["generation"])
    manifest = json.loads((bundle / "bundle.json").read_text())
    error = manifest["error"]
    assert manifest["kind"] == "error" and manifest["family"] == "causal_lm" and set(manifest["artifacts"]) == {"model"}
    assert error["graph"] == "model" and error["stage"] == "run" and error["type"] != "ReplayedError"
    assert "position_ids" in error["message"] and manifest["decode"]["settings"]["max_new_tokens"] == 4
    assert (bundle / "tokenizer" / "config.json").is_file()
    done = _repro(bundle, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "type same; normalised message same" in done.stdout
    assert f"REPRODUCES: {error['type']} again (graph model call {error['call']}" in done.stdout

    def other_error(m: dict) -> None:
        m["error"]["message"] = "a different message"

    capsys.readouterr()  # in this process: the empty-cache property is the subprocess's above
    assert main(["repro", str(_edit(bundle, tmp_path, other_error))]) == 0
    assert "DOES NOT REPRODUCE: a different error" in capsys.readouterr().out


def test_a_decode_error_the_graphs_do_not_raise_writes_no_bundle(workspace, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch):
    """Only a graph's load or call is the files' error: a decode that works writes nothing, a file
    the runtime cannot load is a ``load`` error of its graph, and an exception from the harness's
    decoding code (here: the search) is not bundled."""
    from harness.generation import decode
    from harness.judge.generation import GenerationRequest, decode_plan
    from harness.repro.error_decode import provoke, write_decode_error_bundle
    from tests.conftest import variant

    v = variant("llama-tiny", "fp32", "ort_cpu")
    model = workspace.model(v.model)
    _, settings, indices, texts = decode_plan(workspace, model, GenerationRequest(samples=2, max_new_tokens=2))

    def write(name: str) -> Path | None:
        return write_decode_error_bundle(tmp_path / name, workspace, v, model, workspace.family(model), settings,
                                         indices, texts, 2, RuntimeError("the case's error"))

    assert write("fine") is None
    garbage = tmp_path / "model.onnx"
    garbage.write_bytes(b"not an onnx file")
    raised = provoke({"model": garbage}, model, workspace.family(model), v, texts, settings, 2, 1, None)
    assert raised is not None and (raised.graph, raised.stage, raised.call) == ("model", "load", None)

    def broken_search(*args, **kwargs):
        raise IndexError("a bug in the search")

    monkeypatch.setattr(decode, "search", broken_search)
    assert write("harness-bug") is None
    assert not (tmp_path / "fine").exists() and not (tmp_path / "harness-bug").exists()


# -- fresh-process budgets ---------------------------------------------------------------------------------
def test_cold_start_and_memory_budget_bundle_is_measured_again_in_fresh_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    config = tmp_path / "harness.toml"
    config.write_text("[models.bert-tiny.budgets]\ncold_start_ms = 0.001\npeak_rss_mb = 1\nartifact_mb = 0.001\n")
    out = tmp_path / "run"
    assert main(["run", "--suites", str(SUITES / "test_perf.py"), "-k", "test_cold_start_memory", "--config",
                 str(config), "--models", "bert-tiny", "--precisions", "int8", "--providers", "ort_cpu", "--perf",
                 "--perf-repeats", "1", "--out", str(out)]) == 1
    record = _record(out)
    bundle = Path(record["data"]["repro_bundles"]["perf"])
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["kind"] == "perf" and manifest["measure"] == "fresh_process" and manifest["repeats"] == 1
    assert set(manifest["budget"]) == {"cold_start_ms", "peak_rss_mb", "artifact_mb"}
    assert manifest["measured"]["peak_rss_mb"] == pytest.approx(record["metrics"]["perf.peak_rss_mb"])
    assert manifest["loader"].endswith(":OrtBackend") and all(a["bundled"] for a in manifest["artifacts"].values())
    outcome = tmp_path / "outcome.json"
    code, text = _repro_here(bundle, tmp_path, monkeypatch, capsys, "--json", str(outcome))
    assert code == 1, text
    for line in ("measured: 1 fresh process(es) importing", "cold start now: import", "memory floors now:",
                 "cold_start_ms: now", "peak_rss_mb: now", "now/recorded", "timings depend on the machine",
                 "REPRODUCES: 3 recorded budget breach(es) fail again"):
        assert line in text, text
    data = json.loads(outcome.read_text())
    assert data["measure"] == "fresh_process" and sorted(data["breaches_now"]) == sorted(manifest["budget"])
    assert data["measured_now"]["artifact_mb"] == pytest.approx(manifest["measured"]["artifact_mb"])  # same bytes
    assert data["perf_now"]["peak_rss_bytes"] > data["perf_now"]["imports_rss_bytes"] > 0

    capsys.readouterr()
    assert main(["repro", str(bundle), "--threads", "2"]) == 2  # the load spec fixes threads: one line, no child
    assert capsys.readouterr().err.count("\n") == 1

    def size_only(m: dict) -> None:  # a generous size budget alone: measured from the files, no process
        m["budget"] = {"artifact_mb": 1e6}
        m["verdict"]["failures"] = [f for f in m["verdict"]["failures"] if f["budget"] == "artifact_mb"]

    assert main(["repro", str(_edit(bundle, tmp_path, size_only))]) == 0
    text = capsys.readouterr().out
    assert "DOES NOT REPRODUCE: now passing artifact_mb" in text and "fresh process" not in text


# -- decode-loop budgets -----------------------------------------------------------------------------------
def test_ttft_and_tpot_budget_bundle_is_measured_again_by_the_decode_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    config = tmp_path / "harness.toml"
    config.write_text("[models.llama-tiny.budgets]\nttft_ms = 0.001\ntpot_ms = 0.001\n")
    out = tmp_path / "run"
    assert main(["run", "--suites", str(SUITES / "test_perf.py"), "-k", "test_generation_perf", "--config",
                 str(config), "--models", "llama-tiny", "--precisions", "int8", "--providers", "ort_cpu", "--perf",
                 "--perf-samples", "6", "--perf-new-tokens", "3", "--out", str(out)]) == 1
    record = _record(out)
    bundle = Path(record["data"]["repro_bundles"]["perf"])
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["kind"] == "perf" and manifest["measure"] == "decode" and manifest["new_tokens"] == 3
    assert manifest["budget"] == {"ttft_ms": 0.001, "tpot_ms": 0.001} and len(manifest["prompts"]) == 1
    assert manifest["measured"]["ttft_ms"] == pytest.approx(record["metrics"]["perf.ttft_ms"])
    code, text = _repro_here(bundle, tmp_path, monkeypatch, capsys)
    assert code == 1, text
    for line in ("tokenizer outputs: identical to the recording", "greedy generation(s) of 3 tokens per cache mode",
                 "ttft_ms: now", "tpot_ms: now", "now/recorded", "timings depend on the machine",
                 "REPRODUCES: 2 recorded budget breach(es) fail again"):
        assert line in text, text

    def generous(m: dict) -> None:
        m["budget"] = {"ttft_ms": 1e9, "tpot_ms": 1e9}

    capsys.readouterr()
    assert main(["repro", str(_edit(bundle, tmp_path, generous))]) == 0
    assert "DOES NOT REPRODUCE: now passing tpot_ms, ttft_ms" in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["measure", "repeats", "family", "verdict"])
def test_a_malformed_perf_bundle_is_one_line_exit_2(tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]):
    from harness.repro.bundle import FORMAT

    bundle = tmp_path / "b"
    bundle.mkdir()
    manifest = {"format": FORMAT, "kind": "perf", "measure": "decode", "precision": "int8", "provider": "ort_cpu",
                "budget": {"ttft_ms": 1.0}, "measured": {"ttft_ms": 2.0}, "files": {}, "family": "causal_lm",
                "prompts": ["x"], "new_tokens": 3, "repeats": 3, "verdict": {"failures": [{"budget": "ttft_ms"}]},
                "artifacts": {"model": {"path": "/x/model.onnx", "file": "model.onnx", "sha256": "0", "bundled": False}}}
    manifest.update({"measure": {"measure": "warp"}, "repeats": {"repeats": 0},
                     "family": {"family": "no-such-family"}, "verdict": {"verdict": {"passed": False}}}[damage])
    (bundle / "bundle.json").write_text(json.dumps(manifest))
    assert main(["repro", str(bundle)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert {"measure": "unknown measure 'warp'", "repeats": "repeats must be a positive integer",
            "family": "unknown family 'no-such-family'",
            "verdict": "verdict.failures must list the breached budgets"}[damage] in err
