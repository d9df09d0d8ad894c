"""Named baselines: a frozen copy of a run's perf and accuracy records.

A baseline is copied, not referenced, because run directories get cleaned up and
overwritten; the gate must keep comparing against exactly the numbers that were
blessed. Each baseline is a folder ``STORE/NAME/`` with the perf-bearing and the
accuracy-bearing records (``results.jsonl``, unchanged: each carries its settings and
environment) and ``baseline.json`` (where and when it came from, the fingerprint, the
library versions and settings of the run). The perf gate (``harness.gate.compare``) reads
the perf records, the accuracy gate (``harness.gate.accuracy``) the accuracy ones.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from harness import __version__
from harness.core import did_you_mean
from harness.core.rundirs import BASELINE_STORE
from harness.core.writable import ensure_free_space
from harness.gate import blessed
from harness.gate.blessed import read_recorded
from harness.gate.multirun import aggregate_runs
from harness.metrics.registry import METRICS, Scope
from harness.results import RESULTS_FILE, Record, write_records
from harness.results.record import MetricKey, RecordLike
from harness.results.rundir import RunDirError, read_results

if TYPE_CHECKING:  # pragma: no cover
    from harness.gate.blessed import TimedFile

META_FILE = "baseline.json"
META_SCHEMA = "harness.baseline/1"
DEFAULT_STORE = BASELINE_STORE
_NAME = re.compile(r"[A-Za-z0-9._-]+")


class BaselineError(RunDirError):
    """A missing, malformed or conflicting run directory or baseline (exit code 2)."""


@dataclass(frozen=True)
class BaselineInfo:
    """What ``baseline list`` shows: the metadata, without loading the records."""

    name: str
    path: Path
    created: str
    source: str
    fingerprint: str | None
    harness_version: str
    records: int
    #: files of the timed graphs recorded with their cache keys (``harness.gate.blessed``)
    artifact_files: int = 0
    #: how many of them ``--keep-artifacts`` copied into the baseline, and their bytes
    kept_files: int = 0
    kept_bytes: int = 0


@dataclass(frozen=True)
class Baseline:
    info: BaselineInfo
    records: list[Record]
    #: variant -> the files its latency metrics timed (name -> ``TimedFile``), from ``baseline.json``
    artifacts: dict[str, dict[str, "TimedFile"]] = field(default_factory=dict)


def validate_name(name: str) -> str:
    """Names become folder names, so only ``[A-Za-z0-9._-]`` and no leading dot (no ``..``)."""
    if not name or not _NAME.fullmatch(name) or name.startswith("."):
        raise BaselineError(f"invalid baseline name {name!r}: use letters, digits, '.', '_' or '-', not starting with '.'")
    return name


def perf_records(records: Iterable[RecordLike]) -> list[Record]:
    """Only records that carry a ``perf`` section; the rest say nothing about speed or memory."""
    return [r for r in map(Record.coerce, records) if r.perf]


def is_accuracy_key(key: str) -> bool:
    """A metric key the accuracy gate compares: a registered, non-budget metric outside ``perf``."""
    parsed = MetricKey.parse(key)
    spec = METRICS.get(parsed.metric)
    return not parsed.is_perf and spec is not None and spec.scope is not Scope.PERF_BUDGET


def accuracy_records(records: Iterable[RecordLike]) -> list[Record]:
    """Records with at least one accuracy metric (what a baseline blesses next to the perf ones)."""
    return [r for r in map(Record.coerce, records) if any(is_accuracy_key(k) for k in r.metrics)]


def blessed_records(records: Iterable[RecordLike]) -> list[Record]:
    """What a baseline keeps: every record with perf numbers or accuracy metrics, in run order."""
    typed = [Record.coerce(r) for r in records]
    keep = {id(r) for r in perf_records(typed)} | {id(r) for r in accuracy_records(typed)}
    return [r for r in typed if id(r) in keep]


def load_run(run_dir: str | os.PathLike[str]) -> list[Record]:
    """The perf records of a run directory; an error if there are none to compare."""
    found = perf_records(read_results(run_dir))
    if not found:
        raise BaselineError(f"{Path(run_dir) / RESULTS_FILE} has no performance records (no record has a 'perf' section)")
    return found


def _harness_version() -> str:
    try:
        return str(__version__)
    except ImportError:  # pragma: no cover - harness/__init__.py always defines it
        return "unknown"


def _fingerprint(records: list[Record]) -> str | None:
    return next((r.fingerprint for r in records if r.fingerprint), None)


def save_baseline(
    run_dir: str | os.PathLike[str],
    name: str,
    store: str | os.PathLike[str] = DEFAULT_STORE,
    *,
    force: bool = False,
    older_runs: Sequence[str | os.PathLike[str]] = (),
    keep_artifacts: bool = False,
) -> BaselineInfo:
    """Copy the perf records of ``run_dir`` to ``store/name``; refuses to replace one unless ``force``.
    With ``older_runs`` the baseline aggregates them and ``run_dir`` (``gate.multirun``).

    The files the newest run's latency metrics timed are recorded with their cache keys
    (``baseline.json`` ``artifacts``); ``keep_artifacts`` also copies them into the baseline
    (``STORE/NAME/artifacts/``), after checking they are intact and fit on the store's disk.
    Written to a temporary folder first and renamed into place, so an interrupted
    save never leaves a half-written baseline that a later compare would trust.
    """
    validate_name(name)
    newest = read_results(run_dir)
    records = blessed_records(newest)
    files = blessed.timed_files(newest)
    if not records:
        raise BaselineError(f"{Path(run_dir) / RESULTS_FILE} has no performance records and no accuracy metrics "
                            "(no record has a 'perf' section or a metric the registry declares)")
    if older_runs:  # a multi-run baseline: perf pooled over the runs, accuracy from the newest
        pooled = aggregate_runs([*(load_run(d) for d in older_runs), perf_records(records)])
        records = pooled + [r for r in records if not r.perf]
    root = Path(store)
    target = root / name
    if target.exists() and not force:
        raise BaselineError(f"baseline {name!r} already exists in {root}; pass --baseline-force to replace it")
    kept = (0, 0)
    if keep_artifacts:
        files = _plan_keep(files, run_dir, root)
        kept = blessed.kept_bytes(files)
    root.mkdir(parents=True, exist_ok=True)
    meta = {
        "schema": META_SCHEMA,
        "name": name,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "source": str(Path(run_dir).resolve()),
        **({"sources": [str(Path(d).resolve()) for d in (*older_runs, run_dir)]} if older_runs else {}),
        "fingerprint": _fingerprint(records),
        "harness_version": _harness_version(),
        "records": len(records),
        "variants": sorted({r.variant or "" for r in records} - {""}),
        "perf_records": len(perf_records(records)),
        "accuracy_records": len(accuracy_records(records)),
        "versions": next((dict(r.env.get("versions") or {}) for r in records if r.env.get("versions")), {}),
        "settings": next((dict(r.settings) for r in records if r.settings), {}),
        "artifacts": blessed.recorded(files),
        **({"kept_artifacts": {"files": kept[0], "bytes": kept[1]}} if keep_artifacts else {}),
    }
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        write_records(tmp / RESULTS_FILE, records, sort_keys=True)
        if keep_artifacts:
            blessed.copy_kept(files, tmp)
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        if target.exists():
            old = root / f".{name}.old"
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
            try:
                tmp.rename(target)
            except OSError:
                old.rename(target)  # put the previous baseline back rather than lose it
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _info(name, target, meta)


def _plan_keep(files: dict[str, dict[str, TimedFile]], run_dir: str | os.PathLike[str],
               root: Path) -> dict[str, dict[str, TimedFile]]:
    """``--keep-artifacts``: every timed file still intact, and room for them under ``root``
    (one line, exit 2, before anything is written)."""
    if not files:
        raise BaselineError(f"--keep-artifacts: {Path(run_dir) / RESULTS_FILE} records no timed artifacts "
                            "(a latency record of `harness run --perf` lists the files it timed)")
    planned, problems = blessed.keep_plan(files)
    if problems:
        more = f"; +{len(problems) - 2} more" if len(problems) > 2 else ""
        raise BaselineError(f"--keep-artifacts: {'; '.join(problems[:2])}{more} (rerun `harness run --perf` "
                            "and save from that run)")
    count, size = blessed.kept_bytes(planned)
    ensure_free_space(root, size + (1 << 20), "--baseline-store", f"--keep-artifacts ({count} files)")
    return planned


def _info(name: str, path: Path, meta: Mapping[str, Any]) -> BaselineInfo:
    kept = meta.get("kept_artifacts") or {}
    return BaselineInfo(
        name=name,
        path=path,
        created=str(meta.get("created", "?")),
        source=str(meta.get("source", "?")),
        fingerprint=meta.get("fingerprint"),
        harness_version=str(meta.get("harness_version", "?")),
        records=int(meta.get("records", 0)),
        artifact_files=sum(len(v) for v in (meta.get("artifacts") or {}).values() if isinstance(v, Mapping)),
        kept_files=int(kept.get("files", 0)) if isinstance(kept, Mapping) else 0,
        kept_bytes=int(kept.get("bytes", 0)) if isinstance(kept, Mapping) else 0,
    )


def _read_meta(name: str, path: Path) -> dict[str, Any]:
    try:
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"baseline {name!r} is damaged: {path / META_FILE} is missing") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(f"baseline {name!r} is damaged: {path / META_FILE}: {exc.msg}") from None
    if not isinstance(meta, dict):
        raise BaselineError(f"baseline {name!r} is damaged: {path / META_FILE} is not a JSON object")
    return meta


def _names(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / META_FILE).exists())


def load_baseline(name: str, store: str | os.PathLike[str] = DEFAULT_STORE) -> Baseline:
    """The saved records and metadata of ``name``; unknown names get a did-you-mean hint."""
    validate_name(name)
    root = Path(store)
    path = root / name
    if not (path / META_FILE).exists():
        known = _names(root)
        listing = f"; known: {', '.join(known)}" if known else f"; {root} has no baselines yet ('harness baseline save')"
        raise BaselineError(f"unknown baseline {name!r}{did_you_mean(name, known)}{listing}")
    meta = _read_meta(name, path)
    try:
        records = blessed_records(read_results(path))
    except RunDirError as exc:
        raise BaselineError(f"baseline {name!r} is damaged: {exc}") from None
    return Baseline(_info(name, path, meta), records, read_recorded(meta))


def list_baselines(store: str | os.PathLike[str] = DEFAULT_STORE) -> list[BaselineInfo]:
    """Every baseline in ``store``, sorted by name; damaged ones raise rather than hide."""
    root = Path(store)
    return [_info(name, root / name, _read_meta(name, root / name)) for name in _names(root)]
