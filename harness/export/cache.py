"""Content-addressed artifact cache.

An artifact's key hashes everything that decides its bytes: the weights' sha256, the graph
contract, export settings, precision settings and library versions. A second run re-exports
nothing; two pytest-xdist workers never build the same entry twice (file lock); a partially
written or corrupted entry is detected (sha256 of every file, recorded at build, checked on
every use -- read once per process while unchanged) and rebuilt: that covers a model's
external data files (``model.onnx.data``), which are files of the entry like the graph, and a
graph whose external data is not inside its entry is refused at build; a build that died (SIGKILL)
leaves a temporary directory that the next run sweeps (``harness.core.cachedir``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.core.cachedir import file_sha256, lock_for, mark_used, mismatch, sweep_orphans, temp_dir_for, tree_files

log = logging.getLogger("harness.cache")

META = "meta.json"


def cache_key(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    directory: Path
    key: str
    files: dict[str, str]  # relative name -> sha256
    built: bool  # True when this call built it (a miss)
    build_seconds: float

    def path(self, name: str = "model.onnx") -> Path:
        return self.directory / name

    def file_infos(self, prefix: str, *, cache_hit: bool) -> dict[str, dict[str, Any]]:
        """What a record's ``artifacts`` says of this entry's files, under ``prefix/`` (the graph):
        path, sha256, size, whether it was found in the cache, and the entry's key and folder name,
        so a baseline can find exactly these bytes again (``harness.gate.blessed``)."""
        return {f"{prefix}/{name}": {"path": str(self.path(name)), "sha256": digest,
                                     "bytes": self.path(name).stat().st_size, "cache_hit": cache_hit,
                                     "cache_key": self.key, "cache_entry": self.directory.name}
                for name, digest in self.files.items()}


class ArtifactCache:
    """Entries ``<root>/<label>-<key16>`` built under their lock into a temporary directory
    (``harness.core.cachedir``): orphaned temporary directories of dead builders are swept on
    first use; every hit re-checks each recorded file's sha256 (hashed once per process while
    the file is unchanged on disk)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def get_or_build(self, label: str, parts: dict[str, Any], build: Callable[[Path], object]) -> CacheEntry:
        """Return the entry for ``parts``; ``build(tmpdir)`` writes its files on a miss.
        ``CacheEntry.built`` is True only on the call that built it."""
        key = cache_key(parts)
        directory = self.root / f"{label}-{key[:16]}"
        self.root.mkdir(parents=True, exist_ok=True)
        sweep_orphans(self.root)
        entry, _ = self._valid(directory, key)
        if entry is not None:
            return entry
        with lock_for(directory):
            entry, problem = self._valid(directory, key)
            if entry is not None:
                return entry
            if directory.exists():
                log.warning("cache entry %s is corrupt or incomplete (%s); rebuilding", directory, problem)
                shutil.rmtree(directory, ignore_errors=True)
            tmp = temp_dir_for(directory)
            try:
                start = time.perf_counter()
                build(tmp)
                seconds = time.perf_counter() - start
                names = tree_files(tmp)
                _check_external(tmp, names)
                files = {name: file_sha256(tmp / name, fresh=True) for name in names}
                meta = {"key": key, "parts": parts, "files": files, "build_seconds": seconds,
                        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                (tmp / META).write_text(json.dumps(meta, indent=2, default=str))
                os.replace(tmp, directory)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
            return CacheEntry(directory, key, files, True, seconds)

    def lookup(self, entry: str, key: str) -> CacheEntry | None:
        """The intact entry named ``entry`` (``<label>-<key16>``) built for ``key``, or None when
        it is gone, damaged or of another key; never builds."""
        if "/" in entry or entry.startswith(".") or not entry.endswith(key[:16]):
            return None
        found, _ = self._valid(self.root / entry, key)
        return found

    def _valid(self, directory: Path, key: str) -> tuple[CacheEntry | None, str]:
        """The entry when it is complete and intact, else (None, what is wrong)."""
        meta, problem = _read_meta(directory)
        if meta is None:
            return None, problem
        if meta.get("key") != key:
            return None, "meta.json records another key"
        broken = mismatch(directory, meta["files"])
        if broken is not None:
            return None, broken
        mark_used(directory)
        return CacheEntry(directory, key, meta["files"], False, float(meta.get("build_seconds", 0.0))), ""


def _read_meta(directory: Path) -> tuple[dict[str, Any] | None, str]:
    """An entry's meta.json with ``files`` as {name: sha256}, or (None, what is wrong)."""
    meta_path = directory / META
    if not meta_path.is_file():
        return None, "no meta.json"
    try:
        meta = json.loads(meta_path.read_text())
        meta["files"] = {str(name): str(digest) for name, digest in meta["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, "unreadable meta.json"
    return meta, ""


def entry_problem(directory: Path) -> str | None:
    """None when an entry (of any key) holds the files its meta.json recorded with those sha256s,
    else what is wrong: the check every use makes, asked by ``harness cache verify`` of every entry
    without knowing its key. Extra files are allowed as on use (ORT's TensorRT EP writes its engine
    cache into ``trt-engines/`` of the entry it runs)."""
    meta, unreadable = _read_meta(directory)
    if meta is None:
        return unreadable
    return mismatch(directory, meta["files"])


def _check_external(directory: Path, names: list[str]) -> None:
    """Every ONNX file of a new entry finds its external data inside the entry (so the entry's
    sha256s cover the weights): a location outside it, or a missing one, is a build error."""
    from harness.export.external import external_files

    for name in names:
        if not name.endswith(".onnx"):
            continue
        try:
            locations = external_files(directory / name)
        except Exception:  # noqa: BLE001 - not a parseable model: nothing of ours to check
            continue
        for location in locations:
            target = (directory / name).parent / location
            inside = target.resolve().is_relative_to(directory.resolve())
            if not inside or target.relative_to(directory).as_posix() not in names:
                raise RuntimeError(f"{directory / name}: external data {location!r} is not a file of the "
                                   "cache entry")
