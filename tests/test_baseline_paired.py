"""``baseline save`` records the timed artifacts' cache keys (``--keep-artifacts`` copies them) and
``baseline compare --perf`` re-times blessed and candidate artifacts interleaved, or says why not.

The artifacts are real ONNX graphs built into a real export cache (``ArtifactCache``); the
"slow" candidate is the same graph with three extra MatMuls, a real extra cost.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.export.cache import ArtifactCache
from tests.test_cli_baseline import ENV, run

FAST = ["--pairs", "10", "--block", "20", "--warmup", "5"]


def _graph(out: Path, extra: int) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array((rng.standard_normal((64, 64)) / 8).astype(np.float32), "w")
    nodes, last = [], "x"
    for i in range(1 + extra):
        nodes.append(helper.make_node("MatMul", [last, "w"], [f"h{i}"]))
        last = f"h{i}"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    graph = helper.make_graph(nodes, "toy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 64])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(out / "model.onnx"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ArtifactCache:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    return ArtifactCache(tmp_path / "cache" / "artifacts")


def write_run(path: Path, cache: ArtifactCache, *, extra: int = 0, env: dict[str, Any] | None = None,
              provider: str = "ort_cpu", seq: int = 32, timed: dict[str, Any] | None = None) -> Path:
    """A --perf run's records: latency (with the timed file), cold start and memory, accuracy;
    ``timed``: the ``perf`` entries a real timing recorded (``latency_ms``, ``canary_ms``) instead of
    generated samples."""
    from harness.runners import PROVIDERS

    entry = cache.get_or_build("toy-model-fp32", {"kind": "toy", "extra": extra}, lambda tmp: _graph(tmp, extra))
    variant = f"toy-fp32-{provider}"
    samples = (0.5 * np.random.default_rng(extra).lognormal(0, 0.05, 400)).tolist()
    common = {"schema": "harness.result/1", "variant": variant, "verdict": "pass", "precision": "fp32",
              "backend": PROVIDERS[provider].backend, "provider": provider, "env": env or ENV}
    threads = {"threads": {"ort_intra_op_threads": 1}}
    records = [
        {**common, "id": f"test_logits_parity[{variant}]", "metrics": {"cosine": 0.9999},
         "artifacts": entry.file_infos("model", cache_hit=True)},
        {**common, "id": f"test_latency[{variant}]", "artifacts": entry.file_infos("model", cache_hit=True),
         "perf": {"latency_ms": {"samples": samples, "warmup": 5, "graph": "model", "batch_size": 1, "seq_len": seq},
                  "settings": threads, **(timed or {})}},
        {**common, "id": f"test_cold_start_memory[{variant}]",
         "perf": {"peak_rss_bytes": 200 * 2**20, "artifact_bytes": 20_000, "settings": threads}},
    ]
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _compare(tmp_path: Path, run_dir: Path, store: Path, capsys: Any, *extra: str) -> tuple[int, dict[str, Any], str]:
    out_json = tmp_path / f"cmp-{run_dir.name}.json"
    code, out, err = run(["baseline", "compare", str(run_dir), "--name", "main", "--baseline-store", str(store),
                          "--json", str(out_json), *extra], capsys)
    doc = json.loads(out_json.read_text()) if out_json.exists() else {}
    return code, doc, out + err


def test_save_records_the_cache_keys_of_the_timed_artifacts(tmp_path, cache, capsys):
    run_dir = write_run(tmp_path / "main", cache)
    code, out, _ = run(["baseline", "save", str(run_dir), "--name", "main", "--baseline-store", str(tmp_path / "b")], capsys)
    assert code == 0 and "recorded the cache keys of 1 timed artifact file(s)" in out
    meta = json.loads((tmp_path / "b" / "main" / "baseline.json").read_text())
    entry = next(cache.root.iterdir())
    recorded = meta["artifacts"]["toy-fp32-ort_cpu"]["model/model.onnx"]
    assert recorded["cache_key"] == json.loads((entry / "meta.json").read_text())["key"]
    assert recorded["cache_entry"] == entry.name and "kept" not in recorded
    assert not (tmp_path / "b" / "main" / "artifacts").exists()


def test_keep_artifacts_copies_them_and_states_the_size(tmp_path, cache, capsys):
    run_dir = write_run(tmp_path / "main", cache)
    code, out, _ = run(["baseline", "save", str(run_dir), "--name", "main", "--baseline-store", str(tmp_path / "b"),
                        "--keep-artifacts"], capsys)
    entry = next(cache.root.iterdir())
    kept = tmp_path / "b" / "main" / "artifacts" / entry.name / "model.onnx"
    assert code == 0 and kept.read_bytes() == (entry / "model.onnx").read_bytes()
    size = kept.stat().st_size
    assert f"kept 1 artifact file(s) ({size / 1024:.2f} KiB)" in out
    meta = json.loads((tmp_path / "b" / "main" / "baseline.json").read_text())
    assert meta["kept_artifacts"] == {"files": 1, "bytes": size}


def test_keep_artifacts_refuses_an_unwritable_or_full_store_in_one_line(tmp_path, cache, capsys, monkeypatch):
    run_dir = write_run(tmp_path / "main", cache)
    (tmp_path / "file").write_text("x")
    code, _, err = run(["baseline", "save", str(run_dir), "--name", "main", "--baseline-store", str(tmp_path / "file" / "b"),
                        "--keep-artifacts"], capsys)
    assert code == 2 and "--baseline-store" in err and "not a directory" in err and len(err.strip().splitlines()) == 1
    import harness.core.writable as writable

    monkeypatch.setattr(writable, "free_bytes", lambda path: 4096)
    code, _, err = run(["baseline", "save", str(run_dir), "--name", "main", "--baseline-store", str(tmp_path / "b"),
                        "--keep-artifacts"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "only 4.00 KiB free, --keep-artifacts (1 files) needs about" in err
    assert not (tmp_path / "b" / "main").exists()  # nothing half-written
    shutil.rmtree(next(cache.root.iterdir()))  # the run's artifacts are gone: nothing to keep
    monkeypatch.undo()
    code, _, err = run(["baseline", "save", str(run_dir), "--name", "main", "--baseline-store", str(tmp_path / "b"),
                        "--keep-artifacts"], capsys)
    assert code == 2 and "--keep-artifacts: toy-fp32-ort_cpu model/model.onnx" in err and "is gone" in err


def test_compare_perf_is_paired_passes_an_a_a_and_catches_an_extra_op(tmp_path, cache, capsys):
    store = tmp_path / "b"
    run(["baseline", "save", str(write_run(tmp_path / "main", cache)), "--name", "main", "--baseline-store", str(store)], capsys)
    code, doc, out = _compare(tmp_path, write_run(tmp_path / "same", cache), store, capsys, "--perf", *FAST)
    assert doc["mode"] == "paired", out
    assert doc["mode_reason"].startswith("paired: 1 variant(s) re-timed interleaved in this job (10 pairs x 20 calls")
    assert doc["pairing"] == {"toy-fp32-ort_cpu": "paired (from the cache)"}
    latency = [r for r in doc["rows"] if r["kind"] == "latency"]
    assert latency and all(r["reason"].startswith("paired, 10 pairs") for r in latency)
    assert code == 0 and not any(r["verdict"] == "REGRESSION" for r in latency), out
    assert "re-timing toy-fp32-ort_cpu" in out and "note: paired: 1 variant(s)" in out

    code, doc, out = _compare(tmp_path, write_run(tmp_path / "slow", cache, extra=3), store, capsys, "--perf", *FAST)
    p50 = next(r for r in doc["rows"] if r["metric"] == "latency_ms.p50")
    assert doc["mode"] == "paired" and code == 1, out
    assert p50["verdict"] == "REGRESSION" and p50["ratio"] > 1.5 and p50["reason"].startswith("paired")


def test_compare_says_unpaired_and_why_and_falls_back_when_the_cache_was_cleared(tmp_path, cache, capsys):
    store = tmp_path / "b"
    run(["baseline", "save", str(write_run(tmp_path / "main", cache)), "--name", "main", "--baseline-store", str(store)], capsys)
    blessed_entry = next(cache.root.iterdir())
    candidate = write_run(tmp_path / "cand", cache, extra=1)
    code, doc, out = _compare(tmp_path, candidate, store, capsys)  # no --perf: recorded runs
    assert code == 0 and doc["mode"] == "unpaired" and "pass --perf" not in doc["mode_reason"]
    assert doc["mode_reason"].startswith("unpaired: recorded runs compared (`baseline compare --perf`")

    shutil.rmtree(blessed_entry)  # the cache was cleared (pruned, a fresh runner)
    code, doc, out = _compare(tmp_path, candidate, store, capsys, "--perf", *FAST)
    assert doc["mode"] == "unpaired", out
    assert doc["mode_reason"].startswith("unpaired: blessed artifacts of 1 variant(s) not in the cache nor kept "
                                         "(toy-fp32-ort_cpu): run `baseline save --keep-artifacts`")
    assert "not found" in doc["pairing"]["toy-fp32-ort_cpu"]
    latency = [r for r in doc["rows"] if r["kind"] == "latency"]
    assert latency and not any(r["reason"].startswith("paired") for r in latency)  # the recorded comparison
    assert code == 0 and "note: unpaired: blessed artifacts" in out

    # on another machine the recorded fallback is refused; a paired comparison is not
    other = {**ENV, "fingerprint": "beef", "cpu": "Other CPU"}
    code, _, out = _compare(tmp_path, write_run(tmp_path / "elsewhere", cache, extra=1, env=other), store, capsys,
                            "--perf", *FAST)
    assert code == 2 and "environment differs from the baseline" in out


def test_kept_artifacts_pair_after_the_cache_is_gone_even_on_another_machine(tmp_path, cache, capsys):
    store = tmp_path / "b"
    run(["baseline", "save", str(write_run(tmp_path / "main", cache)), "--name", "main", "--baseline-store", str(store),
         "--keep-artifacts"], capsys)
    shutil.rmtree(next(cache.root.iterdir()))
    other = {**ENV, "fingerprint": "beef", "cpu": "Other CPU"}
    code, doc, out = _compare(tmp_path, write_run(tmp_path / "cand", cache, env=other), store, capsys, "--perf", *FAST)
    assert doc["mode"] == "paired" and doc["pairing"] == {"toy-fp32-ort_cpu": "paired (kept in the baseline)"}, out
    assert "environment differs from the baseline: latency re-timed here on both sides" in doc["mode_reason"]
    memory = next(r for r in doc["rows"] if r["metric"] == "peak_rss_bytes")
    size = next(r for r in doc["rows"] if r["metric"] == "artifact_bytes")
    assert memory["advisory"] and "recorded in another environment" in memory["reason"] and not size["advisory"]
    # the recorded latency beside the paired rows: another CPU's numbers, so advisory
    assert doc["recorded_rows"] and all(r["advisory"] and r["reason"].endswith("advisory: recorded on another machine")
                                        for r in doc["recorded_rows"])
    assert code == 0, out


def _also_timed_as_an_artifact(run_dir: Path) -> Path:
    """The same variant timed a second time by the artifact suite (a configured file): the
    comparison qualifies each latency row with its test's name."""
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    latency = json.loads(next(line for line in lines if '"test_latency[' in line))
    latency["id"] = latency["id"].replace("test_latency[", "test_artifact_perf[")
    (run_dir / "results.jsonl").write_text("\n".join([*lines, json.dumps(latency)]) + "\n")
    return run_dir


