"""The artifacts a baseline blessed: recorded by cache key, kept beside it on request, found again.

A recorded baseline holds numbers; re-timing it beside a candidate (``harness.gate.retime``)
needs the very files that were timed. ``baseline save`` therefore records, per variant, every
file of each graph its latency metrics timed -- name, sha256, size and the export cache's key
and entry folder (``ArtifactCache``: ``<label>-<key16>``) -- and with ``--keep-artifacts``
copies them into ``STORE/NAME/artifacts/``. A later ``baseline compare --perf`` looks for each
file in the kept copy first, then in this machine's cache by key (a CI cache restored by
``actions/cache`` holds them), and uses a file only when its sha256 is the blessed one.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.core.cachedir import cache_root, file_sha256
from harness.export.cache import ArtifactCache
from harness.results.record import Record, RecordLike

#: the folder of a baseline that holds its kept artifacts
ARTIFACTS_DIR = "artifacts"


@dataclass(frozen=True)
class TimedFile:
    """One file of a timed graph (``name``: ``graph/model.onnx``, as the record's ``artifacts``)."""

    name: str
    sha256: str
    bytes: int
    path: str = ""
    cache_key: str | None = None
    cache_entry: str | None = None
    #: relative to the baseline folder, when ``--keep-artifacts`` copied it
    kept: str | None = None

    @property
    def graph(self) -> str:
        return self.name.split("/", 1)[0]

    @property
    def relative(self) -> str:
        """The file's name inside its entry (``model.onnx``, ``model.onnx.data``)."""
        return self.name.split("/", 1)[-1]

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "") and k != "path"}

    @classmethod
    def parse(cls, name: str, info: Mapping[str, Any]) -> TimedFile | None:
        digest = info.get("sha256")
        if not isinstance(digest, str) or not digest:
            return None
        return cls(name, digest, int(info.get("bytes") or 0), str(info.get("path") or ""),
                   info.get("cache_key") or None, info.get("cache_entry") or None, info.get("kept") or None)


def timed_graphs(record: Record) -> dict[str, Mapping[str, Any]]:
    """latency key -> its entry (``graph``, ``batch_size``, ``seq_len``, samples) of one record."""
    return {str(k): v for k, v in record.perf.items()
            if str(k).startswith("latency_ms") and isinstance(v, Mapping) and v.get("graph")}


def timed_files(records: Iterable[RecordLike]) -> dict[str, dict[str, TimedFile]]:
    """variant -> {name: file} for every file of a graph its latency metrics timed."""
    out: dict[str, dict[str, TimedFile]] = {}
    for rec in map(Record.coerce, records):
        graphs = {entry["graph"] for entry in timed_graphs(rec).values()}
        if not graphs or not rec.variant:
            continue
        for name, info in rec.artifacts.items():
            parsed = TimedFile.parse(name, info) if isinstance(info, Mapping) else None
            if parsed is not None and parsed.graph in graphs:
                out.setdefault(rec.variant, {})[name] = parsed
    return out


def _group(f: TimedFile) -> str:
    """The kept folder of a file: its cache entry's name (so external data stays beside its
    graph), or the graph's own folder's sha-named stand-in for files built elsewhere."""
    if f.cache_entry and "/" not in f.cache_entry and not f.cache_entry.startswith("."):
        return f.cache_entry
    return f"{f.graph}-{f.sha256[:16]}"


def keep_plan(files: Mapping[str, Mapping[str, TimedFile]]) -> tuple[dict[str, dict[str, TimedFile]], list[str]]:
    """Each file with its kept location filled in, and what cannot be kept (its bytes are gone
    or changed since the run): the plan ``baseline save --keep-artifacts`` checks before writing."""
    planned: dict[str, dict[str, TimedFile]] = {}
    problems: list[str] = []
    for variant, named in files.items():
        for name, f in named.items():
            source = Path(f.path)
            if not f.path or not source.is_file():
                problems.append(f"{variant} {name}: {f.path or 'no path recorded'} is gone")
                continue
            if file_sha256(source) != f.sha256:
                problems.append(f"{variant} {name}: {source} changed since the run (sha256 differs)")
                continue
            kept = f"{ARTIFACTS_DIR}/{_group(f)}/{f.relative}"
            planned.setdefault(variant, {})[name] = TimedFile(f.name, f.sha256, f.bytes, f.path, f.cache_key,
                                                              f.cache_entry, kept)
    return planned, problems


