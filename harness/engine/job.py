"""A case job through its stages: resolve, run, compare, record, side outputs.

``run_job`` opens the source (every refusal before the model loads), judges each artifact job with
the check's own matching and feeding (``harness.check.judge.judge_job``) and the run's comparison
(``harness.judge.numeric``), accounts the head's outputs (``parity.coverage``), runs the side-output
stages of ``harness.case.pipeline`` (failing-batch dump, repro bundle, error bundle, profile) --
the same for every source -- and composes each record once (:func:`conclude`). Then generation,
the source's own stages, and ``--perf``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.case.pipeline import error_bundle_stage, write_side_outputs
from harness.check.jobs import plan_jobs
from harness.check.judge import CheckOutcome, JobResult, job_protocols, judge_generation, judge_job, numeric_case
from harness.core import describe_error
from harness.engine.source import JobRun, JobSource
from harness.judge.coverage import numeric_coverage
from harness.judge.generation import record as record_generation
from harness.judge.numeric import ParityResult, lint_result
from harness.judge.workspace import Workspace
from harness.results import compose_standalone, new_run_id
from harness.results.outcome import CaseResult, Decision, decide
from harness.results.sections import Protocols
from harness.runners.failures import explain

if TYPE_CHECKING:  # pragma: no cover
    from harness.case.collector import Case
    from harness.check.request import CheckRequest


def run_job(req: CheckRequest, source_type: type[JobSource], run_dir: Path, run_id: str | None = None) -> CheckOutcome:
    """Judge one request's artifacts from ``source_type``; records carry ``run_id`` (one per
    invocation of a front end)."""
    began = time.perf_counter()
    source = source_type.open(req, run_dir)
    try:
        setup = source.setup
        ws = Workspace(setup.options, source=source.graphs)
        model = ws.model(setup.spec.name)
        family = ws.family(model)
        artifacts = source.complete(ws, model, family, req)
        run = JobRun(ws, req, source, CheckOutcome(setup.spec, setup.variant, setup.precision_note, artifacts, []),
                     model, family, run_dir, run_id or new_run_id())
        run.settings = {**common_settings(run), **source.settings(run)}
        source.before_judging(run)
        run.outcome.results.append(numeric_stage(run, began))
        run.outcome.results += source.extra_stages(run)
        if req.generation and setup.spec.generates:
            generated = generation_stage(run)
            if generated is not None:
                run.outcome.results.append(generated)
        if req.perf is not None:
            run.outcome.results.append(source.perf_stage(run))
        return run.outcome
    finally:
        source.close()


def common_settings(run: JobRun) -> dict[str, Any]:
    """What every check record's ``settings`` says, whichever the source."""
    req, spec = run.req, run.outcome.spec
    return {"batch_size": run.ws.options.settings.batch_size, "num_samples": len(run.ws.texts(run.model)),
            "corpus": spec.corpus, "precision_source": "given" if req.precision else "detected", "maps": dict(req.maps),
            "tolerance_overrides": dict(req.tolerances)}


def numeric_stage(run: JobRun, began: float) -> CaseResult:
    """Every job's numbers into one ``check`` record: run and compare each job, lint each file
    once, account the head's outputs, then the side outputs, then the record."""
    ws, outcome, variant = run.ws, run.outcome, run.outcome.variant
    linted: set[Path] = set()
    for job in plan_jobs(outcome.artifacts, run.family, run.model):
        result = judge_job(ws, job, run.source.session(job.artifact), run.model, run.family, variant.precision,
                           outcome.spec.tolerances, run.req.maps, run.req.protocol, run.req.protocol_origin)
        if run.source.session(job.artifact).path and job.artifact.path not in linted:  # a file: its static checks
            linted.add(job.artifact.path)
            result.outputs.insert(0, lint_result(job.key, str(job.artifact.path), job.graph,
                                                 result.match.input_map if result.match else None,
                                                 variant.precision, outcome.spec.tolerances))
        outcome.jobs.append(result)
    parity = ParityResult(variant.id, [o for j in outcome.jobs for o in j.outputs])  # shapes: per job
    # the same accounting as a suite case: the head's outputs of every judged artifact must be gated
    parity.coverage = numeric_coverage(run.family, [(j.job.key, j.job.graph) for j in outcome.jobs], parity.outputs,
                                       run.family.task(run.model.config))
    case = run.case("check")
    for j in outcome.jobs:  # the side-output stages: failing-batch dump, repro bundle, error bundle
        if j.judged is not None:
            write_side_outputs(ws, variant, run.model, j.judged, case.case_dir(), parity.side)
        if j.broke is not None:
            error_bundle_stage(ws, variant, run.model, j.broke, case.case_dir(), parity.side)
    parity.side.profiles.update(by_graph(run.source.profiles(), outcome.jobs))
    numeric_case(case, outcome, parity, run.source.records)
    run.source.annotate(case)
    errors = [j.error for j in outcome.jobs if j.error]
    return conclude(run, case, "check", decide(parity.assert_ok, errors), began, parity)


def by_graph(profiles: dict[str, dict[str, Any]], jobs: list[JobResult]) -> dict[str, dict[str, Any]]:
    """A source's profiles (one per artifact file) under the name of the graph judged on that file, as
    a suite case names its graphs' profiles, dumps and bundles; a file that served several graphs
    (a merged decoder's modes) keeps its file name: its one session profiled them all."""
    out: dict[str, dict[str, Any]] = {}
    for name, summary in profiles.items():
        keys = [j.job.key for j in jobs if j.job.artifact.path.name == name]
        out[keys[0] if len(keys) == 1 else name] = summary
    return out


def generation_stage(run: JobRun) -> CaseResult | None:
    """Decode with the artifacts and with PyTorch into a ``check_generation`` record; None when
    the artifacts cannot decode (the note says why)."""
    case = run.case("check_generation")
    Protocols(job_protocols(run.outcome.jobs)).write(case.data)
    started = time.perf_counter()
    try:
        decoded, note = judge_generation(run.ws, run.outcome.variant, run.family, run.outcome.jobs, run.req.gen_samples,
                                         run.req.gen_settings)
    except Exception as exc:  # noqa: BLE001 - a decoding crash in the artifact is its verdict, not ours
        case.artifacts.update(run.source.records)

        return conclude(run, case, "check_generation", Decision("error", explain(describe_error(exc, 300))), started)
    if note:
        run.outcome.notes.append(note)
    if decoded is None:
        return None
    run.outcome.generation = decoded
    record_generation(case, decoded)
    return conclude(run, case, "check_generation", decide(decoded.assert_ok), started)


def conclude(run: JobRun, case: Case, suite: str, decision: Decision, started: float,
             parity: ParityResult | None = None) -> CaseResult:
    """A case job's record, with the job's settings and run id (``compose_case``)."""
    return compose_case(case, suite, decision, started, run.settings, run.run_id, parity)


def compose_case(case: Case, suite: str, decision: Decision, started: float, settings: dict[str, Any], run_id: str,
                 parity: ParityResult | None = None) -> CaseResult:
    """The one place a front end without pytest composes a record: the run's composer, the suites' schema."""
    record = compose_standalone(case, suite=suite, run_id=run_id, verdict=decision.verdict, reason=decision.reason,
                                duration_s=time.perf_counter() - started, settings=settings)
    return CaseResult(suite, decision, record, parity)


__all__ = ["by_graph", "common_settings", "compose_case", "conclude", "generation_stage", "numeric_stage", "run_job"]
