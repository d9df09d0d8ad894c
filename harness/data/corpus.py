"""Versioned evaluation corpora.

A regression gate is only as trustworthy as its inputs: if a corpus silently changes,
every score comparison across runs becomes meaningless. So every shipped corpus is
pinned by sha256 and line count in ``harness/data/corpora/MANIFEST.json`` and verified on load.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.cachedir import file_sha256  # re-exported: what the manifest pins

MANIFEST_NAME = "MANIFEST.json"
MANIFEST_SCHEMA = "harness.datasets/1"
FORMATS = ("txt", "tsv")


class CorpusError(ValueError):
    """A corpus cannot be used; the message is one line naming the file and the problem."""


@dataclass(frozen=True)
class Corpus:
    """Loaded, validated corpus: sources always, references only for parallel (.tsv) data."""

    name: str
    path: Path
    sha256: str
    sources: list[str]
    references: list[str] | None

    def __len__(self) -> int:
        return len(self.sources)


def datasets_dir() -> Path:
    """Datasets root: ``$HARNESS_DATASETS`` if set, else the corpora shipped inside the package
    (``harness/data/corpora``): a run needs them wherever the harness is installed, so they are
    package data, not files of the source checkout."""
    env = os.environ.get("HARNESS_DATASETS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / "corpora"




def read_manifest(root: Path | None = None) -> dict[str, Any]:
    """Parse and structurally check ``MANIFEST.json`` under ``root``."""
    root = Path(root) if root is not None else datasets_dir()
    path = root / MANIFEST_NAME
    if not path.is_file():
        raise CorpusError(f"{path}: manifest not found")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorpusError(f"{path}: manifest is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != MANIFEST_SCHEMA:
        raise CorpusError(f"{path}: expected \"schema\": \"{MANIFEST_SCHEMA}\"")
    if not isinstance(manifest.get("corpora"), dict):
        raise CorpusError(f"{path}: \"corpora\" must be an object")
    return manifest


def list_corpora(root: Path | None = None) -> list[str]:
    """Names of every corpus in the manifest, sorted."""
    return sorted(read_manifest(root)["corpora"])


def resolve_entry_path(root: Path, name: str, entry: dict[str, Any]) -> Path:
    """The corpus file for a manifest entry, refusing paths that leave ``root``."""
    rel = entry.get("file")
    if not isinstance(rel, str) or not rel:
        raise CorpusError(f"{root / MANIFEST_NAME}: corpus {name!r} has no \"file\"")
    if Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise CorpusError(
            f"{root / MANIFEST_NAME}: corpus {name!r} file {rel!r} escapes the datasets root"
        )
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()):
        raise CorpusError(
            f"{root / MANIFEST_NAME}: corpus {name!r} file {rel!r} escapes the datasets root"
        )
    return path


def load_corpus(name: str, root: Path | None = None) -> Corpus:
    """Load a manifest corpus, verifying sha256, line count, and line format."""
    root = Path(root) if root is not None else datasets_dir()
    corpora = read_manifest(root)["corpora"]
    if name not in corpora:
        close = difflib.get_close_matches(name, list(corpora), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        known = ", ".join(sorted(corpora)) or "none"
        raise CorpusError(f"{root / MANIFEST_NAME}: unknown corpus {name!r}{hint} (known: {known})")
    entry = corpora[name]
    if not isinstance(entry, dict):
        raise CorpusError(f"{root / MANIFEST_NAME}: corpus {name!r} entry must be an object")
    path = resolve_entry_path(root, name, entry)
    if not path.is_file():
        raise CorpusError(f"{path}: corpus file {name!r} is missing")
    actual = file_sha256(path)
    if actual != entry.get("sha256"):
        raise CorpusError(
            f"{path}: sha256 mismatch for corpus {name!r}: expected {entry.get('sha256')}, "
            f"actual {actual} (run scripts/update_manifest.py if the change is intended)"
        )
    fmt = entry.get("format") or _format_from_suffix(path)
    corpus = _parse(path, name, fmt, actual)
    expected_lines = entry.get("lines")
    if expected_lines is not None and expected_lines != len(corpus.sources):
        raise CorpusError(
            f"{path}: line count mismatch for corpus {name!r}: manifest says {expected_lines}, "
            f"file has {len(corpus.sources)}"
        )
    return corpus


def corpus_by_name(name: str) -> Corpus:
    """A model's corpus: a manifest name, or a user's .txt/.tsv file (the one place that tells
    them apart)."""
    return load_corpus_file(Path(name)) if name.endswith((".txt", ".tsv")) else load_corpus(name)


def load_corpus_file(path: Path | str, fmt: str | None = None) -> Corpus:
    """Load a user corpus not in the manifest (same format checks, no pinned hash)."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: corpus file not found")
    return _parse(path, path.stem, fmt or _format_from_suffix(path), file_sha256(path))


def _format_from_suffix(path: Path) -> str:
    suffix = path.suffix.lstrip(".").lower()
    if suffix not in FORMATS:
        raise CorpusError(f"{path}: unknown corpus format {suffix!r} (expected .txt or .tsv)")
    return suffix


def _parse(path: Path, name: str, fmt: str, sha256: str) -> Corpus:
    """Split a corpus file into lines and validate each; errors name file:line."""
    if fmt not in FORMATS:
        raise CorpusError(f"{path}: unknown corpus format {fmt!r} (expected one of {FORMATS})")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    if text.startswith("\ufeff"):
        raise CorpusError(f"{path}: starts with a byte-order mark; save as plain UTF-8")
    if "\r" in text:
        raise CorpusError(f"{path}: contains carriage returns; use Unix line endings")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise CorpusError(f"{path}: corpus is empty")
    sources: list[str] = []
    references: list[str] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            raise CorpusError(f"{path}:{lineno}: empty line")
        if fmt == "txt":
            sources.append(line)
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise CorpusError(
                f"{path}:{lineno}: expected exactly one tab (source<TAB>reference), "
                f"found {len(fields) - 1}"
            )
        src, ref = fields
        if not src.strip() or not ref.strip():
            raise CorpusError(f"{path}:{lineno}: empty source or reference")
        sources.append(src)
        references.append(ref)
    return Corpus(
        name=name,
        path=path,
        sha256=sha256,
        sources=sources,
        references=references if fmt == "tsv" else None,
    )
