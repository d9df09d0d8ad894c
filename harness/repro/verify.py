"""A repro bundle's manifest and files checked before anything in it is used.

A bundle travels: a colleague mails it, a CI job uploads it, anyone can edit ``bundle.json``. The
checksums catch edited *data*; these checks catch an edited *yardstick* and files the checksums do
not cover. Without them a threshold of NaN makes every comparison false, the re-judged case passes
and ``harness repro`` says "does not reproduce" (exit 0): a tampered bundle turns a failure into a
pass. Every rule names the manifest field it refuses (``BundleError``: one line, exit 2):

- every number is finite, except what was *measured* (a metric, a budget's measured value): a
  variant that output NaN recorded NaN, and that is the failure the bundle reproduces;
- every threshold (a tolerance row, a generation gate, a perf budget) lies inside its metric's
  range, by the rule the config file and ``--tolerance`` use (``MetricSpec.threshold_problem``);
- counts are whole numbers in range (``threads`` >= 1, ``batches`` >= 0);
- every file in the bundle directory is listed in ``files`` with its sha256, and every listed
  name is a plain relative path to a regular file inside the bundle (no ``..``, no absolute path,
  no symlink); the directories the manifest names for the artifact and tokenizer stay inside it.
"""

from __future__ import annotations

import math
from pathlib import Path, PurePosixPath
from typing import Any, Iterator, Mapping

from harness.core import UsageError
from harness.metrics.registry import metric as declared
from harness.perf.budgets import BUDGETS
from harness.repro.bundle import MANIFEST, BundleError

#: keys whose numbers are what a run measured, never an input to judging again: may be NaN/inf
MEASURED = frozenset({"metrics", "measured", "value", "values", "metrics_now"})
#: free-form sections a manifest records for the reader (environment facts, versions)
RECORDED_FACTS = frozenset({"environment", "versions", "runtime"})


def _numbers(node: Any, where: str) -> Iterator[tuple[str, float]]:
    """Every float in ``node`` with its field path (``outputs[0].tolerance[1].threshold``),
    skipping the measured values and recorded facts."""
    if isinstance(node, float):
        yield where, node
    elif isinstance(node, dict):
        for key, value in node.items():
            if str(key) in MEASURED or (not where and str(key) in RECORDED_FACTS):
                continue
            yield from _numbers(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _numbers(value, f"{where}[{i}]")


def _thresholds(node: Any, where: str) -> Iterator[tuple[str, str, Any]]:
    """Every (field path, metric name, threshold) of a gate row (``{metric, threshold, ...}``)."""
    if isinstance(node, dict):
        if "metric" in node and "threshold" in node:
            yield f"{where}.threshold", str(node["metric"]), node["threshold"]
        for key, value in node.items():
            if str(key) not in RECORDED_FACTS:
                yield from _thresholds(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _thresholds(value, f"{where}[{i}]")


def _threshold_problem(metric: str, value: Any) -> str | None:
    try:
        spec = declared(metric.rpartition(".")[2])
    except UsageError:
        return f"unknown metric {metric!r}"
    return spec.threshold_problem(value)


def check_numbers(manifest_path: Path, manifest: Mapping[str, Any]) -> None:
    """Finite numbers, thresholds and budgets in their metric's range, counts in range."""
    for where, value in _numbers(dict(manifest), ""):
        if not math.isfinite(value):
            raise BundleError(f"{manifest_path}: {where}: expected a finite number, got {value!r}")
    for where, name, value in _thresholds(dict(manifest), ""):
        problem = _threshold_problem(name, value)
        if problem:
            raise BundleError(f"{manifest_path}: {where}: {problem} ({name})")
    budgets = manifest.get("budget")
    if isinstance(budgets, dict):
        for name, limit in budgets.items():
            spec = BUDGETS.get(str(name))
            problem = f"unknown budget {name!r}" if spec is None else spec.threshold_problem(limit)
            if problem:
                raise BundleError(f"{manifest_path}: budget.{name}: {problem}")
    _count(manifest_path, manifest, "threads", minimum=1, optional=True)
    _count(manifest_path, manifest, "batches", minimum=0, optional=True)


def _count(manifest_path: Path, manifest: Mapping[str, Any], key: str, *, minimum: int, optional: bool) -> None:
    value = manifest.get(key)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BundleError(f"{manifest_path}: {key}: expected a whole number >= {minimum}, got {value!r}")


def _inside(manifest_path: Path, where: str, name: Any) -> PurePosixPath:
    """``name`` as a relative path that stays inside the bundle, else a BundleError naming ``where``."""
    text = str(name)
    rel = PurePosixPath(text)
    if not text or rel.is_absolute() or "\\" in text or ".." in rel.parts or Path(text).is_absolute():
        raise BundleError(f"{manifest_path}: {where}: {text!r} must be a relative path inside the bundle")
    return rel


def check_files(directory: Path, manifest: Mapping[str, Any]) -> None:
    """Every file of the bundle listed (and each listed one a regular file inside it), and the
    artifact and tokenizer directories the manifest names inside the bundle and listed."""
    manifest_path = directory / MANIFEST
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise BundleError(f"{manifest_path}: files must map file names to sha256")
    listed: set[PurePosixPath] = set()
    for name in files:
        rel = _inside(manifest_path, f"files[{name!r}]", name)
        target = directory / rel
        if any((directory / PurePosixPath(*rel.parts[:i])).is_symlink() for i in range(1, len(rel.parts) + 1)):
            raise BundleError(f"{manifest_path}: files[{name!r}]: is a symbolic link (a bundle holds its own files)")
        if target.exists() and not target.is_file():
            raise BundleError(f"{manifest_path}: files[{name!r}]: not a regular file")
        listed.add(rel)
    root = directory.resolve()
    for path in sorted(directory.rglob("*")):
        rel = PurePosixPath(path.relative_to(directory).as_posix())
        if path.is_symlink():
            raise BundleError(f"{directory}: {rel} is a symbolic link (a bundle holds its own files)")
        if path.is_file() and str(rel) != MANIFEST and rel not in listed:
            raise BundleError(f"{directory}: {rel} is not listed in {MANIFEST} files (added after the bundle was "
                              "written)")
    for where, art in _artifacts(manifest):
        if isinstance(art, dict) and art.get("bundled"):
            sub = _inside(manifest_path, f"{where}.dir", art.get("dir") or "artifact")
            file = sub / _inside(manifest_path, f"{where}.file", art.get("file"))
            if file not in listed:
                raise BundleError(f"{manifest_path}: {where}.file: {file} is not among the bundle's listed files")
            if not (directory / file).resolve().is_relative_to(root):
                raise BundleError(f"{manifest_path}: {where}.file: {file} leaves the bundle")
    tokenizer = manifest.get("tokenizer")
    if isinstance(tokenizer, dict) and "dir" in tokenizer:
        _inside(manifest_path, "tokenizer.dir", tokenizer["dir"])


def _artifacts(manifest: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    if "artifact" in manifest:
        yield "artifact", manifest["artifact"]
    arts = manifest.get("artifacts")
    if isinstance(arts, dict):
        for graph, art in arts.items():
            yield f"artifacts.{graph}", art


def verify(directory: Path, manifest: Mapping[str, Any]) -> None:
    """Every check of this module, files first (a listed file that is missing or differs is
    reported by the checksum pass that follows)."""
    check_files(directory, manifest)
    check_numbers(directory / MANIFEST, manifest)
