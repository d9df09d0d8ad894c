"""The reference cache: PyTorch FP32 outputs and reference decodes kept on disk by content.

Every case compares a variant with PyTorch FP32, and that reference is the same on every
rerun until something that decides it changes. Recomputing it is what made a warm rerun cost
65% of a cold one here, and on a real model (or a GPU fleet) it is the expensive part. So a
reference is stored under a key that hashes **everything that decides its bytes**:

* the weights (``weights_sha256``) and every other file of the model directory (config,
  tokenizer: they decide the feeds);
* what is fed: the corpus texts of each batch (for family-built feeds) or the feeds'
  bytes, dtypes and shapes (for caller-built feeds), plus the corpus sha256 and the selected
  indices of a decode;
* how it is computed: the graph contract, the family class and the digest of its source file,
  the decode settings and batch size, the torch thread count;
* the environment: torch / transformers / tokenizers / numpy versions, the device and
  machine, the harness version and this module's format number.

Change any of those and the key changes: a stale reference is never read. Entries are built
and verified like exported artifacts (``harness.export.cache.ArtifactCache`` over
``harness.core.cachedir``): built under a file lock into a temporary directory and renamed into
place, every file's sha256 recorded and re-checked on use; a corrupt entry is recomputed.
``--harness-fresh-references`` (or ``HARNESS_FRESH_REFERENCES=1``) recomputes and rewrites.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harness import __version__
from harness.core.cachedir import lock_for
from harness.export.cache import ArtifactCache, cache_key
from harness.runners.base import GraphRunner

log = logging.getLogger("harness.cache")

#: bump when what an entry holds, or how a reference is computed, changes
FORMAT = 1
ARRAYS = "arrays.npz"
DECODED = "decoded.json"

Arrays = dict[str, np.ndarray]


def feeds_digest(feeds: Mapping[str, np.ndarray]) -> str:
    """sha256 over names, dtypes, shapes and bytes of a feed dict (order-independent)."""
    h = hashlib.sha256()
    for name in sorted(feeds):
        array = np.ascontiguousarray(feeds[name])
        h.update(f"{name}:{array.dtype}:{array.shape}".encode())
        h.update(array.tobytes())
    return h.hexdigest()


def texts_digest(texts: Sequence[Sequence[str]] | Sequence[str]) -> str:
    return hashlib.sha256(json.dumps(list(texts), ensure_ascii=False).encode()).hexdigest()


@lru_cache(maxsize=None)
def cpu_identity() -> str:
    """The CPU model and its instruction-set flags (digest): ONNX Runtime's MLAS and PyTorch's
    oneDNN pick kernels by ISA (AVX2, AVX-512, AMX...), so the same file gives other float
    rounding on another CPU. A cache restored onto another runner type (CI caches often are)
    must not replay this machine's numbers there."""
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:  # not Linux: the platform's own description
        return f"{platform.machine()}:{platform.processor()}"
    fields: dict[str, str] = {}
    for line in info.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "flags", "Features", "CPU implementer", "CPU part") and key not in fields:
            fields[key] = value.strip()
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


@lru_cache(maxsize=None)
def environment() -> dict[str, str]:
    """Library versions and machine: a reference computed elsewhere is another reference."""
    import torch

    versions = {"format": str(FORMAT), "torch": torch.__version__, "numpy": np.__version__,
                "machine": platform.machine(), "cpu": cpu_identity(), "device": "cpu"}
    for name in ("transformers", "tokenizers"):
        try:
            versions[name] = __import__(name).__version__
        except ImportError:  # pragma: no cover  (a custom-family user without transformers)
            versions[name] = "absent"

    versions["harness"] = __version__
    return versions


def model_files_digest(path: Path, weight_suffixes: Sequence[str]) -> str:
    """sha256 over the model directory's non-weight files (config, tokenizer, vocabulary):
    with ``weights_sha256`` it pins everything that decides feeds and outputs."""
    h = hashlib.sha256()
    for f in sorted(p for p in Path(path).rglob("*") if p.is_file() and p.suffix not in weight_suffixes):
        h.update(f.relative_to(path).as_posix().encode())
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def enabled_by_env() -> bool:
    return os.environ.get("HARNESS_FRESH_REFERENCES", "").strip().lower() not in ("1", "true", "yes")


