"""``harness check --endpoint``: the check pipeline with a served model as its artifact source.

The same stages as a file check (``harness.check.judge``): every served model is one job,
its I/O matched against the reference graph from the server's metadata, judged on every
corpus batch through the workspace's memoised PyTorch FP32 reference with the precision's
tolerances, into a ``check`` record (and ``check_generation`` for a served encoder +
decoder step). Serving adds two stages:

* ``check_concurrency``: the corpus again, each batch split into one request per sentence,
  all in flight at once (so the server's dynamic batcher groups them), judged against the
  outputs of the one-request-per-batch pass with the same tolerances: a server whose batching
  or padding changes results fails this check by name;
* ``check_perf`` (``--perf``): the load sweep (``harness.serving.sweep``), recorded in the perf
  schema, so baselines, the perf gate, history and the HTML report read it as any perf record.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.check.jobs import plan_jobs
from harness.check.judge import (
    CheckOutcome,
    JobResult,
    _judge_generation,
    _record,
    _verdict,
    judge_job,
    numeric_case,
)
from harness.check.request import CheckRequest, resolve
from harness.core import UsageError, describe_error
from harness.judge.numeric import OutputResult, ParityResult, run_graph_parity
from harness.judge.workspace import Workspace
from harness.results import new_run_id
from harness.results.collector import Case
from harness.results.sections import Served
from harness.runners.prebuilt import MappedRunner
from harness.serving.discovery import complete_io
from harness.serving.source import ConcurrentRunner, EndpointGraphs, EndpointRunner, open_endpoint

#: requests in flight at once in the concurrency parity check (capped by the batch size)
CONCURRENT_REQUESTS = 8


def run_endpoint_check(req: CheckRequest, run_dir: Path, run_id: str | None = None) -> CheckOutcome:
    """Judge the served model(s) of ``req.endpoint``; refusals (exit 2) come before any model loads."""
    assert req.endpoint is not None
    began = time.perf_counter()
    run_id = run_id or new_run_id()
    if req.perf is not None:  # the load sweep targets loopback or a configured host only: refused before work
        why = req.endpoint.load_allowed()
        if why:
            raise UsageError(why)
    if req.endpoint.protocol == "openai":  # a generative model behind an OpenAI-compatible API
        from harness.serving.openai_check import run_openai_check

        return run_openai_check(req, run_dir, run_id)
    source, artifacts, _ = open_endpoint(req.endpoint, req.precision)
    try:
        setup = resolve(req, artifacts)
        ws = Workspace(setup.options, source=source)
        spec, variant = setup.spec, setup.variant
        model = ws.model(spec.name)
        family = ws.family(model)
        artifacts = complete_io(ws, model, family, source, artifacts, req.maps)
        outcome = CheckOutcome(spec, variant, setup.precision_note, artifacts, [])
        files = dict(source.records)
        for job in plan_jobs(artifacts, family, model):
            outcome.jobs.append(judge_job(ws, job, source.session(job.artifact.path), model, family,
                                          variant.precision, spec.tolerances, req.maps))
        settings: dict[str, Any] = {
            "batch_size": ws.options.settings.batch_size, "num_samples": len(ws.texts(model)), "corpus": spec.corpus,
            "precision_source": "given" if req.precision else "detected", "maps": dict(req.maps),
            "tolerance_overrides": dict(req.tolerances), "endpoint": req.endpoint.describe()}
        served_records = source.served_records()
        parity = ParityResult(variant.id, [o for j in outcome.jobs for o in j.outputs])
        case = Case(ws, variant, run_dir, f"check[{variant.id}]")
        numeric_case(case, outcome, parity, files)
        Served(served_records).write(case.data)
        errors = [j.error for j in outcome.jobs if j.error]
        outcome.records.append(_record(case, "check", _verdict(parity.assert_ok, errors), began, settings, run_id))
        _judge_concurrency(ws, outcome, source, settings, files, served_records, run_dir, run_id)
        if req.generation and spec.generates:
            _judge_generation(ws, req, outcome, variant, family, settings, files, run_dir, run_id)
        if req.perf is not None:
            from harness.serving.sweep import judge_sweep

            judge_sweep(ws, req, outcome, source, model, family, settings, files, served_records, run_dir, run_id)
        return outcome
    finally:
        source.close()


def _judge_concurrency(ws: Workspace, outcome: CheckOutcome, source: EndpointGraphs, settings: dict[str, Any],
                       files: dict[str, dict[str, Any]], served: dict[str, Any], run_dir: Path, run_id: str) -> None:
    """One ``check_concurrency`` record: every judged job's corpus sent one sentence per request,
    concurrently, against the same job's one-request-per-batch outputs."""
    variant = outcome.variant
    case = Case(ws, variant, run_dir, f"check_concurrency[{variant.id}]")
    case.artifacts.update(files)
    started = time.perf_counter()
    results: list[OutputResult] = []
    notes: dict[str, Any] = {}
    errors: list[str] = []
    for job in outcome.jobs:
        if job.error or job.runner is None or not isinstance(job.runner.session, EndpointRunner):
            continue
        try:
            got, note = concurrency_parity(ws, outcome, job)
        except Exception as exc:  # noqa: BLE001 - the server broke under concurrent load: this check's error
            errors.append(f"{job.job.label} [concurrent]: {describe_error(exc, 300)}")
            continue
        results += got
        notes[job.job.key] = note
    parity = ParityResult(variant.id, results)
    case.metrics.update(parity.metrics())
    case.thresholds.update(parity.thresholds())
    case.data.update(served=served, concurrency=notes, worst=parity.worst())
    if not results and not errors:
        verdict = ("skip", "no served job to send concurrently")
    else:
        verdict = _verdict(parity.assert_ok, errors)
    outcome.records.append(_record(case, "check_concurrency", verdict, started, settings, run_id))


def concurrency_parity(ws: Workspace, outcome: CheckOutcome, job: JobResult) -> tuple[list[OutputResult], dict[str, Any]]:
    """The job's corpus batches sent whole (one request each) and split (one request per row,
    ``CONCURRENT_REQUESTS`` in flight): the split outputs judged against the whole ones."""
    assert job.runner is not None and isinstance(job.runner.session, EndpointRunner)
    model = ws.model(outcome.spec.name)
    family = ws.family(model)
    mapped: MappedRunner = job.runner
    graph = job.job.graph

    def feeds(texts: Any) -> Any:
        return family.check_feeds(model, graph, job.job.mode, texts)

    batches = ws.parity_batches(model, family, graph, ws.batches(model), feeds)
    whole = [(f, mapped.run(f), masks) for f, _, masks in batches]  # the sequential pass: one request per batch
    workers = min(CONCURRENT_REQUESTS, max(len(next(iter(f.values()))) for f, _, _ in batches))
    split = ConcurrentRunner(job.runner.session, workers)
    runner = MappedRunner(split, mapped.input_map, mapped.output_map, mapped.synth, f"{job.job.label} [concurrent]")
    results = run_graph_parity(runner, replace(graph, name=f"{job.job.key}@concurrent"), whole,
                               outcome.variant.precision, outcome.spec.tolerances,
                               output_map={r: r for r in mapped.output_map})
    return results, {"requests": split.requests, "in_flight": workers, "batches": len(batches),
                     "against": "the same served model, one request per batch"}
