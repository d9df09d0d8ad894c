"""Results records for ``harness check``: a thin shim over the one composer
(``harness.results.compose_standalone``), kept so existing callers work unchanged.

The records are the suites' schema, so one results store, ``summary.md``, baselines and gates
serve both. Returns the record as a dict, as ``CheckOutcome.records`` holds them.
"""

from __future__ import annotations

from typing import Any

from harness.recording import Case
from harness.results import compose_standalone, new_run_id
from harness.results.record import as_verdict


def session_run_id(case: Case) -> str:
    """The run id of the check session this case belongs to: one per workspace (a ``harness check``
    session builds one), stored on it on first use, so no id lives at module level."""
    workspace = case.workspace
    run_id = getattr(workspace, "run_id", None)
    if not run_id:
        run_id = new_run_id()
        try:
            workspace.run_id = run_id
        except AttributeError:  # a workspace that takes no attributes: one id per record
            pass
    return str(run_id)


def compose(case: Case, *, suite: str, verdict: str, reason: str, duration_s: float,
            settings: dict[str, Any], run_id: str | None = None) -> dict[str, Any]:
    record = compose_standalone(case, suite=suite, run_id=run_id or session_run_id(case), verdict=as_verdict(verdict),
                                reason=reason, duration_s=duration_s, settings=settings)
    return record.to_dict()
