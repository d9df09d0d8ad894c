"""Replayed cases: a rerun of a case whose inputs have not changed reads its finished reports.

The reference and output caches (``harness.judge.refcache``) already spare a warm rerun every
PyTorch reference, export and session; what a warm case still paid for was its machinery:
importing and building the workspace, tokenizers, reading the cached arrays, recomputing every
metric -- the same numbers again, 88 % of a warm default run here. A case is a function of
what went into it, so when nothing did change its verdict cannot either, and this plugin keeps
the case's own pytest reports (setup, call, teardown: the record's payload travels in their
``user_properties``) and its side files (dumps, repro bundles) in the cache, and replays them
through pytest's report hooks: the record, the terminal, junit and ``--lf`` see what they saw.

What decides a case -- the key -- is everything a verdict depends on, all readable without
importing a runtime:

* the case: its node id and variant;
* the harness's own code and data (every file of the package) and the conftest files pytest
  loaded (a fixture override changes a case);
* every ``--harness-*`` option, with the content of each option value that names a file
  (config, tolerances), and the config file found in the root directory;
* the model: its spec (a zoo model is built by the code above, bit for bit) and, for a model
  directory, the sha256 of every file in it; a spec value naming a file (a corpus) by content;
* the environment: every installed distribution and its version, the Python build, the
  machine, the CPU model and flags, the CPUs this process may use and the thread variables.

Only cases whose answers cannot change on a rerun are kept: the numeric, generation and
embedding suites (not perf: timing is the point; not artifact parity: its files are the
user's), on a backend whose outputs are deterministic here (``Backend.deterministic``: CPU),
without profiling, and only a pass or a gate failure (an error or a skip is decided again).
``--fresh-references`` (``HARNESS_FRESH_REFERENCES=1``) judges every case again and rewrites
its entry. A replayed record says so (``data.replayed_case``), takes this run's id and time,
and its durations are the replay's own; its phases and memory are empty (nothing was measured).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass, fields, is_dataclass
from functools import lru_cache
from importlib.metadata import distributions
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import harness
from harness.core import Variant
from harness.core.cachedir import cache_root, file_sha256
from harness.export.cache import ArtifactCache, cache_key
from harness.session import RUN_DIR, run_options

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Variant
    from harness.export.cache import ArtifactCache, CacheEntry

#: bump when what an entry holds, or the key, changes
FORMAT = 1
REPORTS = "reports.json"
CASE_FILES = "case"
#: suites whose cases a rerun may replay (module names under ``harness.suites``)
REPLAYABLE_SUITES = frozenset({"test_logits_parity", "test_generation_parity", "test_embedding_parity"})
#: options that say where things go, not what is judged
PLACES = frozenset({"harness_out", "harness_cache"})
#: environment variables that decide outputs (thread pools, runtimes, the harness's own)
ENV_PREFIXES = ("HARNESS_", "OMP_", "MKL_", "OPENBLAS_", "ORT_", "CUDA_", "TORCH_", "PYTORCH_", "OV_", "TRT_")
ENV_PLACES = frozenset({"HARNESS_CACHE", "HARNESS_OUT"})



@dataclass
class Pending:
    """A replayable case running now: its key, and the reports to keep if it ends as one."""

    label: str
    parts: dict[str, Any]
    reports: list[dict[str, Any]]


# -- the key ------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def tree_digest(root: str) -> str:
    """sha256 of every file under ``root`` (names and bytes; bytecode caches left out)."""
    h = hashlib.sha256()
    base = Path(root)
    for path in sorted(p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(path.relative_to(base).as_posix().encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


@lru_cache(maxsize=1)
def environment_part() -> dict[str, Any]:
    """What about this machine and environment decides outputs, read without importing a runtime."""
    from harness.judge.refcache import cpu_identity

    dists = sorted({f"{d.metadata['Name']}=={d.version}" for d in distributions() if d.metadata["Name"]})
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    variables = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES) and k not in ENV_PLACES}
    return {"distributions": dists, "python": sys.version, "platform": platform.platform(),
            "cpu": cpu_identity(), "cpus": os.cpu_count(), "affinity": affinity, "variables": variables}


def described(value: Any) -> Any:
    """``value`` as stable JSON: callables by qualified name, dataclasses by field, a string or path
    naming an existing file by its content's sha256 (an object's ``repr`` may hold an address)."""
    if isinstance(value, dict):
        return {str(k): described(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [described(v) for v in value]
        return sorted(items, key=json.dumps) if isinstance(value, (set, frozenset)) else items
    if is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__qualname__, **{f.name: described(getattr(value, f.name)) for f in fields(value)}}
    if callable(value):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', type(value).__qualname__)}"
    if isinstance(value, (str, Path)) and str(value) and len(str(value)) < 4096:
        path = Path(value).expanduser()
        try:
            if path.is_file():
                return {"file": str(value), "sha256": file_sha256(path)}
        except OSError:
            pass
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def directory_digest(path: Path) -> str:
    """sha256 over every file of a model directory (each file hashed once per process while unchanged)."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f.relative_to(path).as_posix().encode())
        h.update(file_sha256(f).encode())
    return h.hexdigest()


