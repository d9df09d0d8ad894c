"""The stages every judged case goes through, whichever entry point runs it.

    resolve artifacts ─▶ run ─▶ compare ─▶ record ─▶ side outputs
    (ArtifactSource)     (GraphRunner)  (numeric,      (Case.record_parity)  (failing-batch dump, repro
                                          embedding,                           bundle, profile summary)
                                          unfused twin)

``harness run`` (the suites' ``numeric_parity``) and ``harness check`` (``harness.check.judge``)
differ only in the first stage -- where a graph's runner comes from (``harness.runners.source``)
and, for foreign files, how their I/O is matched. Both then hand every judged graph to the same
stages below as one :class:`GraphJudgement`, so a failing ``harness check`` leaves the same evidence
as a failing suite case: the worst batch as ``.npz``, a repro bundle ``harness repro`` re-judges
without the model or the cache, the profiling summary. Side outputs are stages here, never calls
hidden inside a comparison: ``run_graph_parity`` only compares.

This module is the case: ``numeric_parity`` / ``numeric_case`` (a numeric case's graphs through every
stage), ``embedding_case`` (a sentence-embedding case's) and ``generation_case`` (a generation case's)
run the comparisons of ``judge.numeric`` / ``judge.embedding`` / ``judge.generation``, which write
nothing, and then the evidence writers of ``harness.repro``; the suites only call them.
So it sits above both (tests/test_import_layers.py): the comparisons never import a bundle writer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from harness.core import Variant, describe_error
from harness.core.phases import phase
from harness.judge.coverage import numeric_coverage
from harness.judge.embedding import embedding_parity
from harness.judge.generation import GenerationRequest, GenerationResult, decode_plan, generation_parity
from harness.judge.generation import record as record_generation
from harness.judge.numeric import (
    GateFailure,
    ParityResult,
    SideOutputs,
    against_unfused,
    dump_failing_batch,
    lint_result,
    probe_batches,
    run_graph_parity,
    unfused_twin,
)
from harness.repro import EmbeddingDerived, write_bundle
from harness.repro.error import write_error_bundle
from harness.repro.error_decode import write_decode_error_bundle
from harness.repro.generation import write_generation_bundle
from harness.results.outcome import Decision, decide
from harness.results.sections import Evidence
from harness.runners.base import FileView, GraphRef
from harness.runners.profiling import summarise_trace

if TYPE_CHECKING:  # pragma: no cover

    from harness.case.collector import Case
    from harness.families import Family, GraphSpec
    from harness.judge.numeric import Batch, OutputResult
    from harness.judge.workspace import Workspace
    from harness.runners import Backend
    from harness.runners.base import GraphRunner
    from harness.zoo.loading import LoadedModel


@dataclass
class GraphJudgement:
    """One graph judged: the input of every side-output stage.

    ``graph`` is the graph as judged (a check's job names it after the job), ``runner`` what ran it,
    ``batches`` the corpus batches then the shape probes' (rows are numbered over both, as the
    metrics were computed), ``outputs`` the judged outputs (the artifact's static checks excluded)."""

    graph: GraphSpec
    runner: GraphRunner
    batches: Sequence[Batch]
    outputs: Sequence[OutputResult]
    #: the judged output is a pooled sentence vector derived from the graph's token states
    embedding: EmbeddingDerived | None = None

    @property
    def numbers_fail(self) -> bool:
        """Whether an output the graph itself returns fails (numbers a bundle can re-judge; a shape
        probe the runtime refused is its rerun's job, a derived vector counts when bundled with it)."""
        own = set(self.graph.output_names) | {d.name for d in self.graph.derived}  # a span: re-derived on repro
        return any(o.failures() for o in self.outputs if o.output in own or self.embedding is not None)


def write_side_outputs(ws: Workspace, variant: Variant, model: LoadedModel, judged: GraphJudgement,
                       case_dir: Path, into: SideOutputs) -> None:
    """The evidence stages of one judged graph, in order: the failing-batch dump, then the repro
    bundle (as the run's ``repro_bundles`` option says). Both only when something failed."""
    dumped = dump_stage(judged, case_dir)
    if dumped is not None:
        into.dumps[judged.graph.name] = str(dumped)
    if judged.numbers_fail:
        bundle = bundle_stage(ws, variant, model, judged, case_dir)
        if bundle is not None:
            into.bundles[judged.graph.name] = str(bundle)


def dump_stage(judged: GraphJudgement, case_dir: Path) -> Path | None:
    """The inputs, reference and variant outputs of the batch holding the worst failing element."""
    with phase("metrics"):
        return dump_failing_batch(judged.runner, judged.graph, judged.outputs, judged.batches, case_dir)


def bundle_stage(ws: Workspace, variant: Variant, model: LoadedModel, judged: GraphJudgement,
                 case_dir: Path) -> Path | None:
    """The failing graph's repro bundle in ``case_dir/repro-<graph>``; None when not written
    (bundles off, or the runner runs no single ONNX file: ``GraphRunner.file_view``)."""
    mode = ws.options.settings.repro_bundles
    if mode == "off":
        return None

    with phase("metrics"):  # writing the evidence of a verdict
        return write_bundle(case_dir / f"repro-{judged.graph.name}", variant=variant, graph=judged.graph,
                            runner=judged.runner, batches=judged.batches, judged=judged.outputs,
                            runtime=ws.runtime_for(variant, model), threads=ws.options.settings.threads, mode=mode,
                            texts=ws.batches(model), embedding=judged.embedding)


@dataclass
class GraphError:
    """One graph whose runner raised while judged: the input of the error-bundle stage."""

    graph: str
    runner: GraphRunner
    feeds: Sequence[Mapping[str, np.ndarray]]  # the corpus batches' feeds, in the runner's names
    exc: BaseException


def error_bundle_stage(ws: Workspace, variant: Variant, model: LoadedModel, broke: GraphError,
                       case_dir: Path, into: SideOutputs) -> None:
    """The error bundle (``harness.repro.error``) of a graph whose file raised, when the file raises
    it by itself on these feeds (under its own input names: ``GraphRunner.file_view``). Best-effort:
    the case's own error is what its record says either way."""
    bundle = _error_bundle(ws, variant, model, broke.graph, broke.runner.file_view(), broke.feeds, broke.exc, case_dir)
    if bundle is not None:
        into.bundles[broke.graph] = str(bundle)


def _error_bundle(ws: Workspace, variant: Variant, model: LoadedModel, graph: str, view: FileView | None,
                  feeds: Sequence[Mapping[str, np.ndarray]], exc: BaseException, case_dir: Path) -> Path | None:
    """The one writer of an error bundle for every source: ``view``'s file re-run on ``feeds`` (under
    its own input names) in ``case_dir/repro-<graph>``; None when not written (bundles off, no file,
    the file does not raise by itself). Never raises: the case's own error stands either way."""
    mode = ws.options.settings.repro_bundles
    if mode == "off" or view is None:
        return None

    try:
        with phase("metrics"):
            return write_error_bundle(case_dir / f"repro-{graph}", variant=variant, graph=graph,
                                      artifact=Path(view.path), batches=[view.feeds(f) for f in feeds], exc=exc,
                                      runtime=ws.runtime_for(variant, model), threads=ws.options.settings.threads,
                                      mode=mode)
    except Exception:  # noqa: BLE001 - evidence is best-effort; the case's error stands
        return None


def close_stage(runner: GraphRunner, graph: str, into: SideOutputs) -> None:
    """End the runner's profiling (its summary is a side output), then close it."""
    try:
        trace = runner.end_profiling()
    finally:
        runner.close()
    if trace:
        into.profiles[graph] = summarise_trace(trace)


def error_bundle_for(ws: "Workspace", ref: GraphRef, backend: Backend, exc: BaseException,
                     case_dir: Path) -> Path | None:
    """The error bundle of ``ref``'s graph, whose artifact raised ``exc`` before a runner existed to
    name its file (the runtime refused it while the outputs were computed): the backend's one ONNX
    file of the graph, fed the corpus batches (``_error_bundle``). None when not written."""
    if ws.options.settings.repro_bundles == "off":
        return None
    try:
        files = backend.artifacts(ref)
        onnx = [str(i["path"]) for k, i in files.items() if k.startswith(f"{ref.graph.name}/")
                and str(i.get("path", "")).endswith(".onnx")]
        if len(onnx) != 1:
            return None
        feeds = [dict(b[0]) for b in ws.refs.parity_batches(ref.model, ref.family, ref.graph)]
    except Exception:  # noqa: BLE001 - the evidence is best-effort; the case's error stands either way
        return None
    return _error_bundle(ws, ref.variant, ref.model, ref.graph.name, FileView(onnx[0]), feeds, exc, case_dir)


def numeric_parity(ws: "Workspace", variant: Variant, family: "Family | None" = None,
                   dump_dir: Path | None = None, result: ParityResult | None = None) -> ParityResult:
    """Judge every graph of ``variant``; with ``dump_dir``, a failing graph's worst batch is
    saved there (inputs, reference and variant outputs) for reproduction, and a graph whose
    artifact the runtime refuses gets an error bundle (``error_bundle_for``), named in
    ``result.side`` -- the caller's container, so what was written survives the exception."""
    result = result if result is not None else ParityResult(variant.id)
    judging: list["GraphSpec"] = []  # the graph being judged when an exception escapes
    try:
        return _numeric_parity(ws, variant, family, dump_dir, judging, result)
    except Exception as exc:  # the runtime refused the file or its feeds: bundle the error if the file raises it
        if dump_dir is not None and judging and not isinstance(exc, GateFailure):
            model = ws.model(variant.model)
            ref = GraphRef(model, family or ws.family(model), judging[-1], variant)
            bundle = error_bundle_for(ws, ref, ws.backend(variant, model), exc, dump_dir)
            if bundle is not None:
                result.side.bundles[judging[-1].name] = str(bundle)
        raise


def _numeric_parity(ws: "Workspace", variant: Variant, family: "Family | None", dump_dir: Path | None,
                    judging: list["GraphSpec"], result: ParityResult) -> ParityResult:
    """The pipeline's stages per graph: resolve (the workspace's source serves the backend), run and
    compare, the unfused twin's comparison, then the side outputs (``harness.case.pipeline``)."""
    model = ws.model(variant.model)
    family = family or ws.family(model)
    backend = ws.backend(variant, model, profile_dir=dump_dir)
    for graph in family.graphs(model):
        judging.append(graph)
        batches = ws.refs.parity_batches(model, family, graph)
        probes = probe_batches(ws, model, family, graph, batches[0][0], variant) if batches else []
        start = time.perf_counter()
        # the shape probes' outputs are cached with the corpus's (a refusal too): a warm rerun opens no session
        ref = GraphRef(model, family, graph, variant)
        runner = ws.refs.variant_runner(backend, ref, [dict(b[0]) for b in batches] + [dict(b[0]) for _, b in probes])
        result.seconds[f"{graph.name}.load"] = time.perf_counter() - start
        result.artifacts.update(backend.artifacts(ref))
        if runner.replayed:
            result.replayed.append(graph.name)
        if runner.path:  # a runner of a file graph: lint the file
            result.outputs.append(lint_result(graph.name, runner.path, graph, None, variant.precision,
                                              model.spec.tolerances))
        start = time.perf_counter()
        try:
            judged = run_graph_parity(runner, graph, batches, variant.precision, model.spec.tolerances,
                                      probes=probes, shapes=result.shapes)
            result.outputs += judged
            twin = unfused_twin(ws, variant)
            if twin is not None:
                result.outputs += against_unfused(ws, ref, runner, twin, batches)
            if dump_dir is not None:
                # rows are numbered over the corpus batches, then the shape probes (as they were judged)
                write_side_outputs(ws, variant, model, GraphJudgement(graph, runner, [*batches, *(b for _, b in probes)],
                                                                      judged), dump_dir, result.side)
        finally:
            close_stage(runner, graph.name, result.side)
        result.seconds[f"{graph.name}.run"] = time.perf_counter() - start

    result.coverage = numeric_coverage(family, family.graphs(model), result.outputs, family.task(model.config))
    return result


# -- a numeric case -------------------------------------------------------------------------------------
def numeric_case(case: Case, family: "Family | None" = None) -> ParityResult:
    """A suite case's numeric stages: every graph judged (``numeric_parity``, side outputs in the case
    directory), recorded into the case, the case decided from the result (``Case.conclude``). When a
    graph raises, what the stages wrote before it (an error bundle) is recorded and the case decided
    by the exception, which propagates."""
    assert case.variant is not None, "numeric parity needs a variant"
    result = ParityResult(case.variant.id)
    try:
        numeric_parity(case.workspace, case.variant, family, dump_dir=case.case_dir(), result=result)
    except Exception as exc:
        if result.side.bundles:
            Evidence(repro_bundles=dict(result.side.bundles)).write(case.data)
        case.conclude(Decision.of_exception(exc))
        raise
    case.record_parity(result)
    case.conclude(decide(result.assert_ok))
    return result


# -- an embedding case -----------------------------------------------------------------------------------
def embedding_case(case: Case) -> ParityResult:
    """A sentence-embedding case's stages: resolve the encoder graph whose token states the model's
    pooling recipe reads (through the workspace's source, outputs replayed where cached), run it on the
    corpus batches, compare the pooled sentence vectors (``judge.embedding``), then the side outputs (a
    failing vector's repro bundle, the profile), the record and the decision; ``assert_ok()`` gates it."""
    assert case.variant is not None, "embedding parity needs a variant"
    ws, variant, model = case.workspace, case.variant, case.model
    family = ws.family(model)
    (graph,) = [g for g in family.graphs(model) if family.sentence_pooling(model, g) is not None]
    pooling = family.sentence_pooling(model, graph)
    assert pooling is not None, "the graph was chosen for its pooling recipe"
    backend = ws.backend(variant, model, profile_dir=case.case_dir())
    ref = GraphRef(model, family, graph, variant)
    batches = ws.refs.parity_batches(model, family, graph)
    runner = ws.refs.variant_runner(backend, ref, [feeds for feeds, _, _ in batches])
    case.artifacts.update(backend.artifacts(ref))
    outputs: list[dict[str, np.ndarray]] = []
    seconds = 0.0
    result = ParityResult(variant.id)
    try:
        with phase("variant"):
            for feeds, _, _ in batches:
                start = time.perf_counter()
                outputs.append(runner.run(feeds))
                seconds += time.perf_counter() - start
        with phase("metrics"):
            judged = embedding_parity(graph.name, pooling, batches, outputs, variant.precision, model.spec.tolerances)
        result.outputs.append(judged.output)
        write_side_outputs(ws, variant, model, GraphJudgement(graph, runner, batches, [judged.output],
                                                              EmbeddingDerived(pooling.mode, pooling.normalize)),
                           case.case_dir(), result.side)
    finally:
        close_stage(runner, graph.name, result.side)
    case.record_parity(result)
    texts = [t for batch in ws.batches(model) for t in batch]
    case.data.update(pooling=judged.pooling.describe(), sentences=len(texts), run_seconds=round(seconds, 4),
                     worst={f"{graph.name}.{judged.output.output}": judged.describe_worst(texts)})
    case.conclude(decide(result.assert_ok))
    return result


# -- a generation case ----------------------------------------------------------------------------------
def generation_case(case: Case, request: GenerationRequest | None = None,
                    family: "Family | None" = None) -> GenerationResult:
    """A generation case's stages: decode and compare (``judge.generation.generation_parity``), record
    into the case, then the side outputs (a failing case's generation bundle, an erroring one's decode
    error bundle); ``assert_ok()`` gates it. ``harness.testing.judge`` is this function."""
    assert case.variant is not None, "generation parity needs a variant"
    try:
        result = generation_parity(case.workspace, case.variant, request, family)
    except Exception as exc:  # a decoding graph the runtime refused: its error bundle, if the files raise it
        if case.workspace.options.settings.repro_bundles != "off":
            _decode_error_bundle(case, request, family, exc)
        case.conclude(Decision.of_exception(exc))
        raise
    record_generation(case, result)
    case.conclude(decide(result.assert_ok))
    if not result.passed and case.workspace.options.settings.repro_bundles != "off":
        ws = case.workspace
        model = ws.model(case.variant.model)
        with phase("metrics"):  # writing the evidence of a verdict
            try:
                bundle = write_generation_bundle(case.case_dir() / "repro-generation", ws, case.variant, model,
                                                 family or ws.family(model), result, ws.options.settings.repro_bundles)
            except Exception as exc:  # noqa: BLE001 - best-effort evidence: the gate's verdict stands either way

                Evidence(bundle_error=describe_error(exc)).write(case.data)
                bundle = None
        if bundle is not None:
            Evidence(repro_bundles={"generation": str(bundle)}).write(case.data)
    return result


def _decode_error_bundle(case: Case, request: GenerationRequest | None, family: "Family | None", exc: BaseException) -> None:
    """The decode error bundle (``harness.repro.error_decode``) of an erroring case, named in its
    record; best-effort: the case's own error is what the record must say."""
    ws, variant = case.workspace, case.variant
    assert variant is not None, "a generation case has a variant"
    try:
        model = ws.model(variant.model)
        wanted, settings, indices, texts = decode_plan(ws, model, request)
        with phase("metrics"):  # writing the evidence of a verdict
            bundle = write_decode_error_bundle(case.case_dir() / "repro-generation", ws, variant, model,
                                               family or ws.family(model), settings, indices, texts,
                                               int(wanted["batch_size"]), exc, ws.options.settings.repro_bundles)
    except Exception:  # noqa: BLE001 - evidence of an error already recorded: never a second error
        return
    if bundle is not None:
        Evidence(repro_bundles={"generation": str(bundle)}).write(case.data)


__all__ = ["GraphError", "GraphJudgement", "SideOutputs", "bundle_stage", "close_stage", "dump_stage",
           "embedding_case", "error_bundle_for", "error_bundle_stage", "generation_case", "numeric_case", "numeric_parity",
           "write_side_outputs"]
