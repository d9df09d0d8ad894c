"""The endpoint source: a served model judged as a case job (``harness check --endpoint``).

Every served model is one artifact: the server's metadata is what the I/O matcher reads, one
request per corpus batch is its runner (``harness.serving.source``). The engine's stages are the
same as for files (``harness.engine``): matching, parity on every batch against the memoised
PyTorch FP32 reference, the head's coverage, the failing-batch dump, the ``check`` record and
``check_generation`` for a served encoder + decoder step. A served model has no file, so there is
nothing to lint, bundle or profile on this side. Serving adds two stages:

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
from typing import TYPE_CHECKING, Any

from harness.case.collector import Case
from harness.check.judge import JobResult
from harness.check.request import CheckRequest, resolve
from harness.core import UsageError, describe_error
from harness.engine import JobRun, JobSource, conclude
from harness.judge.numeric import OutputResult, ParityResult, run_graph_parity
from harness.results.outcome import CaseResult, Decision, decide
from harness.results.sections import Served
from harness.runners.prebuilt import MappedRunner
from harness.serving.discovery import complete_io
from harness.serving.source import ConcurrentRunner, EndpointGraphs, EndpointRunner, open_endpoint
from harness.serving.sweep import judge_sweep

if TYPE_CHECKING:  # pragma: no cover
    from harness.check.layout import ArtifactFile
    from harness.families import Family
    from harness.judge.workspace import Workspace
    from harness.zoo.loading import LoadedModel

#: requests in flight at once in the concurrency parity check (capped by the batch size)
CONCURRENT_REQUESTS = 8


class EndpointJobs(JobSource):
    """The served model(s) of ``req.endpoint``, over the Open Inference Protocol."""

    kind = "endpoint"
    graphs: EndpointGraphs

    @classmethod
    def open(cls, req: CheckRequest, run_dir: Path) -> EndpointJobs:
        """Refusals (exit 2) before any model loads: a sweep against a host it may not load,
        an unreachable server, a model it does not serve, references that do not resolve."""
        assert req.endpoint is not None
        if req.perf is not None:
            why = req.endpoint.load_allowed()
            if why:
                raise UsageError(why)
        graphs, artifacts, _ = open_endpoint(req.endpoint, req.precision)
        try:
            return cls(resolve(req, artifacts), graphs)
        except BaseException:
            graphs.close()
            raise

    def complete(self, ws: Workspace, model: LoadedModel, family: Family, req: CheckRequest) -> list[ArtifactFile]:
        """A side the server's metadata does not describe is filled in from the reference
        (``harness.serving.discovery``)."""
        return complete_io(ws, model, family, self.graphs, self.artifacts, req.maps)

    def settings(self, run: JobRun) -> dict[str, Any]:
        assert run.req.endpoint is not None
        return {"endpoint": run.req.endpoint.describe()}

    def annotate(self, case: Case) -> None:
        Served(self.graphs.served_records()).write(case.data)

    def extra_stages(self, run: JobRun) -> list[CaseResult]:
        return [judge_concurrency(run, self)]

    def perf_stage(self, run: JobRun) -> CaseResult:
        return judge_sweep(run, self.graphs, self.graphs.served_records())


def judge_concurrency(run: JobRun, source: EndpointJobs) -> CaseResult:
    """One ``check_concurrency`` record: every judged job's corpus sent one sentence per request,
    concurrently, against the same job's one-request-per-batch outputs."""
    variant = run.outcome.variant
    case = run.case("check_concurrency")
    case.artifacts.update(source.records)
    started = time.perf_counter()
    results: list[OutputResult] = []
    notes: dict[str, Any] = {}
    errors: list[str] = []
    for job in run.outcome.jobs:
        if job.error or job.runner is None or not isinstance(job.runner.session, EndpointRunner):
            continue
        try:
            got, note = concurrency_parity(run, job)
        except Exception as exc:  # noqa: BLE001 - the server broke under concurrent load: this check's error
            errors.append(f"{job.job.label} [concurrent]: {describe_error(exc, 300)}")
            continue
        results += got
        notes[job.job.key] = note
    parity = ParityResult(variant.id, results)
    case.metrics.update(parity.metrics())
    case.thresholds.update(parity.thresholds())
    case.data.update(served=source.graphs.served_records(), concurrency=notes, worst=parity.worst())
    if not results and not errors:
        decision = Decision("skip", "no served job to send concurrently")
    else:
        decision = decide(parity.assert_ok, errors)
    return conclude(run, case, "check_concurrency", decision, started, parity)


def concurrency_parity(run: JobRun, job: JobResult) -> tuple[list[OutputResult], dict[str, Any]]:
    """The job's corpus batches sent whole (one request each) and split (one request per row,
    ``CONCURRENT_REQUESTS`` in flight): the split outputs judged against the whole ones."""
    assert job.runner is not None and isinstance(job.runner.session, EndpointRunner)
    ws, model, family = run.ws, run.model, run.family
    mapped: MappedRunner = job.runner
    graph = job.job.graph

    def feeds(texts: Any) -> Any:
        return family.check_feeds(model, graph, job.job.mode, texts)

    batches = ws.refs.parity_batches(model, family, graph, ws.batches(model), feeds)
    whole = [(f, mapped.run(f), masks) for f, _, masks in batches]  # the sequential pass: one request per batch
    workers = min(CONCURRENT_REQUESTS, max(len(next(iter(f.values()))) for f, _, _ in batches))
    split = ConcurrentRunner(job.runner.session, workers)
    runner = MappedRunner(split, mapped.input_map, mapped.output_map, mapped.synth, f"{job.job.label} [concurrent]")
    results = run_graph_parity(runner, replace(graph, name=f"{job.job.key}@concurrent"), whole,
                               run.outcome.variant.precision, run.outcome.spec.tolerances,
                               output_map={r: r for r in mapped.output_map})
    return results, {"requests": split.requests, "in_flight": workers, "batches": len(batches),
                     "against": "the same served model, one request per batch"}


__all__ = ["CONCURRENT_REQUESTS", "EndpointJobs", "concurrency_parity", "judge_concurrency"]