def kept_bytes(planned: Mapping[str, Mapping[str, TimedFile]]) -> tuple[int, int]:
    """(files, bytes) a keep plan writes: a file shared by variants is copied once."""
    unique = {f.kept: f.bytes for named in planned.values() for f in named.values() if f.kept}
    return len(unique), sum(unique.values())


def copy_kept(planned: Mapping[str, Mapping[str, TimedFile]], folder: Path) -> None:
    """Copy every planned file into ``folder`` (the baseline's temporary folder)."""
    for named in planned.values():
        for f in named.values():
            if not f.kept:
                continue
            target = folder / f.kept
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f.path, target)


def recorded(files: Mapping[str, Mapping[str, TimedFile]]) -> dict[str, dict[str, dict[str, Any]]]:
    """What ``baseline.json`` stores under ``artifacts``."""
    return {variant: {name: f.as_dict() for name, f in sorted(named.items())} for variant, named in sorted(files.items())}


def read_recorded(meta: Mapping[str, Any]) -> dict[str, dict[str, TimedFile]]:
    """``baseline.json``'s ``artifacts`` back as files (empty for a baseline saved before them)."""
    out: dict[str, dict[str, TimedFile]] = {}
    for variant, named in (meta.get("artifacts") or {}).items():
        if not isinstance(named, Mapping):
            continue
        for name, info in named.items():
            parsed = TimedFile.parse(name, info) if isinstance(info, Mapping) else None
            if parsed is not None:
                out.setdefault(str(variant), {})[str(name)] = parsed
    return out


@dataclass(frozen=True)
class Found:
    """Where a blessed or candidate file is now, and from where (``kept``, ``cache``, ``run``)."""

    path: Path
    source: str


def _intact(path: Path, sha256: str) -> bool:
    return path.is_file() and file_sha256(path) == sha256


def find(f: TimedFile, *, baseline_dir: Path | None = None, cache_root: Path | None = None) -> Found | None:
    """The file with the recorded bytes: the kept copy (``baseline_dir``), the path the run used,
    or the cache entry of its key under ``cache_root`` (``$HARNESS_CACHE/artifacts``); None when
    none of them holds those bytes any more."""
    if baseline_dir is not None and f.kept and _intact(baseline_dir / f.kept, f.sha256):
        return Found(baseline_dir / f.kept, "kept")
    if f.path and _intact(Path(f.path), f.sha256):
        return Found(Path(f.path), "run")
    if cache_root is not None and f.cache_key and f.cache_entry:
        entry = ArtifactCache(cache_root).lookup(f.cache_entry, f.cache_key)
        if entry is not None and _intact(entry.path(f.relative), f.sha256):
            return Found(entry.path(f.relative), "cache")
    return None


def default_cache_root() -> Path:
    """This machine's export cache (``$HARNESS_CACHE/artifacts``)."""
    return cache_root() / "artifacts"


def graph_file(named: Mapping[str, TimedFile], graph: str) -> TimedFile | None:
    """The ONNX file of ``graph`` among a variant's files (``graph/model.onnx``, else its one .onnx)."""
    exact = named.get(f"{graph}/model.onnx")
    if exact is not None:
        return exact
    onnx = [f for f in named.values() if f.graph == graph and f.relative.endswith(".onnx")]
    return onnx[0] if len(onnx) == 1 else None


def located(named: Mapping[str, TimedFile], graph: str, **where: Any) -> tuple[Path | None, str]:
    """The graph's ONNX file, found with every file of its entry (external data beside it), or
    (None, why not)."""
    main = graph_file(named, graph)
    if main is None:
        return None, f"no ONNX file of graph {graph!r} recorded"
    found = {name: find(f, **where) for name, f in named.items() if f.graph == graph}
    gone = sorted(name for name, hit in found.items() if hit is None)
    if gone:
        return None, f"{', '.join(gone)} not found"
    hit = found[main.name]
    assert hit is not None
    folders = {os.path.dirname(h.path) for name, h in found.items() if h is not None and "/" not in
               named[name].relative}
    if len(folders) > 1:  # the graph's external data must sit beside it: mixed sources cannot load
        return None, f"{graph}: its files were found in different places"
    return hit.path, hit.source