def test_a_variant_timed_by_two_suites_is_compared_as_recorded_and_says_why(tmp_path, cache, capsys):
    """baseline.json keeps one timed file per variant, so a variant the perf suite and the artifact
    suite both timed cannot be re-timed paired; the comparison says that, not "other shapes"."""
    store = tmp_path / "b"
    run(["baseline", "save", str(_also_timed_as_an_artifact(write_run(tmp_path / "main", cache))), "--name", "main",
         "--baseline-store", str(store)], capsys)
    code, doc, out = _compare(tmp_path, _also_timed_as_an_artifact(write_run(tmp_path / "same", cache)), store, capsys,
                              "--perf", *FAST)
    assert doc["mode"] == "unpaired", out
    assert doc["mode_reason"] == ("unpaired: 1 variant(s) were timed by more than one suite (toy-fp32-ort_cpu): a paired "
                                  "re-timing re-times one file per variant (baseline.json keeps one per variant), so "
                                  "their recorded samples are compared")
    assert "test_artifact_perf and test_latency" in doc["pairing"]["toy-fp32-ort_cpu"]
    metrics = {r["metric"] for r in doc["rows"] if r["kind"] == "latency"}
    assert {"test_latency:latency_ms.p50", "test_artifact_perf:latency_ms.p50"} <= metrics
    assert "timed other graphs or shapes" not in out
