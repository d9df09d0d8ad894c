"""Content-addressed artifact cache.

An artifact's key hashes everything that decides its bytes: the weights' sha256, the graph
contract, export settings, precision settings and library versions. A second run re-exports
nothing; two pytest-xdist workers never build the same entry twice (file lock); a partially
written or corrupted entry is detected (sha256 of every file, recorded at build) and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from filelock import FileLock

log = logging.getLogger("harness.cache")

META = "meta.json"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


class ArtifactCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def get_or_build(self, label: str, parts: dict[str, Any], build: Callable[[Path], object]) -> CacheEntry:
        """Return the entry for ``parts``; ``build(tmpdir)`` writes its files on a miss."""
        key = cache_key(parts)
        directory = self.root / f"{label}-{key[:16]}"
        self.root.mkdir(parents=True, exist_ok=True)
        entry = self._valid(directory, key)
        if entry is not None:
            return entry
        with FileLock(str(directory) + ".lock"):
            entry = self._valid(directory, key)
            if entry is not None:
                return entry
            if directory.exists():
                log.warning("cache entry %s is corrupt or incomplete; rebuilding", directory)
                shutil.rmtree(directory, ignore_errors=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{label}-", dir=self.root))
            try:
                start = time.perf_counter()
                build(tmp)
                seconds = time.perf_counter() - start
                files = {p.name: file_sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
                meta = {"key": key, "parts": parts, "files": files, "build_seconds": seconds,
                        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                (tmp / META).write_text(json.dumps(meta, indent=2, default=str))
                os.replace(tmp, directory)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
            return CacheEntry(directory, key, files, True, seconds)

    def _valid(self, directory: Path, key: str) -> CacheEntry | None:
        meta_path = directory / META
        if not meta_path.is_file():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("key") != key:
                return None
            for name, digest in meta["files"].items():
                if file_sha256(directory / name) != digest:
                    return None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return CacheEntry(directory, key, dict(meta["files"]), False, float(meta.get("build_seconds", 0.0)))