def case_parts(item: pytest.Item, variant: Variant) -> dict[str, Any] | None:
    """The key of ``item``'s case, or None when its verdict may change on a rerun."""
    from harness.runners import backends
    from harness.settings.config_file import find_config
    from harness.zoo.base import ModelCatalog

    module = getattr(getattr(item, "module", None), "__name__", "")
    if not module.startswith("harness.suites.") or module.rsplit(".", 1)[-1] not in REPLAYABLE_SUITES:
        return None
    options = run_options(item.config)
    backend = backends().get(variant.backend)
    if backend is None or not backend.deterministic(variant) or options.runtime.profile \
            or options.settings.fresh_references or os.environ.get("HARNESS_FRESH_REFERENCES", "").strip().lower() \
            in ("1", "true", "yes"):
        return None
    spec = (options.catalog or ModelCatalog()).resolve(variant.model)
    given = {k: v for k, v in sorted(vars(item.config.option).items()) if k.startswith("harness_") and k not in PLACES}
    conftests = sorted(str(getattr(p, "__file__", "")) for p in item.config.pluginmanager.get_plugins()
                       if str(getattr(p, "__file__", "")).endswith("conftest.py"))
    found = find_config(None, Path(str(item.config.rootpath)))

    return {"format": FORMAT, "nodeid": item.nodeid, "variant": described(variant),
            "code": tree_digest(str(Path(harness.__file__).parent)),
            "conftests": {c: described(c) for c in conftests}, "options": described(given),
            "config": described(str(found)) if found else None, "spec": described(spec),
            "model": directory_digest(spec.path) if spec.path is not None else None,
            "environment": environment_part()}


def _variant(item: pytest.Item) -> Variant | None:
    callspec = getattr(item, "callspec", None)
    variant = callspec.params.get("variant") if callspec is not None else None
    return variant if isinstance(variant, Variant) else None


def _store() -> ArtifactCache:
    return ArtifactCache(cache_root() / "verdicts")


def _label(item: pytest.Item) -> str:
    from harness.case.collector import case_dir_name

    return case_dir_name(item.name)[:96]


# -- replay and keeping -------------------------------------------------------------------------------
def _lookup(label: str, parts: dict[str, Any]) -> CacheEntry | None:
    key = cache_key(parts)
    return _store().lookup(f"{label}-{key[:16]}", key)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(CaseReplay(config), f"harness-replay-{id(config)}")


