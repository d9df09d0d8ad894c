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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from harness.core.phases import phase

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from harness.core import Variant
    from harness.families import GraphSpec
    from harness.judge.numeric import Batch, OutputResult
    from harness.judge.workspace import Workspace
    from harness.repro import EmbeddingDerived
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
        own = set(self.graph.output_names)
        return any(o.failures() for o in self.outputs if o.output in own or self.embedding is not None)


@dataclass
class SideOutputs:
    """What the side-output stages wrote, by graph: read by the record stage."""

    dumps: dict[str, str] = field(default_factory=dict)  # graph -> .npz of its worst failing batch
    bundles: dict[str, str] = field(default_factory=dict)  # graph -> its repro bundle directory
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)  # graph -> profiling summary


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
    from harness.judge.numeric import dump_failing_batch

    with phase("metrics"):
        return dump_failing_batch(judged.runner, judged.graph, judged.outputs, judged.batches, case_dir)


def bundle_stage(ws: Workspace, variant: Variant, model: LoadedModel, judged: GraphJudgement,
                 case_dir: Path) -> Path | None:
    """The failing graph's repro bundle in ``case_dir/repro-<graph>``; None when not written
    (bundles off, or the runner runs no single ONNX file: ``GraphRunner.file_view``)."""
    mode = ws.options.settings.repro_bundles
    if mode == "off":
        return None
    from harness.repro import write_bundle

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
    view = broke.runner.file_view()
    mode = ws.options.settings.repro_bundles
    if mode == "off" or view is None:
        return
    from harness.repro.error import write_error_bundle

    try:
        with phase("metrics"):
            bundle = write_error_bundle(case_dir / f"repro-{broke.graph}", variant=variant, graph=broke.graph,
                                        artifact=Path(view.path), batches=[view.feeds(f) for f in broke.feeds],
                                        exc=broke.exc, runtime=ws.runtime_for(variant, model),
                                        threads=ws.options.settings.threads, mode=mode)
    except Exception:  # noqa: BLE001 - evidence is best-effort; the case's error stands
        return
    if bundle is not None:
        into.bundles[broke.graph] = str(bundle)


def close_stage(runner: GraphRunner, graph: str, into: SideOutputs) -> None:
    """End the runner's profiling (its summary is a side output), then close it."""
    try:
        trace = runner.end_profiling()
    finally:
        runner.close()
    if trace:
        from harness.perf.profiling import summarise_trace

        into.profiles[graph] = summarise_trace(trace)


__all__ = ["GraphError", "GraphJudgement", "SideOutputs", "bundle_stage", "close_stage", "dump_stage",
           "error_bundle_stage", "write_side_outputs"]
