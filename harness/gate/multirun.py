"""Baselines that aggregate several runs, so one noisy night cannot blind the gate.

A baseline copied from one run carries that run's noise: recorded while the machine was
busy (bert-tiny p50 0.23 ms but p90 0.62 ms), every later comparison came back INCONCLUSIVE.
Aggregating the last N runs makes run-to-run variance part of the reference: per perf
record (same case id), each run contributes the same number of latency samples (evenly
thinned, order kept, so no run outweighs another), concatenated run after run; scalars
(RSS, sizes, cold start) take the median over the runs. The result is ordinary records,
saved and compared by the existing baseline code.

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


def _thin(samples: list[float], n: int) -> list[float]:
    if len(samples) <= n:
        return list(samples)
    step = len(samples) / n
    return [samples[int(i * step)] for i in range(n)]


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
        for key, value in template.perf.items():
            if str(key).startswith("latency_ms") and _is_samples(value):
                series = [r.perf[key]["samples"] for r in recs if _is_samples(r.perf.get(key))]
                n = min(len(s) for s in series)
                value["samples"] = [x for s in series for x in _thin(s, n)]
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                values = [r.perf[key] for r in recs if isinstance(r.perf.get(key), (int, float))]
                template.perf[key] = float(statistics.median(values))
        out.append(replace(template, data={**template.data, "aggregated_runs": len(recs)}))
    return out


def history_run_dirs(db: str | Path, last: int) -> list[Path]:
    """The directories of the newest ``last`` runs stored in the history database (oldest first)."""
    from harness.results.history import runs as history_runs

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