class CaseReplay:
    """One session's replays: hooks of the process that runs the cases (a worker under xdist)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.pending: dict[str, Pending] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        """Replay a kept case (True: pytest runs nothing else for it), or note a replayable one."""
        variant = _variant(item)
        if variant is None or not any(k == "harness_case" for k, _ in item.user_properties):
            return None
        parts = case_parts(item, variant)
        if parts is None:
            return None
        label = _label(item)
        entry = _lookup(label, parts)
        if entry is None:
            self.pending[item.nodeid] = Pending(label, parts, [])
            return None
        replay(item, entry)
        # what pytest's own protocol does after a teardown: fixtures of scopes the next item does
        # not share are finished now (a later item's setup insists on it)
        item.session._setupstate.teardown_exact(nextitem)
        return True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect a pending case's reports; keep them after its teardown when it passed or failed
        a gate (under xdist the controller sees the reports too, with nothing pending)."""
        pending = self.pending.get(report.nodeid)
        if pending is None:
            return
        pending.reports.append(self.config.hook.pytest_report_to_serializable(config=self.config, report=report))
        if report.when == "teardown":
            del self.pending[report.nodeid]
            if _keepable(pending.reports):
                self._keep(report.nodeid, pending)

    def _keep(self, nodeid: str, pending: Pending) -> None:
        from harness.case.collector import case_dir_name

        run_dir = Path(self.config.stash[RUN_DIR]).resolve()
        case_dir = run_dir / "cases" / case_dir_name(nodeid.split("::")[-1])

        def build(tmp: Path) -> None:
            (tmp / REPORTS).write_text(json.dumps({"reports": pending.reports, "run_dir": str(run_dir)}),
                                       encoding="utf-8")
            if case_dir.is_dir():
                shutil.copytree(case_dir, tmp / CASE_FILES, symlinks=True)

        try:
            _store().get_or_build(pending.label, pending.parts, build)
        except OSError as exc:  # a full or read-only cache costs the next run its replay, not this run its record
            logging.getLogger("harness.cache").warning("could not keep case %s for replay: %s", nodeid, exc)


def replay(item: pytest.Item, entry: CacheEntry) -> None:
    """Send the kept reports through pytest's hooks as if the case ran now, into this run."""

    began = time.perf_counter()
    kept = json.loads((entry.directory / REPORTS).read_text(encoding="utf-8"))
    run_dir = Path(item.config.stash[RUN_DIR]).resolve()
    text = json.dumps(kept["reports"])
    if kept.get("run_dir"):  # absolute paths of the side files inside the records: this run's copies
        text = text.replace(json.dumps(kept["run_dir"])[1:-1], json.dumps(str(run_dir))[1:-1])
    reports = json.loads(text)
    files = entry.directory / CASE_FILES
    if files.is_dir():
        from harness.case.collector import case_dir_name

        shutil.copytree(files, run_dir / "cases" / case_dir_name(item.name), dirs_exist_ok=True)
    hook = item.ihook
    hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for data in reports:
        report = item.config.hook.pytest_report_from_serializable(config=item.config, data=data)
        report.duration = time.perf_counter() - began if report.when == "teardown" else 0.0
        report.user_properties = [(k, _replayed(v, entry) if k == "harness_record" else v)
                                  for k, v in report.user_properties]
        hook.pytest_runtest_logreport(report=report)
    hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def _replayed(payload: dict[str, Any], entry: CacheEntry) -> dict[str, Any]:
    """A kept payload as this run's: its time, no measured phases or memory, and where it came from."""
    return {**payload, "started": time.time(), "phases": {}, "memory": {},
            "data": {**payload.get("data", {}), "replayed_case": entry.directory.name}}


def _keepable(reports: list[dict[str, Any]]) -> bool:
    """A pass, or a gate failure (the record's exception says which): nothing else is kept."""
    outcomes = {r["when"]: r["outcome"] for r in reports}
    if outcomes.get("setup") != "passed" or outcomes.get("teardown") != "passed":
        return False
    if outcomes.get("call") == "passed":
        return True
    payload: dict[str, Any] = next((v for r in reports for k, v in r.get("user_properties", []) if k == "harness_record"), {})
    exception = payload.get("exception") or {}
    return outcomes.get("call") == "failed" and bool(exception.get("gate"))
