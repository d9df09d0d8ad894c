"""Judge one pre-built artifact job against the PyTorch FP32 reference: the check's own steps.

The artifact is what ships, built by someone else's pipeline; the harness only reads it. This
module holds what is particular to foreign artifacts -- matching a job's I/O to the reference
graph (``judge_job``), serving matched runners to the decoding loops (``judge_generation``) and
what a check record adds (``numeric_case``) -- and the typed outcome of a check. The order of the
stages, the side outputs and the records are the case engine's (``harness.engine``), the same for
files and for a served endpoint. Batches, the memoised FP32 reference, ``run_graph_parity``,
embedding parity and ``generation_parity`` are the suites' own functions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from harness.case.collector import Case
from harness.case.pipeline import GraphError, GraphJudgement
from harness.check.io_match import IOMatch, match_io, reference_info
from harness.check.jobs import Job, fit_sequence
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
from harness.check.request import CheckRequest
from harness.check.synth import synthesizers
from harness.core import Precision, Tolerance, UsageError, Variant, describe_error
from harness.families import Family
from harness.families.base import CheckedGraph
from harness.judge.embedding import embedding_parity
from harness.judge.generation import GenerationRequest, GenerationResult, generation_parity
from harness.judge.numeric import (
    OutputResult,
    ParityResult,
    lint_gate,
    probe_batches,
    run_graph_parity,
)
from harness.judge.workspace import Workspace
from harness.repro import EmbeddingDerived
from harness.results.outcome import CaseResult
from harness.results.record import Record, run_green
from harness.runners.base import GraphRunner
from harness.runners.failures import explain
from harness.runners.prebuilt import MappedRunner
from harness.zoo.base import ModelSpec
from harness.zoo.loading import LoadedModel

__all__ = ["CheckOutcome", "CheckRequest", "JobResult", "PreparedJob", "generation_request", "judge_generation",
           "judge_job", "numeric_case", "prepare_job"]


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
    #: every record of the check, as the engine decided and composed it
    results: list[CaseResult] = field(default_factory=list)
    generation: GenerationResult | None = None
    notes: list[str] = field(default_factory=list)
    #: ``--perf``: the perf fields of the ``check_perf`` record
    perf: dict[str, Any] | None = None

    @property
    def records(self) -> list[Record]:
        return [r.record for r in self.results]

    @property
    def exit_code(self) -> int:
        return 0 if run_green(r.verdict for r in self.results) else 1  # not-run and judged-nothing fail too


# -- one job ------------------------------------------------------------------------------------------
@dataclass
class PreparedJob:
    """Everything a job is judged on that the reference side decides, before the file runs: its
    protocol, its I/O matched to the reference graph's, and the batches and shape probes with
    their FP32 references (computed, memoised and cached). Preparing every job first is what lets
    a large model's PyTorch module be freed before any session of the files opens."""

    protocol: Protocol
    match: IOMatch
    synth: dict[str, Any]
    batches: list[Any]
    probes: list[Any]
    pooling: Any
    notes: list[str] = field(default_factory=list)
    cut: tuple[int, int, int, bool] | None = None


