"""Cache directories that are built whole or not at all, verified by hash, and never leak.

Both caches (zoo models under ``$HARNESS_CACHE/zoo``, exported artifacts under
``$HARNESS_CACHE/artifacts``) build an entry ``<root>/<name>`` the same way: under the
entry's file lock ``<root>/<name>.lock``, into a temporary directory
``<root>/.<name>.tmp-XXXXXXXX`` that is renamed into place when complete. The lock is what
tells a live build from a dead one: it is an ``flock`` held for the whole build and released
by the kernel when the builder dies (SIGKILL included), so a temporary directory whose
entry's lock can be taken right now belongs to nobody and is swept. No pid files, no ages:
a concurrent run still writing its temporary directory holds the lock and is left alone.

Hashing helpers live here too: a file's sha256 is computed at most once per process for the
same bytes on disk (the memo is keyed by the file's identity and stat, so a rewritten file is
hashed again) -- verifying an entry on every use costs one read per file per process.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import logging
import os
import re
import shutil
import tempfile
from contextlib import ExitStack
from functools import lru_cache
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

log = logging.getLogger("harness.cache")

#: ``.<entry>.tmp-<mkdtemp suffix>``: a temporary directory building ``<entry>``
_TMP = re.compile(r"^\.(?P<entry>.+)\.tmp-[a-z0-9_]+$")
#: ``.<label>-<8 mkdtemp chars>``: the naming of harness <= 0.1 (entry = ``<label>-<hash>``)
_LEGACY_TMP = re.compile(r"^\.(?P<label>.+)-[a-z0-9_]{8}$")

#: (device, inode, size, mtime_ns, ctime_ns) -> sha256: bytes already hashed by this process (a
#: rename keeps the key, so an entry hashed while built is not read again once moved into place)
_SHA_MEMO: dict[tuple[int, int, int, int, int], str] = {}
#: roots already swept by this process (a sweep is a directory listing; once is enough)
_SWEPT: set[str] = set()
#: entries whose use this process has already recorded (``mark_used``)
_USED: set[str] = set()



def cache_root() -> Path:
    """Where built models and exported artifacts live (``HARNESS_CACHE``, else
    ``~/.cache/model-harness``): read here, below every layer, so a command that only looks an
    entry up (``baseline compare --perf``) need not import the model zoo (and torch)."""
    env = os.environ.get("HARNESS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "model-harness"

def lock_for(entry: Path) -> FileLock:
    """The lock every builder of ``entry`` holds while it writes."""
    return FileLock(str(entry) + ".lock")


def temp_dir_for(entry: Path) -> Path:
    """A fresh temporary directory next to ``entry``, named so a sweep can find its lock."""
    return Path(tempfile.mkdtemp(prefix=f".{entry.name}.tmp-", dir=entry.parent))


def _stat_key(path: Path) -> tuple[int, int, int, int, int]:
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_sha256(path: Path, *, fresh: bool = False) -> str:
    """sha256 of a file's bytes, streamed; read once per process while the file is unchanged.
    ``fresh``: a file just written (hash it whatever the memo says: a recycled inode with the
    same size and timestamps must not inherit the digest of the file it replaced)."""
    key = _stat_key(path)
    digest = None if fresh else _SHA_MEMO.get(key)
    if digest is None:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        digest = h.hexdigest()
        _SHA_MEMO[key] = digest
    return digest


def tree_files(directory: Path, *, skip: tuple[str, ...] = ()) -> list[str]:
    """Every regular file under ``directory`` (relative POSIX names, sorted), minus ``skip``."""
    names = [p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()]
    return sorted(n for n in names if n not in skip)


def mismatch(directory: Path, recorded: dict[str, str], *, skip: tuple[str, ...] = (),
             exact: bool = False) -> str | None:
    """None when ``directory`` holds the files of ``recorded`` with those sha256s (and, when
    ``exact``, nothing else); else what differs (the first missing, unexpected or changed
    file), for the rebuild message."""
    missing = sorted(name for name in recorded if not (directory / name).is_file())
    if missing:
        return f"{missing[0]} is missing"
    if exact:
        extra = sorted(set(tree_files(directory, skip=skip)) - set(recorded))
        if extra:
            return f"{extra[0]} is not part of the entry"
    for name, digest in recorded.items():
        try:
            if file_sha256(directory / name) != digest:
                return f"{name} does not match its recorded sha256"
        except OSError as exc:
            return f"{name} is unreadable ({exc.strerror or exc})"
    return None


def sweep_orphans(root: Path, *, force: bool = False) -> list[Path]:
    """Remove temporary directories under ``root`` whose builder is gone (their entry's lock is
    free); once per process per root unless ``force``. Returns what was removed."""
    key = str(Path(root).resolve())
    if (key in _SWEPT and not force) or not root.is_dir():
        return []
    _SWEPT.add(key)
    removed = []
    for candidate in sorted(root.iterdir()):
        if not candidate.name.startswith(".") or candidate.is_symlink() or not candidate.is_dir():
            continue
        locks = _locks_of(root, candidate.name)
        if locks is None:
            continue
        if _remove_if_unlocked(candidate, locks):
            removed.append(candidate)
    if removed:
        log.warning("removed %d orphaned temporary cache director%s under %s (a build that died)",
                    len(removed), "y" if len(removed) == 1 else "ies", root)
    return removed


def _locks_of(root: Path, name: str) -> list[Path] | None:
    """The locks whose holder could be writing temporary directory ``name`` (None: not ours)."""
    match = _TMP.match(name)
    if match:
        return [root / f"{match['entry']}.lock"]
    legacy = _LEGACY_TMP.match(name)
    if legacy:  # the entry's hash is not in the name: any entry of that label may be its builder
        prefix = legacy["label"] + "-"
        return [p for p in root.iterdir() if p.name.startswith(prefix) and p.name.endswith(".lock")]
    return None


def _remove_if_unlocked(candidate: Path, locks: list[Path]) -> bool:
    with ExitStack() as held:
        for lock_path in locks:
            lock = FileLock(str(lock_path))
            try:
                lock.acquire(timeout=0)
            except Timeout:
                return False  # a live build: its temporary directory is in use
            held.callback(lock.release)
        if not candidate.exists():
            return False
        shutil.rmtree(candidate, ignore_errors=True)
        return not candidate.exists()
    return False  # pragma: no cover  (ExitStack does not swallow)


def mark_used(entry: Path) -> None:
    """Record that ``entry`` was just used (its lock file's mtime; once per process per entry),
    so ``harness cache prune`` removes the least recently used entries, not the oldest built."""
    key = str(entry)
    if key in _USED:
        return
    _USED.add(key)
    try:
        os.utime(str(entry) + ".lock")
    except OSError:  # no lock file (an entry copied in by hand) or a read-only cache: nothing to record
        pass


def replace_dir(tmp: Path, target: Path) -> None:
    """Move a finished temporary directory into place (an older ``target`` is removed first)."""
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)


@lru_cache(maxsize=None)
def package_digest(package: str) -> str:
    """sha256 of every ``.py`` file of a package (the decoding loops): editing them
    invalidates the reference decodes they produced."""
    root = Path(importlib.import_module(package).__file__ or ".").parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode())
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


@lru_cache(maxsize=None)
def source_digest(obj: Any) -> str:
    """sha256 of the file that defines ``obj`` (a family class): editing how a reference is
    computed invalidates it, also in a development checkout where the version stays."""
    try:
        path = inspect.getsourcefile(obj)
    except TypeError:
        path = None
    if not path:
        return "unknown"
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
