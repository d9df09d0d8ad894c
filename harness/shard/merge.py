"""``harness merge``: shard run directories -> one run directory, summary and report.

The merged directory is what an unsplit run would have written: one ``results.jsonl`` (every
case once, under one merged ``run_id``; each record keeps where it ran in ``data.shard``), the
cases' saved files, ``summary.md`` and ``report.html``. Refused (one line, exit 2) unless
``force``: a directory that is no shard, shards of different splits (plan digests differ),
a shard given twice or missing, a case in two shards, a shard whose assigned cases did not all
finish, shards that ran in different environments (fingerprints differ: their timings and
even their numerics are not one run's), and shards run with different values of a setting that
changes results (the option table's ``changes_results`` rows: ``--samples 8`` beside
``--samples 4`` is two runs, not one).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.core import UsageError
from harness.report.github import append_step_summary
from harness.report.html import render_report
from harness.report.junit import JUNIT_FILE, write_junit
from harness.report.summary import write_summary
from harness.results import Record
from harness.results.rundir import read_results
from harness.results.sections import SettingsSection
from harness.results.store import write_records
from harness.shard.plan import SHARD_FILE

MERGE_FILE = "merge.json"


class MergeError(UsageError):
    """The shards do not form one complete run (and --force was not given)."""


@dataclass
class Shard:
    path: Path
    index: int
    count: int
    plan: str
    cases: list[str]
    records: list[Record]

    @property
    def label(self) -> str:
        return f"shard {self.index}/{self.count} ({self.path})"


@dataclass
class Merged:
    records: list[Record]
    run_id: str
    shards: list[Shard]
    warnings: list[str] = field(default_factory=list)


def read_shard(path: Path) -> Shard:
    marker = path / SHARD_FILE
    if not marker.is_file():
        raise MergeError(f"{path} is not a shard run directory (no {SHARD_FILE}); run it with --shard K/N")
    try:
        meta = json.loads(marker.read_text(encoding="utf-8"))
        index, count, plan, cases = int(meta["shard"]), int(meta["of"]), str(meta["plan"]), list(meta["cases"])
    except (ValueError, KeyError, TypeError) as exc:
        raise MergeError(f"{marker}: not a shard file ({exc})") from None
    return Shard(path, index, count, plan, [str(c) for c in cases], read_results(path))


def _refuse(problems: list[str], force: bool, warnings: list[str]) -> None:
    if not problems:
        return
    if not force:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise MergeError(f"{problems[0]}{more}; pass --force to merge anyway")
    warnings.extend(problems)


def merge_shards(paths: list[Path], *, force: bool = False) -> Merged:
    shards = sorted((read_shard(Path(p)) for p in paths), key=lambda s: (s.index, str(s.path)))
    warnings: list[str] = []
    counts = sorted({s.count for s in shards})
    if len(counts) > 1:
        raise MergeError("shards of different splits: " + ", ".join(s.label for s in shards) + " (N differs)")
    count = counts[0]
    plans = {s.plan for s in shards}
    _refuse([f"shards of different splits (plan digests {', '.join(sorted(plans))}): a different case matrix, "
             "options or --shard-durations per shard"] if len(plans) > 1 else [], force, warnings)
    seen: dict[int, Shard] = {}
    problems = []
    for s in shards:
        if s.index in seen:
            problems.append(f"overlapping shards: {s.index}/{count} given twice ({seen[s.index].path}, {s.path})")
        seen.setdefault(s.index, s)
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in seen]
    if missing:
        problems.append(f"missing shard(s) {', '.join(missing)}")
    _refuse(problems, force, warnings)

    owner: dict[str, Shard] = {}
    problems = []
    for s in shards:
        ids = {r.id for r in s.records}
        for case in sorted(ids):
            if case in owner and owner[case] is not s:
                problems.append(f"case {case} is in two shards ({owner[case].label}, {s.label})")
            owner.setdefault(case, s)
        stray = sorted(ids - set(s.cases))
        if stray:
            problems.append(f"{s.label} holds {len(stray)} case(s) not assigned to it (e.g. {stray[0]})")
        unfinished = sorted(set(s.cases) - ids)
        if unfinished:
            problems.append(f"{s.label} did not finish: {len(unfinished)} assigned case(s) without a record "
                            f"(e.g. {unfinished[0]})")
    _refuse(problems, force, warnings)

    prints = {s.label: sorted({r.fingerprint or "?" for r in s.records}) for s in shards}
    distinct = sorted({f for fs in prints.values() for f in fs})
    described = "; ".join(f"{label} fingerprint {', '.join(fs)}" for label, fs in prints.items())
    _refuse([f"mixed environments: {described}"] if len(distinct) > 1 else [], force, warnings)

    _refuse(setting_differences(shards), force, warnings)

    run_id = "merged-" + hashlib.sha256("\0".join(sorted({r.run_id for s in shards for r in s.records}))
                                        .encode()).hexdigest()[:12]
    records = []
    for case in sorted(owner):
        s = owner[case]
        record = next(r for r in s.records if r.id == case)
        data = {**record.data, "shard": {"index": s.index, "of": s.count, "run_id": record.run_id,
                                         "source": str(s.path.resolve())}}
        records.append(replace(record, run_id=run_id, data=data))
    return Merged(records, run_id, shards, warnings)


def _settings_of(record: Record) -> dict[str, str]:
    """The results-changing options a case ran with, as comparable text (unset: ``default``)."""
    from harness.settings.options import OPTIONS, Rerun

    settings = SettingsSection.of(record)
    out: dict[str, str] = {}
    for o in OPTIONS:
        if not o.changes_results or o.rerun is Rerun.CASE:  # the case's own model/precision/provider
            continue
        value = settings.option(o.name)
        out[o.name] = "default" if value is None else json.dumps(value, sort_keys=True)
    return out


def setting_differences(shards: list[Shard]) -> list[str]:
    """One line per results-changing setting whose value differs between two shards, naming the
    setting and both values (``samples: 8 in shard 1/2 (a) but 4 in shard 2/2 (b)``)."""
    seen: dict[str, tuple[str, Shard]] = {}
    out: list[str] = []
    for s in shards:
        for record in s.records:
            for name, value in _settings_of(record).items():
                first = seen.setdefault(name, (value, s))
                if first[0] != value and not any(line.startswith(f"shards ran with different {name}:")
                                                 for line in out):
                    out.append(f"shards ran with different {name}: {first[0]} in {first[1].label} but "
                               f"{value} in {s.label}")
    return out


def write_merged(merged: Merged, out: Path) -> dict[str, Any]:
    """The merged run directory: results.jsonl, cases/, summary.md, junit.xml, report.html,
    merge.json — what an unsplit run writes, so the CI job that merges is the one that reports
    (JUnit table, ``$GITHUB_STEP_SUMMARY``)."""
    out.mkdir(parents=True, exist_ok=True)
    write_records(out / "results.jsonl", merged.records)
    for s in merged.shards:
        cases = s.path / "cases"
        if cases.is_dir():
            shutil.copytree(cases, out / "cases", dirs_exist_ok=True)
    write_summary(out, merged.records)
    write_junit(out / JUNIT_FILE, merged.records)
    append_step_summary((out / "summary.md").read_text(encoding="utf-8"), out)
    report = out / "report.html"
    report.write_text(render_report(merged.records, title=f"model deployment gate: {out.name} (merged)",
                                    run_dir=out, report_path=report), encoding="utf-8")
    meta = {"schema": "harness.merge/1", "run_id": merged.run_id, "cases": len(merged.records),
            "shards": [{"index": s.index, "of": s.count, "path": str(s.path.resolve()), "plan": s.plan,
                        "cases": len(s.records)} for s in merged.shards],
            "forced": merged.warnings}
    (out / MERGE_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta
