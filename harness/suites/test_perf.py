"""Performance of every variant (opt-in: ``--harness-perf``).

* ``test_latency``: warmup, then per-call samples of each graph at the configured batch
  sizes and sequence lengths; percentiles, throughput and the raw samples are recorded.
* ``test_cold_start_memory``: fresh processes load the variant and run it once: load and
  first-inference time, peak RSS beside an empty interpreter's, artifact size on disk.
* ``test_generation_perf``: time to first token, time per output token and tokens/s,
  with and without the KV cache (generative models only).
* ``test_artifact_perf``: the same numbers for the files a team built itself, listed in the
  suite config (``[models.<name>.artifacts]``), measured by ``harness check --perf``'s code.

Budgets in a model's spec (``p50_ms``, ``peak_rss_mb``, ``artifact_mb``...) fail the case
that measures them; the baseline gate (``--harness-baseline-compare``) judges change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from harness.case.collector import Case
from harness.core import Variant
from harness.core.phases import phase
from harness.perf import budgets, coldstart, generation, latency, memory
from harness.perf.canary import Canary
from harness.perf.measure import PerfSettings, engine_for, latency_key
from harness.repro.perf import bundle_on_breach, cold_start_on_breach, generation_on_breach
from harness.results.envinfo import thread_settings
from harness.results.sections import PerfSetup
from harness.runners.base import GraphRef
from harness.suites import has_config_artifacts, runs_config_artifact, timed_backend

if TYPE_CHECKING:  # pragma: no cover
    pass

# one skip for the whole module without --harness-perf: no per-case records, no slower default run
pytestmark = pytest.mark.harness_perf_suite


def _graphs_and_plan(harness: Case, settings: PerfSettings) -> Any:
    ws, model = harness.workspace, harness.model
    family = ws.family(model)
    points, skipped = latency.plan(model, family, ws.texts(model), settings)
    return ws, model, family, points, skipped


def _settings_record(harness: Case, settings: PerfSettings, **extra: Any) -> PerfSetup:
    options = harness.workspace.options
    return PerfSetup({**settings.as_dict(),
                      "threads": thread_settings(options.settings.threads, options.settings.inter_threads), **extra})


@pytest.mark.harness(accepts=timed_backend)
def test_latency(variant: Variant, harness: Case, perf_settings: PerfSettings, benchmark_or_none: Any) -> None:
    ws, model, family, points, skipped = _graphs_and_plan(harness, perf_settings)
    backend = ws.backend(variant, model)
    graphs = list({p.graph.name: p.graph for p in points}.values())
    ws.memory.before_session(backend, model, family, variant, graphs)  # a large model's module is not timed beside
    runners = {}
    try:
        for graph in graphs:
            runners[graph.name] = backend.load(GraphRef(model, family, graph, variant))
            # the files timed, with their cache keys: what `baseline save` blesses and re-times paired
            harness.artifacts.update(backend.artifacts(GraphRef(model, family, graph, variant)))
        # each runner's timed call runs to completion (a device synchronise is its own business)
        with phase("perf"):  # the canary: the machine's speed beside this record's numbers (gate/canary.py)
            measured = latency.measure(runners, points, perf_settings, engine_for(benchmark_or_none), canary=Canary())
        harness.perf.update(measured)
    finally:
        for runner in runners.values():
            runner.close()
    _settings_record(harness, perf_settings, skipped_buckets=skipped).write(harness.perf)
    primary = measured[latency_key()]
    if benchmark_or_none is not None and primary["engine"] == "pytest-benchmark":
        benchmark_or_none.extra_info["harness"] = {k: primary["summary"][k] for k in ("p50", "p90", "p95", "p99")}
    with bundle_on_breach(harness, points[0], perf_settings):  # a latency budget breach: its repro bundle
        budgets.enforce(harness, harness.perf)


@pytest.mark.harness(accepts=timed_backend)
def test_cold_start_memory(variant: Variant, harness: Case, perf_settings: PerfSettings) -> None:
    reason = coldstart.unsupported_reason(variant)
    if reason:
        pytest.skip(reason)
    ws, model, family, points, _ = _graphs_and_plan(harness, perf_settings)
    graphs = family.graphs(model)
    feeds = coldstart.write_feeds(harness.side_file("feeds.npz"), latency.feeds_by_graph(points))
    args = coldstart.child_args(ws, variant, model, family, graphs, feeds)
    with phase("perf"):
        runs = coldstart.fresh_runs(args, perf_settings.repeats)
    harness.perf.update(coldstart.cold_start_fields(runs))
    harness.perf.update(memory.memory_fields(runs, memory.floors(variant.backend)))
    harness.perf.update(memory.artifact_fields(ws, variant, model, family, graphs))
    _settings_record(harness, perf_settings, child=args).write(harness.perf)
    with cold_start_on_breach(harness, args, perf_settings):  # a cold-start / memory / size breach: its bundle
        budgets.enforce(harness, harness.perf)


@pytest.mark.harness(generates=True, accepts=timed_backend)
def test_generation_perf(variant: Variant, harness: Case, perf_settings: PerfSettings) -> None:
    ws, model = harness.workspace, harness.model
    family = ws.family(model)
    backend = ws.backend(variant, model)
    ws.memory.before_session(backend, model, family, variant)
    runners = {}
    try:
        for graph in family.graphs(model):
            runners[graph.name] = backend.load(GraphRef(model, family, graph, variant))
        with phase("perf"):
            harness.perf.update(generation.measure_generation(model, family, runners, ws.texts(model),
                                                              perf_settings))
    finally:
        for runner in runners.values():
            runner.close()
    _settings_record(harness, perf_settings).write(harness.perf)
    with generation_on_breach(harness, perf_settings):  # a ttft / tpot breach: its repro bundle
        budgets.enforce(harness, harness.perf)


@pytest.mark.harness(where=has_config_artifacts, accepts=runs_config_artifact)
def test_artifact_perf(variant: Variant, harness: Case, perf_settings: PerfSettings) -> None:
    from harness.engine.inside import config_artifact_request, judge_inside

    request = config_artifact_request(variant, harness, generation=False, perf=perf_settings,
                                      runtime=harness.workspace.runtime_for(variant))
    judge_inside(harness, request, suites=["check_perf"]).tell_pytest()  # the model's budgets gate check_perf
