"""Where a run's time went: totals per phase, and the slowest cases with their phases.

Rendered from the records' ``phases`` and ``duration_s`` only (a renderer computes nothing
new): ``summary.md`` always has the section, the terminal prints it for
``harness run --durations N`` (``--harness-durations N`` under pytest; 0 lists every case).
``other`` is what no phase claims: pytest, fixtures, writing side files.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from harness.core.markdown import table
from harness.core.phases import PHASES
from harness.results.record import Record
from harness.results.sections import Generation, Judged

SUMMARY_CASES = 5


def phase_totals(records: Iterable[Record]) -> dict[str, float]:
    """Seconds per phase over the run, plus ``other``; phases no case used are left out."""
    totals = {name: 0.0 for name in (*PHASES, "other")}
    for r in records:
        claimed = 0.0
        for name, seconds in r.phases.items():
            if name in totals:
                totals[name] += seconds
                claimed += seconds
        totals["other"] += max(r.duration_s - claimed, 0.0)
    return {k: v for k, v in totals.items() if v > 0.0}


def slowest(records: Iterable[Record], n: int) -> list[Record]:
    """The ``n`` slowest cases (all when ``n`` is 0), slowest first."""
    ranked = sorted(records, key=lambda r: r.duration_s, reverse=True)
    return ranked if n == 0 else ranked[:n]


def _phases_text(phases: Mapping[str, float]) -> str:
    ordered = sorted(phases.items(), key=lambda kv: kv[1], reverse=True)
    return ", ".join(f"{name} {seconds:.2f}s" for name, seconds in ordered) or "no phases recorded"


def _share(seconds: float, total: float) -> str:
    return f"{100.0 * seconds / total:.0f}%" if total > 0 else "–"


def replayed(records: Iterable[Record]) -> int:
    """Cases whose variant outputs came from the output cache (nothing changed since)."""
    return sum(1 for r in records if Judged.of(r).replayed_outputs or Generation.of(r).replayed)


def markdown(records: Iterable[Record], n: int = SUMMARY_CASES) -> list[str]:
    """The ``## Where the time went`` section of summary.md: only over cases that recorded
    their phases (a suite run; ``harness check`` and older records have none), else empty."""
    recs = [r for r in records if r.duration_s > 0 and r.verdict != "skip" and r.phases]
    if not recs:
        return []
    totals = phase_totals(recs)
    total = sum(r.duration_s for r in recs)
    lines = ["", "## Where the time went", "",
             f"{len(recs)} case(s), {total:.1f} s in cases; {replayed(recs)} replayed their outputs from the "
             "cache. `harness run --durations N` lists the N slowest cases in the terminal.", "",
             ]
    lines += table(["phase", "seconds", "share"],
                   [(name, f"{seconds:.2f}", _share(seconds, total))
                    for name, seconds in sorted(totals.items(), key=lambda kv: kv[1], reverse=True)])
    lines.append("")
    # ids unquoted: the verdict table above is the case list
    lines += table(["rank", "seconds", "slowest case", "phases"],
                   [(rank, f"{r.duration_s:.2f}", r.id, _phases_text(r.phases)) for rank, r in enumerate(slowest(recs, n), 1)])
    return lines


def terminal_lines(records: Iterable[Record], n: int) -> list[str]:
    """``--durations N``: phase totals, then the N slowest cases (0: all) with their phases."""
    recs = [r for r in records if r.duration_s > 0 and r.verdict != "skip"]
    if not recs:
        return ["no timed harness cases"]
    totals = phase_totals(recs)
    total = sum(r.duration_s for r in recs)
    lines = [f"phases over {len(recs)} case(s), {total:.2f}s "
             f"({replayed(recs)} replayed outputs from the cache):"]
    for name, seconds in sorted(totals.items(), key=lambda kv: kv[1], reverse=True):
        lines.append(f"  {seconds:8.2f}s {_share(seconds, total):>4}  {name}")
    shown = slowest(recs, n)
    lines.append(f"slowest {len(shown)} case(s):")
    lines += [f"  {r.duration_s:8.2f}s  {r.id}  ({_phases_text(r.phases)})" for r in shown]
    return lines
