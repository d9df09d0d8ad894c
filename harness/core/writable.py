"""Output paths are checked before any work starts.

A run that computes for an hour and then cannot write its results has lost the hour; a check
that costs a millisecond up front turns that into one line and exit 2. The check is a real
probe (create a file, or the missing directories, then remove them again) rather than
``os.access``: ``root`` passes every permission bit test yet still cannot write under a
regular file, into ``/proc`` or onto a read-only mount, and the probe sees all of those.
Nothing is left behind, so a directory that would only be made on the first record still is.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from harness.core.errors import UsageError
from harness.core.units import binary_bytes

PROBE_PREFIX = ".harness-write-probe-"


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _nearest_existing(path: Path) -> Path:
    here = path
    while not here.exists() and here != here.parent:
        if here.is_symlink():  # a dangling symlink: writing would follow it somewhere else
            return here
        here = here.parent
    return here


def _probe_dir(path: Path, option: str, shown: Path) -> None:
    """``path`` is (or can become) a directory we can create files in; leaves no trace."""
    base = _nearest_existing(path)
    if base.exists() and not base.is_dir():
        where = "" if base == path else f" ({base} is a file)"
        raise UsageError(f"{option} {shown}: not a directory{where}")
    if not base.exists():
        raise UsageError(f"{option} {shown}: {base} is a dangling symlink")
    made: list[Path] = []
    try:
        missing = []
        here = path
        while here != base:
            missing.append(here)
            here = here.parent
        for directory in reversed(missing):
            directory.mkdir()
            made.append(directory)
        fd, probe = tempfile.mkstemp(prefix=PROBE_PREFIX, dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"{option} {shown}: not writable ({_reason(exc)})") from None
    finally:
        for directory in reversed(made):
            try:
                directory.rmdir()
            except OSError:
                pass


def ensure_writable_dir(path: str | os.PathLike[str], option: str) -> Path:
    """Refuse (``UsageError``, one line naming ``option``) an output directory that cannot be
    created or written: an existing file, a path under a file, a read-only place."""
    out = Path(path)
    _probe_dir(out, option, out)
    return out


def ensure_writable_file(path: str | os.PathLike[str], option: str) -> Path:
    """Refuse an output file that cannot be written: a directory, under a file, read-only."""
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"{option} {out}: is a directory, expected a file path")
    if out.exists():
        try:
            with out.open("a"):  # append mode, nothing written: contents and mtime unchanged
                pass
        except OSError as exc:
            raise UsageError(f"{option} {out}: not writable ({_reason(exc)})") from None
        return out
    _probe_dir(out.parent if str(out.parent) else Path("."), option, out)
    return out


# -- free space ------------------------------------------------------------------------------------
#: what a run directory needs at the least, whatever it runs: records, summary.md, junit.xml,
#: report.html and the side files of a few failing cases (measured: a 12-case run writes ~0.3 MiB;
#: a repro bundle that copies its ONNX file holds up to 32 MiB, ``repro_bundles = auto``)
OUT_FLOOR_BYTES = 64 << 20


def free_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes an unprivileged writer may still use on the filesystem that holds (or would hold)
    ``path`` (``f_bavail``: root's reserved blocks do not count)."""
    base = _nearest_existing(Path(path))
    stat = os.statvfs(base if base.exists() else Path("."))
    return stat.f_bavail * stat.f_frsize


def ensure_free_space(path: str | os.PathLike[str], needed: int, option: str, what: str) -> None:
    """Refuse (one line naming ``option``, both numbers) a place with less than ``needed``
    bytes free: a run that fills the disk an hour in has lost the hour."""
    free = free_bytes(path)
    if free < needed:
        raise UsageError(f"{option} {path}: only {binary_bytes(free)} free, {what} needs about "
                         f"{binary_bytes(needed)} (free some space or point {option} elsewhere)")


def no_space(exc: BaseException) -> bool:
    """Whether ``exc`` is the filesystem saying it is full (ENOSPC, or EDQUOT: over quota)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class DiskFull(Exception):
    """A write the run needed failed because the filesystem is full: what, and where."""

    def __init__(self, path: str | os.PathLike[str], reason: str = "No space left on device") -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason
