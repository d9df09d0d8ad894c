"""Which cases shard K of N runs: deterministic and balanced by expected duration.

Every shard collects the whole matrix and keeps its part, so the split needs no coordinator:
the same case list and the same durations give every machine the same partition. Cases are
assigned longest first to the least-loaded shard (LPT; ties to the lower shard number, cases
in id order), with each case's duration from a previous run directory or the history store
(``--shard-durations``) and the median of the known ones for a case never timed; without
durations each case weighs its estimated cost (``harness.shard.cost``: graphs x model size x
precision x suite), never a split by count. ``shard.json`` in the run directory records
the assignment and a digest of the plan, so ``harness merge`` can prove the shards fit together.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from harness.core import UsageError
from harness.results import history
from harness.results.rundir import read_results

SHARD_FILE = "shard.json"
SCHEMA = "harness.shard/1"


@dataclass(frozen=True)
class ShardSpec:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str, where: str = "--shard") -> ShardSpec:
        k, sep, n = str(text).partition("/")
        try:
            index, count = int(k), int(n)
        except ValueError:
            raise UsageError(f"{where}: expected K/N (e.g. 2/3), got {text!r}") from None
        if not sep or count < 1 or not 1 <= index <= count:
            raise UsageError(f"{where}: expected K/N with 1 <= K <= N, got {text!r}")
        return cls(index, count)


def load_durations(source: str | os.PathLike[str]) -> dict[str, float]:
    """Case id -> seconds from a run directory (its ``results.jsonl``) or a history store
    (a ``.sqlite`` file or a database URL). One line, exit 2, for anything else."""
    text = str(source)
    path = Path(text)
    if path.is_dir() or path.name == "results.jsonl":
        return {r.id: r.duration_s for r in read_results(path if path.is_dir() else path.parent)
                if r.duration_s and r.duration_s > 0}
    if "://" in text or path.is_file():
        return history.durations(text)
    raise UsageError(f"--shard-durations: {text} is neither a run directory nor a history database")


def weights(ids: list[str], durations: Mapping[str, float] | None,
            estimates: Mapping[str, float] | None) -> dict[str, float]:
    """Each case's weight: its duration; a case never timed the median of the known durations;
    with no duration at all, the estimated cost (``harness.shard.cost``), else 1."""
    known = [float(durations[i]) for i in ids if durations and i in durations]
    if known:
        default = statistics.median(known)
        return {i: float(durations[i]) if durations and i in durations else default for i in ids}
    return {i: float(estimates[i]) if estimates and i in estimates else 1.0 for i in ids}


def assign(case_ids: Iterable[str], count: int, durations: Mapping[str, float] | None = None,
           estimates: Mapping[str, float] | None = None) -> tuple[list[list[str]], list[float]]:
    """Cases per shard (each list in id order) and each shard's expected load (seconds with
    durations, relative cost units with estimates only)."""
    ids = sorted(set(case_ids))
    weight = weights(ids, durations, estimates)
    shards: list[list[str]] = [[] for _ in range(count)]
    load = [0.0] * count
    for case in sorted(ids, key=lambda i: (-weight[i], i)):
        target = min(range(count), key=lambda s: (load[s], s))
        shards[target].append(case)
        load[target] += weight[case]
    return [sorted(s) for s in shards], load


def digest(case_ids: Iterable[str], count: int, durations: Mapping[str, float] | None,
           estimates: Mapping[str, float] | None = None) -> str:
    """What every shard of one split must agree on: the case list, N and the weights used."""
    ids = sorted(set(case_ids))
    used = {i: durations[i] for i in ids if durations and i in durations}
    if not used and estimates:
        used = {i: estimates[i] for i in ids if i in estimates}
    payload = json.dumps({"ids": ids, "count": count, "weights": used}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def write_shard_file(run_dir: Path, spec: ShardSpec, case_ids: list[str], durations: Mapping[str, float] | None,
                     source: str | None, estimates: Mapping[str, float] | None = None) -> Path:
    """``shard.json`` (atomically: under pytest-xdist every worker writes the same content)."""
    shards, load = assign(case_ids, spec.count, durations, estimates)
    by_cost = not any(durations and i in durations for i in case_ids)
    payload = {"schema": SCHEMA, "shard": spec.index, "of": spec.count,
               "plan": digest(case_ids, spec.count, durations, estimates),
               "total_cases": len(set(case_ids)), "cases": shards[spec.index - 1],
               "expected_s": None if by_cost else round(load[spec.index - 1], 3),
               "expected_cost": round(load[spec.index - 1], 3) if by_cost else None,
               "balanced_by": "estimated cost" if by_cost else "durations", "durations_source": source}
    run_dir.mkdir(parents=True, exist_ok=True)
    target = run_dir / SHARD_FILE
    tmp = run_dir / f".{SHARD_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return target


@dataclass(frozen=True)
class EmptyShard:
    """A shard the plan gave none of the run's cases (more shards than cases, or cases too
    unequal to fill every shard): a finished, empty part of a run that did select cases, not a
    run that judged nothing. It still leaves an (empty) ``results.jsonl`` and its summary, so
    ``harness merge`` and CI artifact steps see a shard like any other."""

    spec: ShardSpec
    total_cases: int

    def describe(self) -> str:
        return (f"shard {self.spec} was assigned none of the run's {self.total_cases} case(s) (the split has more "
                "shards than it could fill); nothing to judge here: `harness merge` of every shard judges the run")


def empty_shard(run_dir: Path) -> EmptyShard | None:
    """``run_dir``'s shard when its ``shard.json`` assigns it no case of a run that selected some;
    None otherwise (no shard file, cases assigned, or a run that selected nothing at all -- that
    stays a usage error)."""
    try:
        meta = json.loads((Path(run_dir) / SHARD_FILE).read_text(encoding="utf-8"))
        index, count, total, cases = int(meta["shard"]), int(meta["of"]), int(meta["total_cases"]), meta["cases"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return EmptyShard(ShardSpec(index, count), total) if total > 0 and not cases else None
