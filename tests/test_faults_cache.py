"""Faults in the caches (issue 11): a cached entry is verified on use and rebuilt when corrupt
or incomplete, a user's broken model directory is refused with one line, ``cache_hit`` tells
the truth, and a build killed midway leaves nothing that outlives the next run.

Every test uses its own ``HARNESS_CACHE`` (``tmp_path``): the shared cache is never damaged.
Building bert-tiny into an empty cache takes a second or two.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from waiting import PATIENCE

from harness.core import UsageError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def private_cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE", str(cache))
    return cache


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "HARNESS_CACHE": str(cache), "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def _harness(*args: str, cache: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``harness ...`` in a fresh process, as CI runs it."""
    return subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; entrypoint()", *args],
                          capture_output=True, text=True, env=_env(cache), cwd=cwd, timeout=PATIENCE)


def _flip(path: Path, count: int = 64) -> None:
    """Flip ``count`` bytes in the middle of the file (inside the tensor data, past the header)."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    for i in range(middle, middle + count):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _bert_tiny() -> Path:
    from harness.zoo.base import materialize, resolve

    return materialize(resolve("bert-tiny"))


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]


# -- zoo entries ------------------------------------------------------------------------------------
def test_a_corrupted_cached_zoo_model_is_rebuilt_not_judged(private_cache, tmp_path):
    """Why: flipping 64 bytes of a cached model.safetensors gave a passing run on other weights
    (the recorded model_sha256 changed, nothing noticed) and re-exported from them."""
    args = ("run", "--models", "bert-tiny", "--precisions", "fp32", "--providers", "ort_cpu", "--samples", "8")
    first = _harness(*args, "--out", str(tmp_path / "first"), cache=private_cache, cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    (before,) = {r["model_sha256"] for r in _records(tmp_path / "first")}

    (entry,) = [p for p in (private_cache / "zoo").glob("bert-tiny-*") if p.is_dir()]
    _flip(entry / "model.safetensors")

    # judged again, not replayed (harness/plugins/replay.py keys a zoo model by its recipe, so a warm
    # rerun would replay the first run's record, cache_hit False, without loading the damaged entry)
    second = _harness(*args, "--fresh-references", "--out", str(tmp_path / "second"), cache=private_cache,
                      cwd=tmp_path)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    records = _records(tmp_path / "second")
    assert not any(r["data"].get("replayed_case") for r in records)
    assert {r["model_sha256"] for r in records} == {before}, "the run judged weights other than the recipe's"
    # rebuilt bit-for-bit from the recipe: the artifacts exported from them are found, not re-exported
    assert all(a["cache_hit"] for r in records for a in r["artifacts"].values())


def test_a_cache_entry_with_a_deleted_file_is_repaired(private_cache):
    """Why: deleting tokenizer.json from a cached entry made every later run fail."""
    from harness.zoo.base import resolve
    from harness.zoo.loading import load_model

    entry = _bert_tiny()
    reference = load_model(resolve("bert-tiny")).weights_sha256
    (entry / "tokenizer.json").unlink()

    model = load_model(resolve("bert-tiny"))  # base: "cannot load tokenizer", on every run
    assert (entry / "tokenizer.json").is_file()
    assert model.weights_sha256 == reference
    assert model.tokenizer(["repaired"])["input_ids"]


def test_an_unexpected_file_in_a_zoo_entry_is_rebuilt_too(private_cache):
    entry = _bert_tiny()
    (entry / "pytorch_model.bin").write_bytes(b"not ours")  # would change what transformers loads
    assert _bert_tiny() == entry and not (entry / "pytorch_model.bin").exists()


def test_an_intact_entry_is_hashed_once_per_process(private_cache, monkeypatch):
    """Verification on every use stays cheap: the bytes are read once while unchanged on disk."""
    import harness.core.cachedir as cachedir

    entry = _bert_tiny()
    reads: list[Path] = []
    real_open = Path.open

    def counting_open(self: Path, *a, **kw):
        if self.parent == entry and self.name != ".complete":
            reads.append(self)
        return real_open(self, *a, **kw)

    monkeypatch.setattr(cachedir.Path, "open", counting_open)
    for _ in range(3):
        assert _bert_tiny() == entry
    assert reads == []  # hashed when built; every later use is a stat


def test_an_entry_from_an_older_harness_is_adopted_without_a_rebuild(private_cache):
    """A cache filled by harness <= 0.1 (marker "ok", no hashes) is not rebuilt wholesale on
    upgrade (that would re-export every artifact): intact files get their hashes recorded."""
    entry = _bert_tiny()
    (entry / ".complete").write_text("ok\n")
    weights = (entry / "model.safetensors").stat().st_ino
    assert _bert_tiny() == entry
    assert (entry / "model.safetensors").stat().st_ino == weights  # same files, not rebuilt
    assert "model.safetensors" in json.loads((entry / ".complete").read_text())["files"]


# -- a user's model directory: refused with one line ---------------------------------------------------
def _user_copy(tmp_path: Path) -> Path:
    user = tmp_path / "my-model"
    shutil.copytree(_bert_tiny(), user, ignore=shutil.ignore_patterns(".complete"))
    return user


@pytest.mark.parametrize("damage, message", [
    ("truncate", r"model.safetensors is corrupt or incomplete"),
    ("header", r"model.safetensors is corrupt or incomplete \(unreadable header"),
    ("tokenizer", r"cannot load tokenizer: no tokenizer files"),
    ("tokenizer-json", r"tokenizer.json is not valid JSON"),
])
def test_a_broken_user_model_dir_is_refused_with_one_line(private_cache, tmp_path, damage, message):
    """A directory the user supplied has nothing to rebuild from: exit 2, one line, no case run."""
    import re

    user = _user_copy(tmp_path)
    weights = user / "model.safetensors"
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif damage == "header":
        data = bytearray(weights.read_bytes())
        data[8:24] = b"\x00" * 16
        weights.write_bytes(bytes(data))
    elif damage == "tokenizer":
        (user / "tokenizer.json").unlink()
    else:
        (user / "tokenizer.json").write_text('{"version": "1.0", "model": {')
    proc = _harness("run", "--models", str(user), "--precisions", "fp32", "--providers", "ort_cpu",
                    "--out", str(tmp_path / "out"), cache=private_cache, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), proc.stderr
    assert lines[0].startswith("harness: error: ") and str(user) in lines[0]


def test_a_sound_user_model_dir_passes_the_checks(private_cache, tmp_path):
    from harness.zoo.base import spec_for_directory
    from harness.zoo.integrity import check_model_dir

    user = _user_copy(tmp_path)
    check_model_dir(user)
    assert spec_for_directory(user).path == user.resolve()


def test_flipped_tensor_bytes_in_a_user_dir_change_the_recorded_sha(private_cache, tmp_path):
    """What the cheap checks cannot see (no recorded hash for a user's weights) the record
    names: the weights' sha256 differs, so a baseline comparison or a reader notices."""
    from harness.zoo.base import spec_for_directory
    from harness.zoo.loading import load_model

    user = _user_copy(tmp_path)
    before = load_model(spec_for_directory(user)).weights_sha256
    _flip(user / "model.safetensors")
    assert load_model(spec_for_directory(user)).weights_sha256 != before


def test_check_model_dir_raises_usage_errors_only(tmp_path):
    from harness.zoo.integrity import check_model_dir

    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UsageError, match="no weight files"):
        check_model_dir(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 8 + b"{}")
    with pytest.raises(UsageError, match="header length"):
        check_model_dir(tmp_path)


# -- artifacts: cache_hit ------------------------------------------------------------------------------
def test_cache_hit_is_false_for_artifacts_this_case_built(private_cache, small_options):
    """Why: ``cache_hit: true`` was recorded for artifacts that were just built."""
    from harness.case.pipeline import numeric_parity
    from harness.judge.workspace import Workspace
    from tests.conftest import variant

    ws = Workspace(small_options, private_cache)
    built = numeric_parity(ws, variant("bert-tiny", "fp32", "ort_cpu")).artifacts
    assert built and not any(a["cache_hit"] for a in built.values())
    again = numeric_parity(ws, variant("bert-tiny", "fp32", "ort_cpu")).artifacts  # the next case finds them
    assert again and all(a["cache_hit"] for a in again.values())
    assert {k: a["sha256"] for k, a in again.items()} == {k: a["sha256"] for k, a in built.items()}


# -- orphaned temporary directories ------------------------------------------------------------------------
_BUILDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from harness.export.cache import ArtifactCache

    root, ready = Path(sys.argv[1]), Path(sys.argv[2])

    def build(tmp):
        (tmp / "model.onnx").write_bytes(b"half an export")
        ready.write_text(str(tmp))
        time.sleep(600)  # killed here, mid-export

    ArtifactCache(root).get_or_build("m-model-fp32", {"w": "abc"}, build)
""")


def _start_builder(root: Path, tmp_path: Path, cache: Path) -> tuple[subprocess.Popen[bytes], Path]:
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", _BUILDER, str(root), str(ready)], env=_env(cache))
    deadline = time.monotonic() + PATIENCE
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the builder did not start"
        time.sleep(0.05)
    return proc, Path(ready.read_text())


def test_an_export_killed_midway_leaves_no_orphan_after_the_next_run(private_cache, tmp_path):
    """Why: a SIGKILL during export left its temporary directory behind for good."""
    from harness.export.cache import ArtifactCache

    root = private_cache / "artifacts"
    proc, tmp = _start_builder(root, tmp_path, private_cache)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=PATIENCE)
    assert tmp.is_dir()  # what the dead builder left

    entry = ArtifactCache(root).get_or_build("m-model-fp32", {"w": "abc"}, lambda d: (d / "model.onnx").write_bytes(b"ok"))
    assert entry.built and entry.path().read_bytes() == b"ok"
    assert not tmp.exists()
    assert not [p for p in root.iterdir() if p.name.startswith(".")]


def test_a_live_builders_temp_dir_is_never_swept(private_cache, tmp_path):
    """A concurrent run still exporting holds its entry's lock: its directory is left alone."""
    from harness.core.cachedir import sweep_orphans

    root = private_cache / "artifacts"
    proc, tmp = _start_builder(root, tmp_path, private_cache)
    try:
        assert sweep_orphans(root, force=True) == []
        assert tmp.is_dir() and (tmp / "model.onnx").is_file()
    finally:
        proc.kill()
        proc.wait(timeout=PATIENCE)
    assert sweep_orphans(root, force=True) == [tmp]


def test_orphans_of_zoo_builds_and_of_older_harness_versions_are_swept(private_cache):
    entry = _bert_tiny()
    zoo = entry.parent
    orphans = [zoo / f".{entry.name}.tmp-abc123_x", zoo / ".bert-tiny-k2j4_9zq"]  # new and <= 0.1 naming
    for orphan in orphans:
        orphan.mkdir()
        (orphan / "model.safetensors").write_bytes(b"half")
    unrelated = zoo / ".keep-me"
    unrelated.mkdir()
    from harness.core.cachedir import sweep_orphans

    assert sorted(sweep_orphans(zoo, force=True)) == sorted(orphans)
    assert unrelated.is_dir() and entry.is_dir()
