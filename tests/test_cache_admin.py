"""``harness cache info | verify | prune`` on real cache entries built by the harness's own cache code."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from filelock import FileLock

from harness import cacheadmin as ca
from harness.cli import main
from harness.core import UsageError, cachedir
from harness.export.cache import ArtifactCache
from harness.zoo.integrity import write_manifest

DAY = 86400


def _artifact(root: Path, area: str, label: str, size: int) -> Path:
    def build(tmp: Path) -> None:
        (tmp / "model.onnx").write_bytes(os.urandom(size))

    return ArtifactCache(root / area).get_or_build(label, {"label": label}, build).directory


def _zoo(root: Path, name: str, size: int) -> Path:
    entry = root / "zoo" / name
    entry.mkdir(parents=True)
    (entry / "config.json").write_text("{}")
    (entry / "model.safetensors").write_bytes(os.urandom(size))
    write_manifest(entry)
    (root / "zoo" / f"{name}.lock").touch()
    return entry


def _age(entry: Path, days: float) -> None:
    stamp = time.time() - days * DAY
    os.utime(str(entry) + ".lock", (stamp, stamp))


@pytest.fixture
def cache(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "cache"
    made = {"zoo": _zoo(root, "tiny-abc", 4000),
            "old": _artifact(root, "artifacts", "m-model-fp32", 30_000),
            "mid": _artifact(root, "artifacts", "m-model-fp16", 20_000),
            "new": _artifact(root, "references", "m-ref", 10_000)}
    _age(made["old"], 40)
    _age(made["mid"], 10)
    _age(made["zoo"], 5)
    made["root"] = root
    return made


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict]:
    code = main(argv + ["--json"])
    return code, json.loads(capsys.readouterr().out)


def test_info_counts_entries_and_bytes_per_area(cache, capsys):
    code, out = _json(capsys, ["cache", "info", "--cache", str(cache["root"])])
    assert code == 0
    areas = {a["area"]: a for a in out["areas"]}
    assert areas["artifacts"]["entries"] == 2 and areas["references"]["entries"] == 1
    assert areas["zoo"]["entries"] == 1
    assert areas["artifacts"]["bytes"] > 50_000  # both ONNX files and their meta.json
    assert 39 < areas["artifacts"]["least_recent_use_days"] < 41
    assert out["largest"][0]["entry"] == cache["old"].name


def test_verify_finds_a_corrupt_entry_and_remove_lets_a_run_rebuild_it(cache, capsys):
    code, out = _json(capsys, ["cache", "verify", "--cache", str(cache["root"])])
    assert code == 0 and out["checked"] == 4 and out["corrupt"] == []
    onnx = cache["mid"] / "model.onnx"
    onnx.write_bytes(b"truncated")
    (cache["zoo"] / "model.safetensors").write_bytes(b"x")
    code, out = _json(capsys, ["cache", "verify", "--cache", str(cache["root"])])
    assert code == 1
    problems = {c["entry"]: c["problem"] for c in out["corrupt"]}
    assert set(problems) == {cache["mid"].name, cache["zoo"].name}
    assert "model.onnx does not match its recorded sha256" in problems[cache["mid"].name]
    code, out = _json(capsys, ["cache", "verify", "--cache", str(cache["root"]), "--remove"])
    assert code == 0 and all(c["removed"] for c in out["corrupt"])
    assert not cache["mid"].exists() and not cache["zoo"].exists() and cache["old"].exists()
    rebuilt = _artifact(cache["root"], "artifacts", "m-model-fp16", 20_000)
    assert rebuilt == cache["mid"] and (rebuilt / "model.onnx").stat().st_size == 20_000


def test_prune_older_than_removes_only_entries_unused_that_long(cache, capsys):
    code, out = _json(capsys, ["cache", "prune", "--cache", str(cache["root"]), "--older-than", "7d"])
    assert code == 0
    assert {r["entry"] for r in out["removed"]} == {cache["old"].name, cache["mid"].name}
    assert not cache["old"].exists() and not cache["mid"].exists()
    assert cache["zoo"].exists() and cache["new"].exists()
    assert not [p for p in (cache["root"] / "artifacts").iterdir() if p.name.startswith(".")]  # no debris


def test_prune_max_size_removes_least_recently_used_first(cache, capsys):
    total = sum(e.bytes for e in ca.entries(cache["root"], ca.AREAS))
    code, out = _json(capsys, ["cache", "prune", "--cache", str(cache["root"]), "--max-size", str(total - 1)])
    assert code == 0
    assert [r["entry"] for r in out["removed"]] == [cache["old"].name]  # one entry is enough, the LRU one
    assert out["left_bytes"] <= total - 1


def test_a_cache_hit_counts_as_use(cache):
    _age(cache["new"], 30)
    cachedir._USED.discard(str(cache["new"]))  # as a new process would
    _artifact(cache["root"], "references", "m-ref", 10_000)  # a hit: same parts, nothing rebuilt
    lock = Path(str(cache["new"]) + ".lock")
    assert time.time() - lock.stat().st_mtime < DAY


def test_dry_run_and_area_filter_remove_nothing_outside_their_scope(cache, capsys):
    code, out = _json(capsys, ["cache", "prune", "--cache", str(cache["root"]), "--older-than", "1h",
                               "--area", "zoo", "--dry-run"])
    assert code == 0 and [r["entry"] for r in out["removed"]] == [cache["zoo"].name]
    assert cache["zoo"].exists() and cache["old"].exists()


def test_an_entry_whose_lock_is_held_is_never_pruned(cache, capsys):
    # taking the lock is itself a use (O_TRUNC): age-based pruning spares it; size-based must too
    with FileLock(str(cache["old"]) + ".lock"):
        code, out = _json(capsys, ["cache", "prune", "--cache", str(cache["root"]), "--max-size", "0"])
    assert code == 0
    assert out["in_use"] == [f"artifacts/{cache['old'].name}"]
    assert cache["old"].exists() and not cache["mid"].exists() and not cache["new"].exists()


@pytest.mark.parametrize("argv, message", [
    (["prune"], "give --older-than AGE and/or --max-size SIZE"),
    (["prune", "--older-than", "soon"], "--older-than: 'soon' is not a duration"),
    (["prune", "--max-size", "big"], "--max-size: 'big' is not a size"),
    (["info", "--area", "engines"], "--area: unknown area 'engines'; valid: zoo, artifacts, references, verdicts"),
])
def test_bad_usage_is_one_line_exit_2(cache, capsys, argv, message):
    code = main(["cache", *argv[:1], "--cache", str(cache["root"]), *argv[1:]])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert cache["old"].exists()


def test_missing_cache_directory_is_a_usage_error(tmp_path, capsys):
    assert main(["cache", "info", "--cache", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_parsers():
    assert ca.parse_duration("2w", "--x") == 14 * DAY and ca.parse_duration("1.5", "--x") == 1.5 * DAY
    assert ca.parse_size("10G", "--x") == 10 << 30 and ca.parse_size("500MiB", "--x") == 500 << 20
    with pytest.raises(UsageError):
        ca.parse_size("-1G", "--x")