def prepare_job(ws: Workspace, job: Job, model: LoadedModel, family: Family, maps: Mapping[str, str],
                protocol_table: Mapping[str, Any] | None = None,
                protocol_origin: str = "--io-protocol") -> PreparedJob:
    """Match the job's I/O on the first corpus batch (UsageError if impossible) and compute every
    batch's FP32 reference through the workspace's memo, as the suites do; the file is not run."""
    factories = synthesizers(model, family)

    def feeds(texts: Sequence[str]) -> dict[str, np.ndarray]:
        # through the reference cache: a seq2seq decoder's feeds hold PyTorch encoder states, so a
        # warm check that recomputed them loaded the module (and transformers) for nothing
        return ws.refs.check_feeds(model, family, job.graph, job.mode, [texts])[0]

    feeds0 = feeds(ws.batches(model)[0])
    ref0 = ws.refs.references_for(model, family, job.graph, [feeds0])[0]
    ref_in = reference_info({n: feeds0[n] for n in job.graph.input_names if n in feeds0})
    art = job.artifact
    protocol = resolve_protocol(art, protocol_table, protocol_origin, maps)
    logits_ref = next((n for n in job.graph.logits_outputs), None)
    file_logits = next((t for t in art.outputs if t.name == protocol.logits_output), None)
    protocol = wants_last_logits(protocol, ref0[logits_ref].ndim if logits_ref in ref0 else None,
                                 len(file_logits.shape) if file_logits and file_logits.shape is not None else None)
    match = match_io(job.label, ref_in, reference_info(ref0), canonical_inputs(protocol, art.inputs),
                     canonical_outputs(protocol, art.outputs),
                     synthesizable={k: v[0] for k, v in factories.items()}, gated_outputs=job.graph.gated_outputs,
                     user_map=dict(protocol.names), protocol_pairs=protocol_pairs(protocol))
    infos = {t.name: t for t in canonical_inputs(protocol, art.inputs)}
    synth = {name: factories[what][1](infos[name]) for name, what in match.synthesized.items()}
    notes: list[str] = []
    cut_seen: tuple[int, int, int, bool] | None = None

    rows = bool(protocol.rows_because)
    static_batch = None if rows else protocol.static_batch
    static_seq = protocol.static_sequence if family.pads_static_sequence else None
    chunks = ws.batches(model, static_batch)
    if static_seq:  # counted on the corpus as it is, before a short last batch is filled
        masks = [m for texts in chunks if (m := feeds(texts).get("attention_mask")) is not None]
        cut, total = cut_sentences(masks, static_seq)
        cut_seen = (cut, total, static_seq, protocol.static_intended)
        notes.append(f"static sequence length {static_seq}: inputs padded (masked) or cut to it; "
                     f"{cut} of {total} sentences longer than the baked {static_seq} tokens"
                     + (" (declared intended)" if protocol.static_intended else ""))
    if static_batch and len(chunks[-1]) != static_batch:  # filled with its own sentences: every one is judged
        short = list(chunks[-1])
        notes.append(f"static batch {static_batch}: the last batch of {len(short)} sentence(s) is filled "
                     "with repeats of its own sentences")
        chunks[-1] = [*short, *(short[i % len(short)] for i in range(static_batch - len(short)))]
    if rows:
        notes.append(protocol.rows_because)
    if protocol.one_token:
        notes.append("one token per call: the file's sequence length is fixed at 1 (each call fed the "
                     "presents of the one before)")
    if not chunks:
        raise UsageError(f"{art.path}: static batch size {static_batch} exceeds the {len(ws.texts(model))} "
                         "corpus sentences")
    pad = int(getattr(model.tokenizer, "pad_token_id", 0) or 0)

    def fitted(texts: Sequence[str]) -> dict[str, np.ndarray]:
        return fit_sequence(feeds(texts), static_seq, pad) if static_seq else feeds(texts)

    ws.refs.check_feeds(model, family, job.graph, job.mode, chunks)  # every batch's feeds: one cache entry
    batches = ws.refs.parity_batches(model, family, job.graph, chunks, fitted)
    # shape probes (target != source length, other past lengths) where the file's shapes are dynamic
    probes = probe_batches(ws, model, family, job.graph, batches[0][0]) if not (static_seq or static_batch) else []
    if protocol.logits is Logits.LAST and logits_ref:  # the reference adapts: its last token only
        batches = [(dict(f), dict(r), dict(m)) for f, r, m in last_token_reference(batches, logits_ref)]
        probes = [(label, last_token_reference([b], logits_ref)[0]) for label, b in probes]
    pooling = family.sentence_pooling(model, job.graph) if "last_hidden_state" in match.output_map else None
    return PreparedJob(protocol, match, synth, batches, probes, pooling, notes, cut_seen)


