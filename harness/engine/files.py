"""The files source: ONNX files built elsewhere (optimum-cli, ``torch.onnx.export``, a vendor tool).

Every file is read and validated before the model loads (a truncated file is exit 2 in a second)
and opened once by the provider's backend (``PrebuiltGraphs``); the records carry the runtime
settings the files ran with, ``--profile`` summarises each file's trace, and ``--perf`` times the
files as the perf suites time the harness's own exports (``harness.check.perf``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.case.collector import case_dir_name
from harness.check.judge import generation_runners, job_protocols
from harness.check.perf import measure_prebuilt
from harness.check.request import CheckRequest, resolve
from harness.check.staging import reference_pass, stages
from harness.core import describe_error
from harness.engine.job import conclude
from harness.engine.source import JobRun, JobSource
from harness.perf import budgets
from harness.results.outcome import Decision, decide
from harness.results.sections import Protocols
from harness.runners.prebuilt import PrebuiltGraphs
from harness.runners.profiling import summarise_trace

if TYPE_CHECKING:  # pragma: no cover
    from harness.results.outcome import CaseResult


class FileJobs(JobSource):
    """Files on disk, by path."""

    kind = "files"

    @classmethod
    def open(cls, req: CheckRequest, run_dir: Path) -> FileJobs:
        setup = resolve(req)  # bad files, options and references fail here, before the model loads
        records = {a.path.name: a.record() for a in setup.artifacts}
        graphs = PrebuiltGraphs([a.path for a in setup.artifacts], setup.variant.provider, req.threads, records,
                                setup.variant.precision, setup.options.runtime,
                                profile_dir=run_dir / "cases" / case_dir_name(f"check[{setup.variant.id}]"),
                                deferred=stages(setup.options.settings.release_models, setup.artifacts))
        return cls(setup, graphs)

    def before_judging(self, run: JobRun) -> None:
        """A large model's files are judged in stages (``harness.check.staging``): every reference
        first, then the module freed, then the sessions opened."""
        if self.graphs.deferred:
            reference_pass(run)

    def settings(self, run: JobRun) -> dict[str, Any]:
        variant = run.outcome.variant
        return {"runtime": run.ws.runtime_for(variant, run.model).as_dict(variant.provider.short)}

    def profiles(self) -> dict[str, dict[str, Any]]:
        traces = self.graphs.end_profiling()
        if not traces:
            return {}

        return {name: summarise_trace(trace) for name, trace in traces.items()}

    def perf_stage(self, run: JobRun) -> CaseResult:
        """A ``check_perf`` record with the perf suites' numbers for these files; the model's perf
        budgets (``p50_ms``, ``peak_rss_mb``...) gate it."""
        case = run.case("check_perf")
        Protocols(job_protocols(run.outcome.jobs)).write(case.data)
        case.artifacts.update(self.records)
        started = time.perf_counter()
        family, outcome = run.family, run.outcome
        runners, use_cache, _ = generation_runners(family, outcome.jobs) if family.generates else ({}, False, "")
        try:
            perf, notes = measure_prebuilt(run.ws, outcome.variant, run.model, family, outcome.jobs, run.req.perf,
                                           case.case_dir(), runners if use_cache else None)
            case.perf.update(perf)
            outcome.notes += notes
            outcome.perf = perf
            decision = decide(lambda: budgets.enforce(case, case.perf))
        except Exception as exc:  # noqa: BLE001 - a file that cannot be timed: its verdict, not a crash of the check
            decision = Decision("error", describe_error(exc, 300))
        return conclude(run, case, "check_perf", decision, started)


__all__ = ["FileJobs"]
