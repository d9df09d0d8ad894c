"""A backend whose graphs are already built: ONNX files from someone else's pipeline.

``harness check`` (and the artifact suite) judge files they did not export. Everything
downstream of the backend -- the workspace's batches and memoised FP32 reference, numeric
parity, the decoding loops, the records -- is the run pipeline's own; only where a graph
comes from differs. So the files are an *artifact source* (``PrebuiltGraphs``) given to the
``Workspace`` when it is built, and ``PrebuiltBackend`` serves its runners by graph name to
any variant whose backend runs ONNX files (``runs_onnx_files``).

Foreign files speak their own I/O names; ``MappedRunner`` presents one under the reference
graph's names (a mapping the check's I/O matcher produces) and fills in inputs the reference
computes implicitly, so parity code and decoding run a foreign file exactly as they run the
harness's own exports. The backend is not in the name registry: it has no provider of its
own, it stands in for the run's variants whose backend runs ONNX files (ONNX Runtime, OpenVINO)
when a workspace has files to judge; each file is opened by that backend
(``Backend.open_onnx_file``), so ``--providers ov_cpu`` judges the file as OpenVINO compiles it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from harness.core import Precision, Provider, UsageError
from harness.core.cachedir import source_digest
from harness.families.base import PromptThenStep
from harness.runners import backends
from harness.runners.base import Backend, BackendContext, FileView, GraphRef, GraphRunner, TimedCall
from harness.runners.failures import known_failure
from harness.runners.intake import inspect_onnx, library_of
from harness.runners.ort_runner import OrtBackend
from harness.runners.source import ArtifactSource

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Variant
    from harness.core.runtime import RuntimeSettings
    from harness.families.base import PromptThenStep

#: feeds -> the value of one input the reference computes implicitly
Synth = Callable[[Mapping[str, np.ndarray]], np.ndarray]


def has_past(feeds: Mapping[str, np.ndarray]) -> bool:
    """True when the feeds carry a non-empty KV cache (a cached step, not the prompt)."""
    return any(k.startswith("past_key_values") and v.ndim >= 3 and v.shape[2] > 0 for k, v in feeds.items())


def runs_onnx_files(backend: type[Backend] | None) -> bool:
    """Whether ``backend`` executes ONNX files (a capability the backend class declares);
    False for None, a backend name nothing registered."""
    return backend is not None and backend.runs_onnx_files


class MappedRunner(GraphRunner):
    """A foreign file's session seen through the reference graph's names."""

    def __init__(self, session: GraphRunner, input_map: Mapping[str, str], output_map: Mapping[str, str],
                 synth: Mapping[str, Synth], label: str) -> None:
        self.session, self.label = session, label
        self.input_map, self.output_map, self.synth = dict(input_map), dict(output_map), dict(synth)
        self.input_names = list(self.input_map)
        self.output_names = list(self.output_map)
        self.calls = 0
        #: set to a list to keep every call's outputs (derived metrics such as sentence embeddings)
        self.recorded: list[dict[str, np.ndarray]] | None = None
        self.path = session.path if session is not None else None  # tests stand in None for a session

    def file_view(self) -> FileView | None:
        """The foreign file under its own names: feeds mapped and synthesized, outputs renamed back.
        None when the session adapts feeds to the file's protocol (a 4-D mask, stacked caches, one
        row per call): the mapped feeds are not what the file takes."""
        if self.session is not None and self.session.file_view() is None:
            return None
        return FileView(self.path, self.artifact_feeds, dict(self.output_map)) if self.path else None

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every reference input must be given; extra feeds (the other branch's) are ignored."""
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise KeyError(f"{self.label}: missing inputs {missing}; got {sorted(feeds)}")
        return self._run(dict(feeds))

    def artifact_feeds(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``feeds`` (reference names) as the file takes them: its own names, synthesized inputs added."""
        theirs = {art: feeds[ref] for ref, art in self.input_map.items() if ref in feeds}
        for art, make in self.synth.items():
            theirs[art] = make(feeds)
        return theirs

    def timed_call(self, feeds: Mapping[str, np.ndarray]) -> TimedCall:
        """The file's own deployed call on feeds mapped (and synthesized) once, outside the timing."""
        return self.session.timed_call(self.artifact_feeds(feeds))

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        theirs = self.artifact_feeds(feeds)
        self.calls += 1
        out = self.session.run(theirs)
        result = {ref: out[art] for ref, art in self.output_map.items()}
        if self.recorded is not None:
            self.recorded.append(result)
        return result

    def close(self) -> None:
        """Sessions are shared between modes and owned by the ``PrebuiltGraphs``; closing is theirs."""


class CacheSplitRunner(GraphRunner):
    """optimum's decoder-only pair as one step graph: ``decoder_model.onnx`` for the prompt
    (empty cache), ``decoder_with_past_model.onnx`` for every later token."""

    def __init__(self, prefill: GraphRunner, step: GraphRunner) -> None:
        self.prefill, self.step = prefill, step
        self.input_names = sorted(set(prefill.input_names) | set(step.input_names))
        self.output_names = list(step.output_names)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return (self.step if has_past(feeds) else self.prefill).run(feeds)

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:  # pragma: no cover - run() dispatches
        return self.run(feeds)


def served(runner: GraphRunner, shas: Mapping[str, Any]) -> Any:
    """What decides a served runner's outputs besides its feeds: the file (by sha256) and how its
    I/O is mapped, or the pair of such runners optimum's decoder-only layout is served as."""
    if isinstance(runner, CacheSplitRunner):
        return {"prefill": served(runner.prefill, shas), "step": served(runner.step, shas)}
    if isinstance(runner, MappedRunner):
        return {"file": shas.get(Path(runner.path).name) if runner.path else None, "inputs": runner.input_map,
                "outputs": runner.output_map,
                "synth": {name: [getattr(make, "__qualname__", repr(make)), source_digest(make)]
                          for name, make in sorted(runner.synth.items())}}
    return {"runner": type(runner).__qualname__, "file": shas.get(Path(runner.path).name) if runner.path else None}


def open_onnx(path: Path, provider: "Provider | str", threads: int | None,
              precision: Precision = Precision.FP32, runtime: "RuntimeSettings | None" = None,
              profile_prefix: str | None = None) -> GraphRunner:
    """A session of a user's file on ``provider``'s backend (``Backend.open_onnx_file``, with the
    check's runtime settings and that provider's EP options; a bare string is an ONNX Runtime
    execution provider, as before backends other than ONNX Runtime ran files). A file the
    runtime refuses is a usage error naming it (exit 2), not a crash."""
    inspect_onnx(Path(path), library_of(runtime))
    if isinstance(provider, str):
        backend: type[Backend] = OrtBackend
        provider = Provider(provider, OrtBackend.name, provider)
    else:
        backend = backends()[provider.backend]
    try:
        return backend.open_onnx_file(Path(path), provider, precision, threads, runtime, profile_prefix=profile_prefix)
    except Exception as exc:  # noqa: BLE001 - onnxruntime's Fail / InvalidGraph, OpenVINO's read/compile errors...

        text = str(exc).strip().splitlines()[0][:240] if str(exc).strip() else type(exc).__name__
        known = known_failure(str(exc))
        cause = f"{known.line()}; " if known else ""
        raise UsageError(f"{path}: {backend.name} cannot load it: {cause}{text}") from None


class PrebuiltGraphs(ArtifactSource):
    """The artifact source of a check: the user's files, each opened once, and the runners
    that present them under reference graph names once their I/O is matched. It serves the
    variants whose backend runs ONNX files; the reference's PyTorch variants are built."""

    kind = "files"
    #: outputs are a function of the files' bytes and how they were opened, so they may be replayed
    #: from the output cache (``PrebuiltBackend.outputs_key``)
    replays: ClassVar[bool] = True

    def __init__(self, paths: Sequence[Path], provider: "Provider | str", threads: int | None,
                 records: Mapping[str, dict[str, Any]], precision: Precision = Precision.FP32,
                 runtime: "RuntimeSettings | None" = None, profile_dir: Path | None = None, *,
                 deferred: bool = False) -> None:
        """``deferred``: the files are inspected now (a bad one is exit 2 at once) but their sessions
        open on first use, so a large model's references can be computed and its PyTorch module
        freed first (``harness.check.staging``); otherwise every file opens now."""
        self.sessions: dict[Path, GraphRunner] = {}
        self.paths = [Path(p) for p in paths]
        self._open_args = (provider, threads, precision, runtime, profile_dir)
        #: whether the sessions wait for the reference pass (``harness.check.staging``)
        self.deferred = deferred
        if deferred:
            for path in self.paths:
                inspect_onnx(path, library_of(runtime))
        else:
            self.open_sessions()
        self.records = dict(records)
        self._runners: dict[str, GraphRunner] = {}
        #: how every file was opened (part of what decides its outputs)
        self.opened = {"provider": str(provider), "threads": threads, "precision": precision.value,
                       "runtime": runtime.as_dict() if runtime is not None else None}

    def open_sessions(self) -> None:
        """Open every file not yet opened; a file the runtime refuses closes the others and is exit 2."""
        provider, threads, precision, runtime, profile_dir = self._open_args
        try:
            for path in self.paths:
                if path in self.sessions:
                    continue
                prefix = None
                if profile_dir is not None and runtime is not None and runtime.profile:  # --profile: the case dir
                    Path(profile_dir).mkdir(parents=True, exist_ok=True)
                    prefix = str(Path(profile_dir) / f"ort-profile-{path.stem}")
                self.sessions[path] = open_onnx(path, provider, threads, precision, runtime, prefix)
        except BaseException:
            self.close()
            raise

    def session(self, path: Path) -> GraphRunner:
        if Path(path) not in self.sessions:
            self.open_sessions()
        return self.sessions[Path(path)]

    def serve(self, runners: Mapping[str, "GraphRunner | PromptThenStep"]) -> None:
        """The runners decoding uses, by reference graph name (known once the files are judged);
        a family's ``PromptThenStep`` pair is served as one ``CacheSplitRunner``."""
        self._runners.update({graph: CacheSplitRunner(r.prefill, r.step) if isinstance(r, PromptThenStep) else r
                              for graph, r in runners.items()})

    def runner(self, graph: str) -> GraphRunner:
        if graph not in self._runners:
            raise KeyError(f"no artifact provides the {graph!r} graph")
        return self._runners[graph]

    def backend_for(self, backend: type[Backend], ctx: BackendContext) -> Backend | None:
        return PrebuiltBackend(ctx, self) if runs_onnx_files(backend) else None

    def end_profiling(self) -> dict[str, str]:
        """File name -> its profiling trace (``--profile``); files whose session did not profile are absent."""
        traces = {path.name: session.end_profiling() for path, session in self.sessions.items()}
        return {name: trace for name, trace in traces.items() if trace}

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()


class PrebuiltBackend(Backend):
    """Runners from a ``PrebuiltGraphs`` by graph name; artifacts as the files were found."""

    name = "prebuilt"
    runs_onnx_files = True

    def __init__(self, ctx: BackendContext, source: PrebuiltGraphs) -> None:
        super().__init__(ctx)
        self.source = source

    @classmethod
    def unavailable_reason(cls, variant: Variant) -> str | None:
        return None

    def load(self, ref: GraphRef) -> GraphRunner:
        graph = ref.graph
        return self.source.runner(graph.name)

    def artifacts(self, ref: GraphRef) -> dict[str, dict[str, Any]]:
        return dict(self.source.records)

    def outputs_key(self, ref: GraphRef) -> dict[str, Any] | None:
        """The files are as deterministic as the runtime that opens them (``Backend.deterministic``:
        ONNX Runtime's CPU EP), so the decode and the closed loop over them are kept like a built
        artifact's: keyed by each file's sha256, how the files were opened, the runtime's version
        line, and how the served runner presents them (I/O maps, synthesized inputs' code). A
        second check of the same files replays them; the numeric check always runs the files."""
        runtime = backends().get(ref.variant.backend)
        runner = self.source._runners.get(ref.graph.name)
        if not self.source.replays or runtime is None or runner is None or not runtime.deterministic(ref.variant) \
                or self.ctx.runtime.profile:
            return None
        shas = {Path(name).name: [info.get("sha256"), info.get("external_data")]
                for name, info in self.source.records.items()}
        return {"backend": self.name, "runtime": runtime.runtime_summary(), "opened": self.source.opened,
                "runner": served(runner, shas), "code": source_digest(PrebuiltBackend)}
