"""Baselines that aggregate several runs, so one noisy night cannot blind the gate.

A baseline copied from one run carries that run's noise: recorded while the machine was
busy (bert-tiny p50 0.23 ms but p90 0.62 ms), every later comparison came back INCONCLUSIVE.
Aggregating the last N runs makes run-to-run variance part of the reference: per perf
record (same case id), each run contributes the same number of latency samples (evenly
thinned, order kept, so no run outweighs another), concatenated run after run; scalars
(RSS, sizes, cold start) take the median over the runs. A run whose own samples were too
noisy to judge anything (block-median CV above the gate's ``max_cv``, 10%: a busy night)
is left out of that series -- unless every run was, then the quietest one is kept -- and
the record says which (``data.noisy_runs_excluded``). Measured: pooling the noisy night in
gave the same 4/10 detections as the single noisy baseline, because pooling carries its
block-to-block spread into the reference. The result is ordinary records, saved and
compared by the existing baseline code.

Runs come from run directories, or from the history database's last N runs through
``harness.results.history.runs`` (its ``source`` column is each run's directory).
"""

from __future__ import annotations

import copy
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from harness.core import UsageError
from harness.results import Record
from harness.results.history import runs as history_runs

#: a run noisier than this (block-median CV) says nothing the gate could use: the gate's default max_cv
MAX_CV = 0.10


def _thin(samples: list[float], n: int) -> list[float]:
    if len(samples) <= n:
        return list(samples)
    step = len(samples) / n
    return [samples[int(i * step)] for i in range(n)]


def _quiet(series: list[list[float]]) -> tuple[list[list[float]], int]:
    """The runs quiet enough to judge with (block-median CV <= MAX_CV), and how many were left out."""
    from harness.perf.stats import block_cv

    cvs = [block_cv(s) if len(s) >= 10 else 0.0 for s in series]
    keep = [s for s, cv in zip(series, cvs) if cv <= MAX_CV]
    if not keep:
        keep = [series[cvs.index(min(cvs))]]
    return keep, len(series) - len(keep)


def _is_samples(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("samples"), list) and bool(value["samples"])


def aggregate_runs(runs: Sequence[Sequence[Record]]) -> list[Record]:
    """One record per case id seen in any run (the newest run's record as the template), with
    latency samples pooled equally from every run that has them and scalar perf values the
    median over the runs. ``data.aggregated_runs`` records how many runs went in."""
    if not runs:
        raise UsageError("a multi-run baseline needs at least one run")
    by_id: dict[str, list[Record]] = {}
    for run in runs:
        for rec in run:
            if rec.perf:
                by_id.setdefault(rec.id, []).append(rec)
    out = []
    for recs in by_id.values():
        template = copy.deepcopy(recs[-1])
        noisy: dict[str, int] = {}
        for key, value in template.perf.items():
            if str(key).startswith("latency_ms") and _is_samples(value):
                series = [r.perf[key]["samples"] for r in recs if _is_samples(r.perf.get(key))]
                quiet, excluded = _quiet(series)
                n = min(len(s) for s in quiet)
                value["samples"] = [x for s in quiet for x in _thin(s, n)]
                if excluded:
                    noisy[str(key)] = excluded
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                values = [r.perf[key] for r in recs if isinstance(r.perf.get(key), (int, float))]
                template.perf[key] = float(statistics.median(values))
        extra = {"aggregated_runs": len(recs), **({"noisy_runs_excluded": noisy} if noisy else {})}
        out.append(replace(template, data={**template.data, **extra}))
    return out


def history_run_dirs(db: str | Path, last: int) -> list[Path]:
    """The directories of the newest ``last`` runs stored in the history database (oldest first)."""
    if last < 1:
        raise UsageError(f"--last must be at least 1, got {last}")
    table = history_runs(db)
    if table.empty:
        raise UsageError(f"{db}: no runs stored (harness history ingest RUN_DIR first)")
    dirs = [Path(str(p)) for p in table["source"].tolist()[-last:]]
    gone = [str(d) for d in dirs if not (d / "results.jsonl").is_file()]
    if gone:
        raise UsageError(f"{db}: stored run director{'y' if len(gone) == 1 else 'ies'} no longer on disk: "
                         f"{', '.join(gone[:3])}")
    return dirs
