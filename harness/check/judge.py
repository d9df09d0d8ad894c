"""Judge pre-built ONNX artifacts against the PyTorch FP32 reference (``harness check``).

The artifact is what ships, built by someone else's pipeline; the harness only reads it.
Every file is read and validated before the model loads (a truncated file is exit 2 in
a second), and each job's I/O is matched before it runs. Past that, a check is the run
pipeline (``harness.judge.pipeline``) with another artifact source: the files become a
``PrebuiltGraphs`` given to the suites' ``Workspace``, whose ONNX variant then runs them.
Batches, the memoised FP32 reference, ``run_graph_parity``, embedding parity and
``generation_parity`` are the suites' own functions; every judged job then goes through the
same record stage (``Case.record_parity``) and side-output stages (failing-batch dump, repro
bundle) as a suite case, so one summary, baseline, gate and ``harness repro`` serve both.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harness.check.io_match import IOMatch, match_io, reference_info
from harness.check.jobs import Job, fit_sequence, plan_jobs
from harness.check.layout import ArtifactFile
from harness.check.protocol.adapt import ProtocolRunner, canonical_inputs, canonical_outputs
from harness.check.protocol.fit import (
    cut_sentences,
    last_token_reference,
    protocol_pairs,
    resolve_protocol,
    wants_last_logits,
)
from harness.check.protocol.model import Logits, Protocol
from harness.check.request import CheckRequest, CheckSetup, resolve
from harness.check.synth import synthesizers
from harness.core import Precision, UsageError, Variant, describe_error
from harness.families import Family
from harness.families.base import CheckedGraph
from harness.judge.embedding import embedding_parity
from harness.judge.generation import GenerationRequest, GenerationResult, generation_parity
from harness.judge.generation import record as record_generation
from harness.judge.numeric import (
    GateFailure,
    OutputResult,
    ParityResult,
    lint_result,
    probe_batches,
    run_graph_parity,
)
from harness.judge.pipeline import GraphError, GraphJudgement, error_bundle_stage, write_side_outputs
from harness.judge.workspace import Workspace
from harness.repro import EmbeddingDerived
from harness.results import compose_standalone, new_run_id
from harness.results.collector import Case
from harness.results.record import as_verdict, run_green
from harness.runners.base import GraphRunner
from harness.runners.prebuilt import MappedRunner, PrebuiltGraphs
from harness.zoo.base import ModelSpec
from harness.zoo.loading import LoadedModel

__all__ = ["CheckOutcome", "CheckRequest", "JobResult", "run_check"]


@dataclass
class JobResult:
    job: Job
    match: IOMatch | None = None
    outputs: list[OutputResult] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    runner: MappedRunner | None = None
    #: every shape tried (corpus batches and shape probes)
    shapes: list[dict[str, Any]] = field(default_factory=list)
    #: what the side-output stages need (runner, batches as judged, judged outputs); None if it broke
    judged: GraphJudgement | None = None
    #: the file raised while judged: what the error-bundle stage needs
    broke: GraphError | None = None
    #: the file's I/O protocol as judged (inferred, then overridden)
    protocol: Protocol | None = None
    #: a baked sequence length: (sentences cut, sentences, length, declared intended)
    cut: tuple[int, int, int, bool] | None = None


@dataclass
class CheckOutcome:
    spec: ModelSpec
    variant: Variant
    precision_note: str
    artifacts: list[ArtifactFile]
    jobs: list[JobResult]
    records: list[dict[str, Any]] = field(default_factory=list)
    generation: GenerationResult | None = None
    notes: list[str] = field(default_factory=list)
    #: ``--perf``: the perf fields of the ``check_perf`` record
    perf: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        return 0 if run_green(r["verdict"] for r in self.records) else 1  # not-run and judged-nothing fail too


# -- one job ------------------------------------------------------------------------------------------
def judge_job(ws: Workspace, job: Job, session: GraphRunner, model: LoadedModel, family: Family,
              precision: Precision, overrides: Mapping[str, Mapping[str, float]], maps: Mapping[str, str],
              protocol_table: Mapping[str, Any] | None = None, protocol_origin: str = "--io-protocol") -> JobResult:
    """Match the job's I/O on the first corpus batch (UsageError if impossible), then compare
    on every batch through the workspace's memoised FP32 reference, as the suites do."""
    result = JobResult(job)
    factories = synthesizers(model, family)

    def feeds(texts: Sequence[str]) -> dict[str, np.ndarray]:
        # through the reference cache: a seq2seq decoder's feeds hold PyTorch encoder states, so a
        # warm check that recomputed them loaded the module (and transformers) for nothing
        return ws.check_feeds(model, family, job.graph, job.mode, [texts])[0]

    feeds0 = feeds(ws.batches(model)[0])
    ref0 = ws.references_for(model, family, job.graph, [feeds0])[0]
    ref_in = reference_info({n: feeds0[n] for n in job.graph.input_names if n in feeds0})
    art = job.artifact
    protocol = resolve_protocol(art, protocol_table, protocol_origin, maps)
    logits_ref = next((n for n in job.graph.logits_outputs), None)
    file_logits = next((t for t in art.outputs if t.name == protocol.logits_output), None)
    protocol = wants_last_logits(protocol, ref0[logits_ref].ndim if logits_ref in ref0 else None,
                                 len(file_logits.shape) if file_logits and file_logits.shape is not None else None)
    result.protocol = protocol
    if protocol.adapts:
        session = ProtocolRunner(session, protocol, art.inputs, art.outputs)
    match = match_io(job.label, ref_in, reference_info(ref0), canonical_inputs(protocol, art.inputs),
                     canonical_outputs(protocol, art.outputs),
                     synthesizable={k: v[0] for k, v in factories.items()}, gated_outputs=job.graph.gated_outputs,
                     user_map=dict(protocol.names), protocol_pairs=protocol_pairs(protocol))
    result.match = match
    infos = {t.name: t for t in canonical_inputs(protocol, art.inputs)}
    synth = {name: factories[what][1](infos[name]) for name, what in match.synthesized.items()}
    runner = MappedRunner(session, match.input_map, match.output_map, synth, job.label)
    result.runner = runner

    rows = bool(protocol.rows_because)
    static_batch = None if rows else protocol.static_batch
    static_seq = protocol.static_sequence if family.pads_static_sequence else None
    chunks = ws.batches(model, static_batch)
    if static_seq:  # counted on the corpus as it is, before a short last batch is filled
        masks = [m for texts in chunks if (m := feeds(texts).get("attention_mask")) is not None]
        cut, total = cut_sentences(masks, static_seq)
        result.cut = (cut, total, static_seq, protocol.static_intended)
        result.notes.append(f"static sequence length {static_seq}: inputs padded (masked) or cut to it; "
                            f"{cut} of {total} sentences longer than the baked {static_seq} tokens"
                            + (" (declared intended)" if protocol.static_intended else ""))
    if static_batch and len(chunks[-1]) != static_batch:  # filled with its own sentences: every one is judged
        short = list(chunks[-1])
        result.notes.append(f"static batch {static_batch}: the last batch of {len(short)} sentence(s) is filled "
                            "with repeats of its own sentences")
        chunks[-1] = [*short, *(short[i % len(short)] for i in range(static_batch - len(short)))]
    if rows:
        result.notes.append(protocol.rows_because)
    if protocol.one_token:
        result.notes.append("one token per call: the file's sequence length is fixed at 1 (each call fed the "
                            "presents of the one before)")
    if not chunks:
        raise UsageError(f"{art.path}: static batch size {static_batch} exceeds the {len(ws.texts(model))} "
                         "corpus sentences")
    pad = int(getattr(model.tokenizer, "pad_token_id", 0) or 0)

    def fitted(texts: Sequence[str]) -> dict[str, np.ndarray]:
        return fit_sequence(feeds(texts), static_seq, pad) if static_seq else feeds(texts)

    ws.check_feeds(model, family, job.graph, job.mode, chunks)  # every batch's feeds: one cache entry
    batches = ws.parity_batches(model, family, job.graph, chunks, fitted)
    # shape probes (target != source length, other past lengths) where the file's shapes are dynamic
    probes = probe_batches(ws, model, family, job.graph, batches[0][0]) if not (static_seq or static_batch) else []
    if protocol.logits is Logits.LAST and logits_ref:  # the reference adapts: its last token only
        batches = [(dict(f), dict(r), dict(m)) for f, r, m in last_token_reference(batches, logits_ref)]
        probes = [(label, last_token_reference([b], logits_ref)[0]) for label, b in probes]
    pooling = family.sentence_pooling(model, job.graph) if "last_hidden_state" in match.output_map else None
    runner.recorded = [] if pooling else None
    start = time.perf_counter()
    graph = replace(job.graph, name=job.key)
    try:
        result.outputs = run_graph_parity(runner, graph, batches, precision, overrides,
                                          output_map={r: r for r in match.output_map}, probes=probes,
                                          shapes=result.shapes)
    except Exception as exc:  # noqa: BLE001 - the artifact ran and broke: its verdict is "error", others still run
        from harness.runners.failures import explain

        result.error = f"{job.label}: {explain(describe_error(exc, 300))}"
        result.broke = GraphError(job.key, runner, [dict(b[0]) for b in batches], exc)
        return result
    finally:
        result.seconds = time.perf_counter() - start
    if result.cut is not None:
        result.outputs.append(coverage_result(job.key, result.cut, precision, overrides))
    derived = None
    if pooling:  # the sentence vector a search index stores, judged like any other output
        corpus = (runner.recorded or [])[: len(batches)]  # the shape probes' outputs come after the corpus's
        result.outputs.append(embedding_parity(job.key, pooling, batches, corpus, precision, overrides).output)
        derived = EmbeddingDerived(pooling.mode, pooling.normalize)
    result.judged = GraphJudgement(graph, runner, [*batches, *(b for _, b in probes)], list(result.outputs), derived)
    return result


