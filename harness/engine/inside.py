"""A case job judged inside a suite case: the artifact suites' front end.

``test_artifact_parity`` / ``test_artifact_perf`` judge the files a team lists under
``[models.<name>.artifacts]`` with the engine's files source, as ``harness check`` does, inside the
run's own case: the job's records become the case's metrics, thresholds, artifacts and
``data.<suite>``, and the job's decisions (the graver one) become the case's decision.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.check.request import CheckRequest
from harness.core import Variant
from harness.engine.files import FileJobs
from harness.engine.job import run_job
from harness.results.outcome import Decision

if TYPE_CHECKING:  # pragma: no cover
    from harness.case.collector import Case


def config_artifact_request(variant: Variant, case: Case, **given: Any) -> CheckRequest:
    """The check request of a config-listed artifact at ``variant``'s precision, with the run's sizes."""
    ws = case.workspace
    spec = ws.spec(variant.model)
    settings = ws.options.settings
    return CheckRequest(reference=spec.name, spec=spec, onnx=Path(spec.extra["artifacts"][variant.precision.value]),
                        precision=variant.precision.value, provider=variant.provider.short, samples=settings.samples,
                        batch_size=settings.batch_size, threads=settings.threads, **given)


def judge_inside(case: Case, request: CheckRequest, suites: Iterable[str] | None = None) -> Decision:
    """Run the job, fold the records of ``suites`` (all when None) into ``case``; the case's decision."""
    outcome = run_job(request, FileJobs, case.run_dir)
    wanted = None if suites is None else set(suites)
    decision = Decision("pass")
    for result in outcome.results:
        if wanted is not None and result.suite not in wanted:
            continue
        record = result.record
        case.metrics.update(record.metrics)
        case.thresholds.update(record.thresholds)
        case.artifacts.update(record.artifacts)
        case.perf.update(record.perf)
        case.data[result.suite] = record.data
        decision = _joined(decision, result.decision)
    case.conclude(decision)
    return decision


def _joined(seen: Decision, new: Decision) -> Decision:
    """Two records' decisions as one case's: the graver verdict, the reasons of that verdict joined."""
    if new.verdict == seen.verdict and new.failed:
        return Decision(seen.verdict, "; ".join(r for r in (seen.reason, new.reason) if r))
    return seen.worse(new) if new.failed else seen


__all__ = ["config_artifact_request", "judge_inside"]
