"""The artifact cache: hits re-build nothing, corrupt entries are detected and rebuilt."""

from pathlib import Path

import pytest

from harness.export.cache import ArtifactCache


def _builder(calls: list):
    def build(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "model.onnx").write_bytes(b"payload-" + str(len(calls)).encode())
    return build


def test_second_lookup_is_a_hit(tmp_path):
    cache, calls = ArtifactCache(tmp_path), []
    first = cache.get_or_build("m", {"w": "abc", "opset": 17}, _builder(calls))
    second = cache.get_or_build("m", {"w": "abc", "opset": 17}, _builder(calls))
    assert first.built and not second.built
    assert len(calls) == 1
    assert first.directory == second.directory
    assert second.path().read_bytes() == b"payload-1"


def test_any_key_change_is_a_new_entry(tmp_path):
    cache, calls = ArtifactCache(tmp_path), []
    a = cache.get_or_build("m", {"w": "abc", "opset": 17}, _builder(calls))
    b = cache.get_or_build("m", {"w": "abc", "opset": 18}, _builder(calls))
    assert a.directory != b.directory and len(calls) == 2


def test_corrupt_entry_is_rebuilt(tmp_path):
    cache, calls = ArtifactCache(tmp_path), []
    entry = cache.get_or_build("m", {"w": "abc"}, _builder(calls))
    entry.path().write_bytes(b"truncated")  # bit rot / interrupted copy
    again = cache.get_or_build("m", {"w": "abc"}, _builder(calls))
    assert again.built and len(calls) == 2
    assert again.path().read_bytes() == b"payload-2"


def test_missing_meta_is_rebuilt(tmp_path):
    cache, calls = ArtifactCache(tmp_path), []
    entry = cache.get_or_build("m", {"w": "abc"}, _builder(calls))
    (entry.directory / "meta.json").unlink()
    assert cache.get_or_build("m", {"w": "abc"}, _builder(calls)).built


def test_failed_build_leaves_nothing_behind(tmp_path):
    cache = ArtifactCache(tmp_path)

    def broken(tmp: Path) -> None:
        (tmp / "model.onnx").write_bytes(b"half")
        raise RuntimeError("exporter crashed")

    with pytest.raises(RuntimeError, match="exporter crashed"):
        cache.get_or_build("m", {"w": "x"}, broken)
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]
