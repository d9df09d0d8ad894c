"""Records for the selected cases a signal stopped before they finished.

An interrupted run writes records only for the cases that finished; a CI system reading
``junit.xml`` then saw ``tests=50 failures=0`` with the 28 cases that never ran absent — green.
These placeholder records (verdict ``not-run``, ``data.interrupted`` naming the signal) let the
JUnit file list every selected case (as an ``<error>``) and the HTML tally and grid count them.
They are never written to ``results.jsonl``: a rerun supersedes nothing that did not happen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.results.record import Record
from harness.results.sections import Interrupted

if TYPE_CHECKING:  # pragma: no cover
    from harness.core.interrupts import Interruption


def not_run_records(stopped: Interruption | None, run_id: str = "") -> list[Record]:
    """One ``not-run`` record per case ``stopped`` left unfinished (none for a finished run)."""
    if stopped is None:
        return []
    reason = f"not run: the run was interrupted by {stopped.signal} (exit {stopped.exit_code}) before this case finished"
    out = []
    for nodeid in stopped.not_run:
        case = stopped.cases.get(nodeid) or {}

        def get(key: str, case: object = case) -> str | None:
            value = case.get(key) if isinstance(case, dict) else None
            return None if value is None else str(value)

        out.append(Record(id=nodeid.split("::")[-1], verdict="not-run", nodeid=nodeid, run_id=run_id,
                          suite=get("suite") or nodeid.split("::")[-1].split("[", 1)[0],
                          variant=get("variant"), model=get("model"), precision=get("precision"),
                          backend=get("backend"), provider=get("provider"),
                          execution_provider=get("execution_provider"), reason=reason,
                          data=_interrupted(stopped.signal)))
    return out


def _interrupted(signal: str | None) -> dict[str, str]:
    data: dict[str, str] = {}
    Interrupted(signal).write(data)
    return data