# -- generation ------------------------------------------------------------------------------------------
def generation_runners(family: Family, jobs: list[JobResult]) -> tuple[dict[str, GraphRunner], bool, str]:
    """Runners by reference graph name for the decoding loops, whether a cache is usable,
    and '' -- or why generation cannot run on these files (the family decides)."""
    judged: dict[str, CheckedGraph] = {}
    for j in jobs:  # a dedicated file wins over the merged one for the same graph
        # a file whose numeric check failed still decodes (with its own cache, judged in the closed
        # loop of harness.judge.cached_decoding): leaving it out decoded uncached and passed quietly
        if j.runner is not None and j.match is not None and \
                (j.job.mode not in judged or j.job.artifact.role != "merged"):
            judged[j.job.mode] = CheckedGraph(j.runner, _gives_cache(j), str(j.job.artifact.path))
    return family.decoding_runners(judged)


def _gives_cache(result: JobResult) -> bool:
    """Whether the artifact returns every KV-cache tensor the next step needs."""
    assert result.match is not None
    presents = [n for n in result.job.graph.output_names if n.startswith("present")]
    return bool(presents) and all(n in result.match.output_map for n in presents)


def judge_generation(ws: Workspace, variant: Variant, family: Family, jobs: list[JobResult],
                     samples: int | None, base: GenerationRequest | None = None) -> tuple[GenerationResult | None, str]:
    """(GenerationResult | None, note): decode with the artifacts and with PyTorch, score --
    the generation suite's own function, on a workspace whose ONNX variant runs the files."""
    runners, use_cache, why = generation_runners(family, jobs)
    if why:
        return None, f"generation parity skipped: {why}"
    assert ws.prebuilt is not None
    ws.prebuilt.serve(runners)
    request = replace(base or GenerationRequest(), use_cache=use_cache)
    if samples is not None:
        request = replace(request, samples=samples)
    return generation_parity(ws, variant, request, family), ("" if use_cache else
                                                            "decoded without a KV cache (no cached graph given)")


# -- the whole check -----------------------------------------------------------------------------------------
def run_check(req: CheckRequest, run_dir: Path, run_id: str | None = None) -> CheckOutcome:
    """Judge one request's files; records carry ``run_id`` (one per ``harness check`` invocation)."""
    began = time.perf_counter()
    run_id = run_id or new_run_id()
    setup = resolve(req)  # bad files, options and references fail here, before the model loads
    files = {a.path.name: a.record() for a in setup.artifacts}
    from harness.results.collector import case_dir_name

    source = PrebuiltGraphs([a.path for a in setup.artifacts], setup.variant.provider, req.threads, files,
                            setup.variant.precision, setup.options.runtime,
                            profile_dir=run_dir / "cases" / case_dir_name(f"check[{setup.variant.id}]"))
    try:
        ws = Workspace(setup.options, prebuilt=source)
        return _judge(ws, req, setup, files, run_dir, began, run_id)
    finally:
        source.close()


def _judge(ws: Workspace, req: CheckRequest, setup: CheckSetup, files: dict[str, dict[str, Any]], run_dir: Path,
           began: float, run_id: str) -> CheckOutcome:
    """Every job's numbers into one ``check`` record, then generation into ``check_generation``."""
    spec, variant, artifacts = setup.spec, setup.variant, setup.artifacts
    model = ws.model(spec.name)
    family = ws.family(model)
    outcome = CheckOutcome(spec, variant, setup.precision_note, artifacts, [])
    linted: set[Path] = set()
    assert ws.prebuilt is not None
    for job in plan_jobs(artifacts, family, model):
        result = judge_job(ws, job, ws.prebuilt.session(job.artifact.path), model, family, variant.precision,
                           spec.tolerances, req.maps, req.protocol, req.protocol_origin)
        if job.artifact.path not in linted:  # the suites' static checks (training-mode ops), once per file
            linted.add(job.artifact.path)
            result.outputs.insert(0, lint_result(job.key, str(job.artifact.path), job.graph,
                                                 result.match.input_map if result.match else None,
                                                 variant.precision, spec.tolerances))
        outcome.jobs.append(result)
    settings = {"batch_size": ws.options.settings.batch_size, "num_samples": len(ws.texts(model)), "corpus": spec.corpus,
                "precision_source": "given" if req.precision else "detected", "maps": dict(req.maps),
                "tolerance_overrides": dict(req.tolerances),
                "runtime": ws.runtime_for(variant, model).as_dict(variant.provider.short)}
    parity = ParityResult(variant.id, [o for j in outcome.jobs for o in j.outputs])  # shapes: per job, below
    from harness.judge.coverage import numeric_coverage

    # the same accounting as a suite case: the head's outputs of every judged file must be gated
    parity.coverage = numeric_coverage(family, [(j.job.key, j.job.graph) for j in outcome.jobs], parity.outputs,
                                       family.task(model.config))
    case = Case(ws, variant, run_dir, f"check[{variant.id}]")
    for j in outcome.jobs:  # the run's side-output stages: failing-batch dump, repro bundle
        if j.judged is not None:
            write_side_outputs(ws, variant, model, j.judged, case.case_dir(), parity.side)
        if j.broke is not None:  # the file raised: its error bundle, as a suite case's
            error_bundle_stage(ws, variant, model, j.broke, case.case_dir(), parity.side)
    parity.side.profiles.update(profile_summaries(ws.prebuilt.end_profiling()))  # --profile: per file
    numeric_case(case, outcome, parity, files)
    errors = [j.error for j in outcome.jobs if j.error]
    outcome.records.append(_record(case, "check", _verdict(parity.assert_ok, errors), began, settings, run_id))
    if req.generation and spec.generates:
        _judge_generation(ws, req, outcome, variant, family, settings, files, run_dir, run_id)
    if req.perf is not None:
        _judge_perf(ws, req, outcome, variant, model, family, settings, files, run_dir, run_id)
    return outcome


def _judge_perf(ws: Workspace, req: CheckRequest, outcome: CheckOutcome, variant: Variant, model: LoadedModel,
                family: Family, settings: dict[str, Any], files: dict[str, dict[str, Any]], run_dir: Path,
                run_id: str) -> None:
    """``--perf``: a ``check_perf`` record with the perf suites' numbers for these files; the
    model's perf budgets (``p50_ms``, ``peak_rss_mb``...) gate it."""
    from harness.check.perf import measure_prebuilt
    from harness.perf import budgets

    case = Case(ws, variant, run_dir, f"check_perf[{variant.id}]")
    case.data["protocol"] = job_protocols(outcome.jobs)
    case.artifacts.update(files)
    started = time.perf_counter()
    runners, use_cache, _ = generation_runners(family, outcome.jobs) if family.generates else ({}, False, "")
    try:
        perf, notes = measure_prebuilt(ws, variant, model, family, outcome.jobs, req.perf, case.case_dir(),
                                       runners if use_cache else None)
        case.perf.update(perf)
        outcome.notes += notes
        outcome.perf = perf
        def gate() -> None:
            budgets.enforce(case, case.perf)

        verdict = _verdict(gate, [])
    except Exception as exc:  # noqa: BLE001 - a file that cannot be timed: its verdict, not a crash of the check
        verdict = ("error", describe_error(exc, 300))
    outcome.records.append(_record(case, "check_perf", verdict, started, settings, run_id))


def _judge_generation(ws: Workspace, req: CheckRequest, outcome: CheckOutcome, variant: Variant, family: Family,
                      settings: dict[str, Any], files: dict[str, dict[str, Any]], run_dir: Path, run_id: str) -> None:
    """Decode with the files and with PyTorch into a ``check_generation`` record."""
    case = Case(ws, variant, run_dir, f"check_generation[{variant.id}]")
    case.data["protocol"] = job_protocols(outcome.jobs)
    started = time.perf_counter()
    try:
        decoded, note = judge_generation(ws, variant, family, outcome.jobs, req.gen_samples, req.gen_settings)
    except Exception as exc:  # noqa: BLE001 - a decoding crash in the artifact is its verdict, not ours
        case.artifacts.update(files)
        from harness.runners.failures import explain

        outcome.records.append(_record(case, "check_generation", ("error", explain(describe_error(exc, 300))),
                                       started, settings, run_id))
        return
    if note:
        outcome.notes.append(note)
    if decoded is not None:
        outcome.generation = decoded
        record_generation(case, decoded)
        outcome.records.append(_record(case, "check_generation", _verdict(decoded.assert_ok, []), started,
                                       settings, run_id))


def job_protocols(jobs: Sequence[JobResult]) -> dict[str, Any]:
    """Each job's protocol as judged, for the records that do not list the jobs."""
    return {j.job.key: j.protocol.as_dict() for j in jobs if j.protocol is not None}


def profile_summaries(traces: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The profiling stage's summaries of the files' traces (``--profile``), by file name."""
    if not traces:
        return {}
    from harness.perf.profiling import summarise_trace

    return {name: summarise_trace(trace) for name, trace in traces.items()}


def numeric_case(case: Case, outcome: CheckOutcome, parity: ParityResult, files: dict[str, dict[str, Any]]) -> None:
    """One record for every job's outputs, like one suite case covers every graph: the suites'
    record stage, then what is particular to foreign files (the reference, each job's matching)."""
    case.record_parity(parity)
    case.artifacts.update(files)
    model = case.model
    case.data.update(
        reference={"path": str(model.path), "family": model.family, "name": outcome.spec.name},
        precision=outcome.precision_note,
        jobs={j.job.key: {"file": j.job.artifact.path.name, "mode": j.job.mode, "graph": j.job.graph.name,
                          "io_match": j.match.account() if j.match else [], "notes": j.notes,
                          "protocol": j.protocol.as_dict() if j.protocol else None,
                          "seconds": round(j.seconds, 4), "error": j.error, "shapes": j.shapes}
              for j in outcome.jobs})


def coverage_result(graph: str, cut: tuple[int, int, int, bool], precision: Precision,
                    overrides: Mapping[str, Mapping[str, float]]) -> OutputResult:
    """The shape-coverage check of a file with a baked sequence length: sentences it cannot
    take are counted and gated (0), unless its protocol declares the static shape intended."""
    from harness.core import Tolerance
    from harness.judge.numeric import lint_gate

    count, total, length, intended = cut
    tolerance = None if intended else Tolerance((lint_gate("sentences_cut", precision, overrides),))
    result = OutputResult(graph, "shapes", {"sentences_cut": float(count)}, None, (), tolerance, total)
    result.where = f"{count} of {total} sentences longer than the baked {length} tokens"
    return result


def _verdict(assert_ok: Callable[[], None], errors: list[str]) -> tuple[str, str]:
    """error (the artifact broke while running) > fail (a gate's message) > pass."""
    if errors:
        return "error", "; ".join(errors)
    try:
        assert_ok()
    except GateFailure as exc:
        return "fail", str(exc)
    return "pass", ""


def _record(case: Case, suite: str, verdict: tuple[str, str], began: float, settings: dict[str, Any],
            run_id: str) -> dict[str, Any]:
    """The one place a check composes a results record: the run's composer, the suites' schema."""
    return compose_standalone(case, suite=suite, run_id=run_id, verdict=as_verdict(verdict[0]), reason=verdict[1],
                              duration_s=time.perf_counter() - began, settings=settings).to_dict()
