"""Is a model directory whole? Recorded hashes for the zoo's cache, cheap checks for users' dirs.

Two kinds of model directory, two answers:

* a **zoo entry** the harness built into ``$HARNESS_CACHE/zoo`` carries a manifest
  (``.complete``: the sha256 of every file, written when the build finished). On first use in
  a process every file is hashed and compared; a changed, missing or unexpected file means
  the entry is rebuilt from its recipe, because a passing run on corrupted weights is worse
  than a slower one.
* a **user's directory** (``--models ./dir``, a config's ``path =``, a wheel-shipped model)
  has no recorded hashes and nothing to rebuild from, so it is held to what can be checked
  without loading it: ``config.json`` parses, there is a weight file, every safetensors
  header is readable and describes exactly the bytes that follow it (truncation, appended
  garbage and a damaged header are caught; flipped bytes inside the tensor data are not --
  only a recorded hash could see those, and the record's ``model_sha256`` names the weights
  that ran), and a tokenizer is there (``tokenizer.json``, when present, parses). A failure
  is one line (:class:`UsageError`, exit 2) before any case runs.

Both are memoised per process (the hashes by file identity, the checks by the directory's
listing and stat), so verifying on every use costs one read of each file per process.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from harness.core import UsageError
from harness.core.admission import admit_model_dir
from harness.core.cachedir import file_sha256, mismatch, tree_files

#: the zoo entry's completion marker, holding its manifest (and the name it is written under first)
MANIFEST = ".complete"
_MANIFEST_TMP = MANIFEST + ".tmp"
MANIFEST_FORMAT = "harness.zoo-entry/1"
#: weight files the harness loads (safetensors; pickles only on opt-in, see ``loading``)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
#: the files a tokenizer can be built from (fast ``tokenizer.json``, vocabularies, sentencepiece)
TOKENIZER_PATTERNS = ("tokenizer.json", "vocab.*", "*.model", "*.spm", "*.tiktoken")
#: a safetensors header larger than this is not a header (the format caps it at 100 MB)
_MAX_HEADER = 100 * 1024 * 1024

#: directory -> the listing (name, inode, size, mtime) of a user's directory that passed the checks
_CHECKED: dict[str, tuple[tuple[str, int, int, int], ...]] = {}


# -- zoo entries: recorded hashes -----------------------------------------------------------------
def write_manifest(directory: Path) -> dict[str, str]:
    """Record the sha256 of every file of a freshly built entry (the completion marker)."""
    files = {name: file_sha256(directory / name, fresh=True)
             for name in tree_files(directory, skip=(MANIFEST, _MANIFEST_TMP))}
    tmp = directory / _MANIFEST_TMP
    tmp.write_text(json.dumps({"format": MANIFEST_FORMAT, "files": files}, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, directory / MANIFEST)
    return files


class LegacyEntry(Exception):
    """An entry finished by harness <= 0.1: its marker records no hashes."""


def entry_problem(directory: Path) -> str | None:
    """None when the zoo entry is complete and every file matches its recorded sha256; else
    what is wrong, in words. Raises :class:`LegacyEntry` for a marker without hashes."""
    marker = directory / MANIFEST
    if not marker.is_file():
        return "not finished (no completion marker)" if directory.exists() else "not built"
    try:
        text = marker.read_text(encoding="utf-8")
    except OSError as exc:
        return f"unreadable completion marker ({exc})"
    if text.strip() == "ok":
        raise LegacyEntry(str(directory))
    try:
        data = json.loads(text)
        files = data["files"] if data.get("format") == MANIFEST_FORMAT else None
    except (ValueError, TypeError, KeyError, AttributeError):
        files = None
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return "unreadable completion marker"
    return mismatch(directory, files, skip=(MANIFEST, _MANIFEST_TMP), exact=True)


# -- users' directories: cheap structural checks ------------------------------------------------
def _listing(directory: Path) -> tuple[tuple[str, int, int, int], ...]:
    out = []
    for p in sorted(directory.iterdir()):
        if p.is_file():
            st = p.stat()
            out.append((p.name, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def check_model_dir(directory: Path) -> None:
    """Refuse (one line) a model directory that cannot be whole; see the module docstring."""
    key = str(directory.resolve())
    listing = _listing(directory)
    if _CHECKED.get(key) == listing:
        return
    names = [entry[0] for entry in listing]
    if "config.json" not in names:
        raise UsageError(f"{directory}: not an HF model directory (no config.json)")
    weights = [n for n in names if n.endswith(WEIGHT_SUFFIXES)]
    if not weights:
        raise UsageError(f"{directory}: cannot load model: no weight files (*.safetensors)")
    for name in weights:
        if name.endswith(".safetensors"):
            problem = safetensors_problem(directory / name)
            if problem:
                raise UsageError(f"{directory}: cannot load model: {name} is corrupt or incomplete ({problem})")

    admit_model_dir(directory)  # what the config and tokenizer declare, before either is parsed
    tokenizer_files = sorted({p.name for pattern in TOKENIZER_PATTERNS for p in directory.glob(pattern) if p.is_file()})
    if not tokenizer_files:
        raise UsageError(f"{directory}: cannot load tokenizer: no tokenizer files (tokenizer.json, vocab.*, *.model)")
    if "tokenizer.json" in tokenizer_files:
        try:
            json.loads((directory / "tokenizer.json").read_bytes())
        except (OSError, ValueError) as exc:
            raise UsageError(f"{directory}: cannot load tokenizer: tokenizer.json is not valid JSON "
                             f"({str(exc).splitlines()[0][:120]})") from None
    _CHECKED[key] = listing


def safetensors_problem(path: Path) -> str | None:
    """None when the file's header is readable and its tensors cover exactly the bytes after
    it (what the loader requires); else the problem. Reads the header only."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            raw = fh.read(8)
            if len(raw) < 8:
                return f"{size} bytes, shorter than a header"
            (length,) = struct.unpack("<Q", raw)
            if length > min(_MAX_HEADER, size - 8):
                return f"header length {length} does not fit a {size}-byte file"
            header = json.loads(fh.read(length))
    except (OSError, ValueError) as exc:
        return f"unreadable header: {str(exc).splitlines()[0][:120]}"
    if not isinstance(header, dict):
        return "header is not a JSON object"
    data = size - 8 - length
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            start, stop = (int(x) for x in info["data_offsets"])
        except (TypeError, KeyError, ValueError):
            return f"tensor {name!r} has no valid data_offsets"
        if not 0 <= start <= stop <= data:
            return f"tensor {name!r} lies outside the file ({stop} > {data} data bytes): truncated?"
        end = max(end, stop)
    if end != data:
        return f"tensors cover {end} of {data} data bytes"
    return None