def judge_job(ws: Workspace, job: Job, session: GraphRunner, model: LoadedModel, family: Family,
              precision: Precision, overrides: Mapping[str, Mapping[str, float]], maps: Mapping[str, str],
              protocol_table: Mapping[str, Any] | None = None, protocol_origin: str = "--io-protocol") -> JobResult:
    """The job prepared (``prepare_job``: I/O matched, references computed), then the file run on
    every batch and compared, as the suites do."""
    result = JobResult(job)
    prepared = prepare_job(ws, job, model, family, maps, protocol_table, protocol_origin)
    protocol, match, batches, probes, pooling = (prepared.protocol, prepared.match, prepared.batches,
                                                 prepared.probes, prepared.pooling)
    result.protocol, result.match, result.cut = protocol, match, prepared.cut
    result.notes += prepared.notes
    if protocol.adapts:
        session = ProtocolRunner(session, protocol, job.artifact.inputs, job.artifact.outputs)
    runner = MappedRunner(session, match.input_map, match.output_map, prepared.synth, job.label)
    result.runner = runner
    runner.recorded = [] if pooling else None
    start = time.perf_counter()
    graph = replace(job.graph, name=job.key)
    try:
        result.outputs = run_graph_parity(runner, graph, batches, precision, overrides,
                                          output_map={r: r for r in match.output_map}, probes=probes,
                                          shapes=result.shapes)
    except Exception as exc:  # noqa: BLE001 - the artifact ran and broke: its verdict is "error", others still run

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
    # a file whose numeric check failed still decodes (with its own cache, judged in the closed
    # loop of harness.judge.cached_decoding): leaving it out decoded uncached and passed quietly
    return family.decoding_runners(checked_graphs([(j.job, j.match, j.runner) for j in jobs
                                                   if j.runner is not None and j.match is not None]))


def checked_graphs(entries: Sequence[tuple[Job, IOMatch, GraphRunner | None]]) -> dict[str, CheckedGraph]:
    """Each judged mode as decoding sees it (a dedicated file wins over the merged one for the
    same graph); the runner may still be None while only the reference side is prepared."""
    judged: dict[str, CheckedGraph] = {}
    for job, match, runner in entries:
        if job.mode not in judged or job.artifact.role != "merged":
            judged[job.mode] = CheckedGraph(runner, gives_cache(job, match), str(job.artifact.path))
    return judged


def gives_cache(job: Job, match: IOMatch) -> bool:
    """Whether the artifact returns every KV-cache tensor the next step needs."""
    presents = [n for n in job.graph.output_names if n.startswith("present")]
    return bool(presents) and all(n in match.output_map for n in presents)


def generation_request(base: GenerationRequest | None, samples: int | None, use_cache: bool) -> GenerationRequest:
    """What generation parity decodes for a check: the config's request, the cache as the files allow."""
    request = replace(base or GenerationRequest(), use_cache=use_cache)
    return replace(request, samples=samples) if samples is not None else request


def judge_generation(ws: Workspace, variant: Variant, family: Family, jobs: list[JobResult],
                     samples: int | None, base: GenerationRequest | None = None) -> tuple[GenerationResult | None, str]:
    """(GenerationResult | None, note): decode with the artifacts and with PyTorch, score --
    the generation suite's own function, on a workspace whose ONNX variant runs the files."""
    runners, use_cache, why = generation_runners(family, jobs)
    if why:
        return None, f"generation parity skipped: {why}"
    assert ws.runtimes.prebuilt is not None
    ws.runtimes.prebuilt.serve(runners)
    return generation_parity(ws, variant, generation_request(base, samples, use_cache), family), (
        "" if use_cache else "decoded without a KV cache (no cached graph given)")


def job_protocols(jobs: Sequence[JobResult]) -> dict[str, Any]:
    """Each job's protocol as judged, for the records that do not list the jobs."""
    return {j.job.key: j.protocol.as_dict() for j in jobs if j.protocol is not None}


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
    count, total, length, intended = cut
    tolerance = None if intended else Tolerance((lint_gate("sentences_cut", precision, overrides),))
    result = OutputResult(graph, "shapes", {"sentences_cut": float(count)}, None, (), tolerance, total)
    result.where = f"{count} of {total} sentences longer than the baked {length} tokens"
    return result
