"""What is in ``$HARNESS_CACHE``, whether it is intact, and removing what is no longer used.

A nightly job or a CI runner with a persistent cache (``actions/cache``) accumulates an entry for
every model version, precision, export setting and reference corpus it ever judged: nothing in a
run deletes an entry, because an entry another run still uses must never vanish under it. This
module is the deliberate, separate step (``harness cache info | verify | prune``) that does.

The three areas and what an entry is there are declared once in :data:`AREAS`; every entry is a
directory ``<area>/<name>`` beside its build lock ``<name>.lock`` (``harness.core.cachedir``).

*Last use* is the lock file's modification time: a build opens the lock with ``O_TRUNC`` and every
cache hit touches it (``cachedir.mark_used``), so LRU pruning needs no extra file inside the entry
(whose file list is hashed) and no clock of its own. An entry is removed only while its lock can
be taken without waiting — a build in progress is never pruned — and is first renamed to a
temporary name the sweeper recognises, so a prune that dies half-way leaves nothing that looks
like an intact entry. Lock files themselves are kept (empty files; deleting one that another
process is about to open would let two builders hold "the" lock at once).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from filelock import FileLock, Timeout

from harness.core import UsageError
from harness.core.cachedir import temp_dir_for
from harness.core.units import binary_bytes
from harness.export.cache import entry_problem


def _zoo_problem(directory: Path) -> str | None:
    from harness.zoo.integrity import LegacyEntry, entry_problem

    try:
        return entry_problem(directory)
    except LegacyEntry:
        return None  # adopted (hashed) on its next use; structurally checked then


def _store_problem(directory: Path) -> str | None:
    return entry_problem(directory)


@dataclass(frozen=True)
class Area:
    name: str
    what: str
    problem: Callable[[Path], str | None]  # None: intact; else what is wrong, in words


#: the cache's areas, in the order they are listed (each a directory under the cache root)
AREAS: tuple[Area, ...] = (
    Area("zoo", "built-in models built from their recipes", _zoo_problem),
    Area("artifacts", "exported ONNX artifacts (FP32, FP16, INT8) and engines", _store_problem),
    Area("references", "PyTorch reference outputs and deterministic variants' outputs", _store_problem),
    Area("verdicts", "finished cases a rerun replays (reports and side files), passed intake checks",
         _store_problem),
)
AREA_NAMES = tuple(a.name for a in AREAS)


@dataclass(frozen=True)
class Entry:
    area: str
    path: Path
    bytes: int
    last_used: float  # epoch seconds

    @property
    def lock(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def age_days(self, now: float) -> float:
        return max(0.0, now - self.last_used) / 86400


def areas(selected: Sequence[str] | None) -> list[Area]:
    """The areas named (all when none), refusing an unknown name with the valid ones."""
    if not selected:
        return list(AREAS)
    unknown = [a for a in selected if a not in AREA_NAMES]
    if unknown:
        raise UsageError(f"--area: unknown area {unknown[0]!r}; valid: {', '.join(AREA_NAMES)}")
    return [a for a in AREAS if a.name in selected]


def _tree_bytes(directory: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def _last_used(directory: Path) -> float:
    lock = directory.with_name(directory.name + ".lock")
    for candidate in (lock, directory):
        try:
            return candidate.stat().st_mtime
        except OSError:
            continue
    return 0.0


def entries(root: Path, selected: Iterable[Area]) -> list[Entry]:
    """Every finished-looking entry (non-hidden directory) of the selected areas, oldest use first."""
    found = []
    for area in selected:
        base = root / area.name
        if not base.is_dir():
            continue
        for path in base.iterdir():
            if path.name.startswith(".") or path.is_symlink() or not path.is_dir():
                continue
            found.append(Entry(area.name, path, _tree_bytes(path), _last_used(path)))
    return sorted(found, key=lambda e: (e.last_used, str(e.path)))


def problem(entry: Entry) -> str | None:
    area = next(a for a in AREAS if a.name == entry.area)
    return area.problem(entry.path)


def remove(entry: Entry) -> bool:
    """Delete ``entry`` if no builder holds its lock right now; False when it is in use."""
    lock = FileLock(str(entry.lock))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    try:
        if not entry.path.exists():
            return True
        doomed = temp_dir_for(entry.path)  # ``.<name>.tmp-*``: swept if we die before rmtree
        os.replace(entry.path, doomed / entry.path.name)
        shutil.rmtree(doomed, ignore_errors=True)
        return not entry.path.exists()
    finally:
        lock.release()


@dataclass(frozen=True)
class PrunePlan:
    remove: list[Entry]
    keep: list[Entry]

    @property
    def freed(self) -> int:
        return sum(e.bytes for e in self.remove)


def plan_prune(found: Sequence[Entry], *, older_than_s: float | None, max_bytes: int | None,
               now: float | None = None) -> PrunePlan:
    """Least recently used first: every entry unused for longer than ``older_than_s``, then more
    of the oldest until what is left fits in ``max_bytes``."""
    now = time.time() if now is None else now
    ordered = sorted(found, key=lambda e: (e.last_used, str(e.path)))
    doomed = [e for e in ordered if older_than_s is not None and now - e.last_used > older_than_s]
    if max_bytes is not None:
        left = sum(e.bytes for e in ordered) - sum(e.bytes for e in doomed)
        for e in ordered:
            if left <= max_bytes:
                break
            if e not in doomed:
                doomed.append(e)
                left -= e.bytes
    chosen = {e.path for e in doomed}
    return PrunePlan(doomed, [e for e in ordered if e.path not in chosen])


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_duration(text: str, option: str) -> float:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s`` (a bare number is days) -> seconds."""
    match = _DURATION.match(text)
    if not match:
        raise UsageError(f"{option}: {text!r} is not a duration (e.g. 30d, 12h, 90m, 2w)")
    return float(match[1]) * _DURATION_UNITS[(match[2] or "d").lower()]


def parse_size(text: str, option: str) -> int:
    """``10G``, ``500MB``, ``2GiB`` (binary units; a bare number is bytes) -> bytes."""
    match = _SIZE.match(text)
    if not match:
        raise UsageError(f"{option}: {text!r} is not a size (e.g. 10G, 500M, 2GiB)")
    return int(float(match[1]) * _SIZE_UNITS[(match[2] or "b")[0].lower()])


def human_bytes(n: float) -> str:
    return binary_bytes(n, digits=1)
