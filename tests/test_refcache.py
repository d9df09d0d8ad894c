"""The reference and output cache (issue 13): content keys, verification, replay, laziness."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from harness.judge.refcache import ARRAYS, ReferenceCache, feeds_digest


def _arrays(seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"logits": rng.standard_normal((2, 3)).astype(np.float32), "present.0.key": np.arange(4)},
            {"logits": rng.standard_normal((1, 3)).astype(np.float32)}]


def test_arrays_round_trip_and_count_hits(tmp_path):
    cache = ReferenceCache(tmp_path)
    first = cache.arrays("m-g", {"weights": "w"}, _arrays)
    again = cache.arrays("m-g", {"weights": "w"}, lambda: pytest.fail("a hit must not recompute"))
    assert (cache.misses, cache.hits) == (1, 1)
    assert [sorted(b) for b in again] == [sorted(b) for b in first]
    for a, b in zip(first, again):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
            assert a[name].dtype == b[name].dtype


def test_any_changed_key_part_misses(tmp_path):
    cache = ReferenceCache(tmp_path)
    cache.arrays("m-g", {"weights": "w", "feeds": ["a"]}, _arrays)
    calls = []
    cache.arrays("m-g", {"weights": "w2", "feeds": ["a"]}, lambda: calls.append(1) or _arrays(1))
    cache.arrays("m-g", {"weights": "w", "feeds": ["b"]}, lambda: calls.append(1) or _arrays(1))
    assert len(calls) == 2


def test_corrupt_entry_is_recomputed(tmp_path):
    cache = ReferenceCache(tmp_path)
    cache.arrays("m-g", {"k": 1}, _arrays)
    (entry,) = [p for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    data = bytearray((entry / ARRAYS).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (entry / ARRAYS).write_bytes(bytes(data))
    calls = []
    fresh = ReferenceCache(tmp_path).arrays("m-g", {"k": 1}, lambda: calls.append(1) or _arrays())
    assert calls == [1] and len(fresh) == 2


def test_fresh_recomputes_and_env_var_too(tmp_path, monkeypatch):
    ReferenceCache(tmp_path).json("m-decode", {"k": 1}, lambda: {"texts": ["a"]})
    calls = []
    assert ReferenceCache(tmp_path, fresh=True).json("m-decode", {"k": 1}, lambda: calls.append(1) or {"texts": ["b"]}) \
        == {"texts": ["b"]}
    monkeypatch.setenv("HARNESS_FRESH_REFERENCES", "1")
    ReferenceCache(tmp_path).json("m-decode", {"k": 1}, lambda: calls.append(1) or {"texts": ["c"]})
    assert calls == [1, 1]


def test_feeds_digest_sees_dtype_shape_and_bytes():
    a = {"x": np.zeros((2, 2), np.int64)}
    assert feeds_digest(a) == feeds_digest({"x": np.zeros((2, 2), np.int64)})
    assert feeds_digest(a) != feeds_digest({"x": np.zeros((2, 2), np.int32)})
    assert feeds_digest(a) != feeds_digest({"x": np.zeros((4,), np.int64)})
    assert feeds_digest(a) != feeds_digest({"x": np.ones((2, 2), np.int64)})


def test_warm_workspace_replays_without_loading_the_torch_module(tmp_path, small_options):
    """A second workspace (a rerun) gets the same references and ORT outputs from the cache,
    and never loads the PyTorch module; the records' metrics are identical."""
    from harness.case.pipeline import numeric_parity
    from harness.core import Precision, Variant
    from harness.judge.workspace import Workspace
    from harness.runners import PROVIDERS

    options = replace(small_options, models=["bert-tiny"])
    variant = Variant("bert-tiny", Precision.FP32, PROVIDERS["ort_cpu"])
    cold = Workspace(options, tmp_path)
    first = numeric_parity(cold, variant)
    assert cold.model("bert-tiny").model_loaded and not first.replayed
    warm = Workspace(options, tmp_path)
    second = numeric_parity(warm, variant)
    assert not warm.model("bert-tiny").model_loaded, "a warm rerun of an ORT variant loaded the torch module"
    assert second.replayed and second.metrics() == first.metrics()
    assert warm.references.misses == 0 and warm.references.hits >= 2


def test_fresh_references_option_recomputes(tmp_path, small_options):
    from harness.judge.workspace import Workspace

    options = replace(small_options, models=["bert-tiny"])
    ws = Workspace(options, tmp_path)
    model = ws.model("bert-tiny")
    family = ws.family(model)
    graph = family.graphs(model)[0]
    ws.refs.parity_batches(model, family, graph)
    again = Workspace(replace(options, settings=replace(options.settings, fresh_references=True)), tmp_path)
    m2 = again.model("bert-tiny")
    again.refs.parity_batches(m2, again.family(m2), graph)
    assert again.references.misses == 1 and m2.model_loaded


def test_generation_source_matches_the_loaded_model():
    """Decoding settings read without weights equal those read from the loaded module."""
    from harness.generation import settings_for_model
    from harness.zoo.base import ModelCatalog
    from harness.zoo.loading import load_model

    spec = ModelCatalog().resolve("marian-tiny")
    lazy = load_model(spec, lazy=True)
    light = settings_for_model(lazy.generation_source())
    assert not lazy.model_loaded
    assert settings_for_model(load_model(spec).model) == light
    assert lazy.hf_config.decoder_layers == lazy.model.config.decoder_layers


def test_a_refused_feed_is_cached_and_replayed_as_the_same_refusal(tmp_path):
    """Shape probes may be refused by an export (a wrongly tied axis): the output cache keeps the
    runtime's error line, and the replay raises it again instead of inventing outputs."""
    from harness.judge.refcache import ReplayedError, ReplayRunner, error_outputs, error_text

    good = {"x": np.ones((1, 2), dtype=np.float32)}
    bad = {"x": np.ones((3, 5), dtype=np.float32)}
    cache = ReferenceCache(tmp_path)

    def compute() -> list[dict[str, np.ndarray]]:
        try:
            raise RuntimeError("[ONNXRuntimeError] Shape mismatch attempting to re-use buffer\nsecond line")
        except RuntimeError as exc:
            return [{"y": good["x"] * 2}, error_outputs(exc)]

    cold = cache.arrays("probe", {"k": 1}, compute)
    warm = ReferenceCache(tmp_path).arrays("probe", {"k": 1}, lambda: pytest.fail("recomputed on a hit"))
    assert error_text(warm[1]) == error_text(cold[1]) == "[ONNXRuntimeError] Shape mismatch attempting to re-use buffer"
    loads = []
    runner = ReplayRunner({feeds_digest(good): warm[0], feeds_digest(bad): warm[1]}, lambda: loads.append(1))
    assert np.array_equal(runner.run(good)["y"], good["x"] * 2)
    with pytest.raises(ReplayedError, match=r"^\[ONNXRuntimeError\] Shape mismatch attempting to re-use buffer$"):
        runner.run(bad)
    assert loads == []  # no session was opened for either
