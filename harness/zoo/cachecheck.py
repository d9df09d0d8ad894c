"""The cache is checked before work like an output is.

A read-only, full or misplaced ``$HARNESS_CACHE`` used to surface as an ``error`` verdict with
a pytest traceback (``OSError: [Errno 30] Read-only file system: '.../zoo'``) in every case.
Checked up front it is one line and exit 2. A read-only cache that already holds every zoo
model the run builds keeps working (a CI job may mount a warmed cache read-only): nothing
needs writing to it as long as the artifacts are there too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from harness.core import UsageError
from harness.core.writable import ensure_free_space, ensure_writable_dir
from harness.zoo.base import ModelSpec, cache_root, zoo_entry

#: what the cache needs free at the least (the zoo's tiny models and their FP32/FP16/INT8 exports
#: take ~20 MiB; an export writes its files into a temporary directory before renaming it)
CACHE_FLOOR_BYTES = 64 << 20


def _weights_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.glob("*.safetensors") if p.is_file())


def check_cache(specs: Iterable[ModelSpec], precisions: int, option: str, root: Path | None = None) -> None:
    """Refuse a cache that is not a directory, cannot be written while it lacks a model the run
    builds, or lacks the space for the exports: ``option`` names where it came from."""
    root = Path(root or cache_root()).expanduser()
    specs = list(specs)
    missing = [s for s in specs if s.path is None and not (zoo_entry(s, root) / ".complete").is_file()]
    try:
        ensure_writable_dir(root, option)
    except UsageError as exc:
        if root.is_dir() and not missing:
            return  # read-only but warm: every model is there (exports must be too, or those cases error)
        lacking = f" and lacks {', '.join(s.name for s in missing)}" if missing and root.is_dir() else ""
        raise UsageError(f"{exc}{lacking}: the cache must be writable, or already hold every model the "
                         "run builds") from None
    # exports: every precision of every model, a few times the FP32 weights at most
    needed = CACHE_FLOOR_BYTES + sum(_weights_bytes(s.path) * max(1, precisions) for s in specs if s.path)
    ensure_free_space(root, needed, option, "the cache (models and exported artifacts)")