class ReferenceCache:
    """``<cache>/references/<label>-<key16>/`` entries; ``fresh`` recomputes and rewrites.

    Counts hits and misses (``stats``) so a run can say what its references cost."""

    def __init__(self, root: Path, *, fresh: bool = False) -> None:
        self.store = ArtifactCache(Path(root))
        self.fresh = fresh or not enabled_by_env()
        self.hits = 0
        self.misses = 0

    def _parts(self, kind: str, parts: Mapping[str, Any]) -> dict[str, Any]:
        return {"kind": kind, **parts, "env": environment()}

    def arrays(self, label: str, parts: Mapping[str, Any], compute: Callable[[], list[Arrays]]) -> list[Arrays]:
        """A list of array dicts (one per batch) for ``parts``, computed by ``compute`` on a miss."""
        def write(batches: list[Arrays], tmp: Path) -> None:
            flat = {f"{i}/{name}": np.ascontiguousarray(a) for i, b in enumerate(batches) for name, a in b.items()}
            np.savez(tmp / ARRAYS, __count__=np.array(len(batches)), **flat)  # type: ignore[arg-type]

        value: list[Arrays] = self._cached("arrays", label, parts, compute, write, lambda d: _read_arrays(d / ARRAYS))
        return value

    def json(self, label: str, parts: Mapping[str, Any], compute: Callable[[], Any]) -> Any:
        """A JSON value for ``parts`` (a reference decode), computed by ``compute`` on a miss."""
        def write(value: Any, tmp: Path) -> None:
            (tmp / DECODED).write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")

        return self._cached("json", label, parts, compute, write,
                            lambda d: json.loads((d / DECODED).read_text(encoding="utf-8")))

    def _cached(self, kind: str, label: str, parts: Mapping[str, Any], compute: Callable[[], Any],
                write: Callable[[Any, Path], None], read: Callable[[Path], Any]) -> Any:
        """The one get-or-build of both entry kinds: a miss computes, writes into the entry's
        temp directory and returns what it computed (never re-read); a hit reads the verified entry."""
        computed: list[Any] = []

        def build(tmp: Path) -> None:
            value = compute()
            computed.append(value)
            write(value, tmp)

        full = self._parts(kind, parts)
        if self.fresh:
            self._drop(label, full)
        entry = self.store.get_or_build(label, full, build)
        if computed:
            self.misses += 1
            return computed[0]
        self.hits += 1
        return read(entry.directory)

    def _drop(self, label: str, parts: dict[str, Any]) -> None:
        """Fresh mode: remove this key's entry (under its lock) so it is recomputed once."""

        directory = self.store.root / f"{label}-{cache_key(parts)[:16]}"
        if directory.exists():
            with lock_for(directory):
                shutil.rmtree(directory, ignore_errors=True)


def _read_arrays(path: Path) -> list[Arrays]:
    with np.load(path, allow_pickle=False) as data:
        count = int(data["__count__"])
        out: list[Arrays] = [{} for _ in range(count)]
        for key in data.files:
            if key == "__count__":
                continue
            index, name = key.split("/", 1)
            out[int(index)][name] = data[key]
    return out


#: an output-cache entry for feeds the runtime refused: the first line of its error, replayed as
#: the same refusal (a shape probe outside an export's range fails the same way warm as cold)
ERROR_KEY = "__error__"


def error_outputs(exc: BaseException) -> Arrays:
    text = str(exc).strip()
    return {ERROR_KEY: np.array(text.splitlines()[0][:2000] if text else type(exc).__name__)}


def error_text(outputs: Arrays) -> str | None:
    """The cached refusal of these outputs, or None (0-d when computed, as stored when read)."""
    if ERROR_KEY not in outputs:
        return None
    return str(np.asarray(outputs[ERROR_KEY]).reshape(-1)[0])


class ReplayedError(RuntimeError):
    """The runtime refused these feeds when the outputs were cached (the message is its error)."""


class ReplayRunner(GraphRunner):
    """A ``GraphRunner`` that answers from outputs the output cache holds, by the feeds' digest;
    feeds it has not seen load the real runner (``load``) and run it."""

    def __init__(self, outputs: Mapping[str, Arrays], load: Callable[[], Any], path: str | None = None,
                 replayed: bool = True) -> None:
        self._outputs = dict(outputs)
        self._load = load
        self._real: Any = None
        self.path = path  # the artifact file, for the judge's lint (as a real ONNX runner has)
        self.replayed = replayed  # False: the outputs were computed just now (a miss) by the real runner

    def run(self, feeds: Mapping[str, np.ndarray]) -> Arrays:
        digest = feeds_digest(dict(feeds))
        if digest in self._outputs:
            found = self._outputs[digest]
            refused = error_text(found)
            if refused is not None:
                raise ReplayedError(refused)
            return found
        if self._real is None:
            self._real = self._load()
        out: Arrays = self._real.run(feeds)
        return out

    def _run(self, feeds: dict[str, np.ndarray]) -> Arrays:  # pragma: no cover - run() answers
        return self.run(feeds)

    def close(self) -> None:
        if self._real is not None:
            self._real.close()
            self._real = None
