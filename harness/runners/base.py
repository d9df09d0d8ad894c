"""The one small interface every backend implements.

A runner *runs*: it never compares or decides. Feeds and outputs are dicts of numpy
arrays keyed by the graph's input/output names, so PyTorch, ONNX Runtime and TensorRT are
interchangeable under the comparison, generation and timing code.

What differs between runtimes lives here, on the runtime's own classes, so no caller asks
which backend it holds (Polygraphy's runners own their ``inference_time`` the same way):

* ``GraphRunner.prepare`` / ``timed_call`` / ``synchronize``: what one deployed call is,
  with input conversion done before the timed region and asynchronous devices timed to
  completion;
* ``Backend.child_spec`` (in the parent) and ``Backend.child_load`` (in a fresh child
  process): how the runtime loads a variant for cold start and peak memory, from a small
  JSON description, importing nothing the runtime does not need;
* ``Backend.shipped_files``: the bytes on disk a deployment of the variant carries.

Optional capabilities of a runner are declared here with their defaults, so callers read them
without ``getattr``/``hasattr``: ``path`` (the ONNX file it runs, linted and bundled), ``replayed``
(its outputs came from the output cache), ``end_profiling`` (a runtime trace, ``--profile``) and
``file_view`` (the runner seen as its file: the file's own input and output names).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from harness.core import UsageError
from harness.core.phases import phase
from harness.core.runtime import RuntimeSettings, check_option_keys

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Precision, Provider, Variant
    from harness.core.runtime import RuntimeSettings
    from harness.export.artifacts import ExportSettings
    from harness.export.cache import ArtifactCache, CacheEntry
    from harness.families.base import Family, GraphSpec
    from harness.zoo.loading import LoadedModel

Feeds = Mapping[str, np.ndarray]
#: one timed call: everything a deployment does per request, nothing the harness adds
TimedCall = Callable[[], object]
#: one call in a fresh child: feeds in, anything out
ChildCall = Callable[[Feeds], object]


@dataclass
class BackendContext:
    """What every backend may need: where artifacts are cached, how to export, threads."""

    cache: "ArtifactCache"
    settings: "ExportSettings"
    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    #: the run's batch size (a backend's own default limits derive from it: TensorRT's largest batch)
    batch_size: int = 8
    #: the workspace's cache root (a fresh child that loads weights looks there)
    cache_dir: Path | None = None
    #: how this case runs its artifacts (threads, EP options, and each backend's own typed section:
    #: ``runtime.of(OrtSessionSettings)``, ``runtime.of(TensorRTSettings)``): the run's settings refined
    #: by the model's and the case's axis values
    runtime: "RuntimeSettings" = field(default_factory=lambda: _default_runtime())
    #: where a profiling session writes its trace (the case directory); None: no profiling
    profile_dir: Path | None = None


def _default_runtime() -> "RuntimeSettings":
    return RuntimeSettings()


@dataclass(frozen=True, eq=False)
class GraphRef:
    """This graph of this model in this variant: what a backend builds, loads, keys and ships, as
    one value instead of the ``(model, family, graph, variant)`` arguments every call threaded.
    Frozen; compared by identity (the model it holds is a live object, not a value)."""

    model: "LoadedModel"
    family: "Family"
    graph: "GraphSpec"
    variant: "Variant"

    @classmethod
    def each(cls, model: "LoadedModel", family: "Family", graphs: Sequence["GraphSpec"],
             variant: "Variant") -> tuple["GraphRef", ...]:
        """One reference per graph of the same model and variant."""
        return tuple(cls(model, family, g, variant) for g in graphs)

    @property
    def label(self) -> str:
        """``<model>-<graph>-<precision>-<provider>``: how caches and logs name it."""
        return f"{self.model.name}-{self.graph.name}-{self.variant.precision.value}-{self.variant.provider.short}"


@dataclass(frozen=True)
class FileView:
    """A runner seen as the file it runs, for evidence that must re-run without the harness (a
    repro bundle): the file, the feeds under the file's own input names, and the file's name of
    each output the runner returns (None: the same names)."""

    path: str
    feeds: Callable[[Feeds], dict[str, np.ndarray]] = dict
    outputs: Mapping[str, str] | None = None

    def output_name(self, name: str) -> str:
        return self.outputs.get(name, name) if self.outputs is not None else name


class GraphRunner(abc.ABC):
    """A loaded, runnable graph (one ONNX file, or one torch wrapper module)."""

    input_names: list[str]
    output_names: list[str]
    #: the ONNX file this runner executes (None: a PyTorch module, a native engine, a composite)
    path: str | None = None
    #: True when the outputs come from the output cache (``harness.judge.refcache``), not a session
    replayed: bool = False

    def end_profiling(self) -> str | None:
        """Stop the runtime's profiler and return its trace file (``--profile``); None when the
        runner does not profile (the default)."""
        return None

    def file_view(self) -> FileView | None:
        """This runner as the file it runs, under the file's own names; None when it runs no single
        ONNX file (nothing portable to re-run). Default: ``path`` with the runner's names."""
        return FileView(self.path) if self.path else None

    def run(self, feeds: Feeds) -> dict[str, np.ndarray]:
        """Validate the feeds, then run. Outputs always come back as numpy (FP32 for float)."""
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise KeyError(f"{type(self).__name__}: missing inputs {missing}; got {sorted(feeds)}")
        return self._run({n: feeds[n] for n in self.input_names})

    @abc.abstractmethod
    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    # -- timing: what one deployed call is ------------------------------------------------------------
    def prepare(self, feeds: Feeds) -> dict[str, np.ndarray]:
        """The feeds as the runtime takes them (dtype casts...), computed once, outside the
        timed region. Default: the feeds unchanged."""
        return dict(feeds)

    def synchronize(self) -> None:
        """Wait until work queued on an asynchronous device has finished. Default: nothing
        to wait for (outputs come back in host memory, so a returned call is complete)."""

    def timed_call(self, feeds: Feeds) -> TimedCall:
        """The callable one timed call executes, run to completion.

        Default: ``run()`` on the prepared feeds (numpy in, numpy out). A runtime whose
        deployed call is narrower (ONNX Runtime's ``session.run`` without the harness's FP32
        copy of every output) or asynchronous (a GPU stream) overrides this.
        """
        prepared = self.prepare(feeds)
        return lambda: self.run(prepared)

    def close(self) -> None:
        """Release sessions/devices. Safe to call twice."""

    def __enter__(self) -> "GraphRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class ChildSpec:
    """What a fresh measurement child loads (``Backend.child_spec`` in the parent, ``child_load`` in
    the child): each graph's built file (or the backend's own description of it), the device, the
    threads, and the backend's own fields (``options``: ONNX Runtime's session settings, OpenVINO's
    hint, the PyTorch model to load). Travels as one flat JSON object (``to_dict``/``from_dict``),
    the shape perf repro bundles record, so bundles written before this type still load."""

    #: graph -> its file or description; a name list where the child builds the graphs itself (PyTorch)
    graphs: Mapping[str, Any] | Sequence[str]
    device: str | None = None
    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    _COMMON: ClassVar[tuple[str, ...]] = ("graphs", "device", "intra_op_threads", "inter_op_threads")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"graphs": dict(self.graphs) if isinstance(self.graphs, Mapping) else list(self.graphs)}
        for key in ("device", "intra_op_threads", "inter_op_threads"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out.update({k: v for k, v in self.options.items() if k not in out})
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "ChildSpec":
        def count(key: str) -> int | None:
            value = raw.get(key)
            return None if value is None else int(value)

        device = raw.get("device")
        graphs = raw.get("graphs") or {}
        named = dict(graphs) if isinstance(graphs, Mapping) else [str(g) for g in graphs]
        return cls(named, None if device is None else str(device), count("intra_op_threads"),
                   count("inter_op_threads"), {k: v for k, v in raw.items() if k not in cls._COMMON})

    def files(self) -> dict[str, Any]:
        """Graph -> its file or description (a name list maps each name to itself)."""
        return dict(self.graphs) if isinstance(self.graphs, Mapping) else {g: g for g in self.graphs}

    def threads(self, key: str = "intra_op_threads") -> int | None:
        """A thread count as a runtime takes it: None for unset or 0."""
        value = getattr(self, key) if key in self._COMMON else self.options.get(key)
        return int(value or 0) or None


@dataclass
class ChildLoad:
    """What a backend loaded in a fresh measurement child: a call per graph, the load time
    of each part (ms), the live settings that change speed or memory, how to read the
    device's peak memory afterwards (None: no device memory to report), and the runners."""

    calls: dict[str, ChildCall]
    load_ms: dict[str, float]
    settings: dict[str, Any] = field(default_factory=dict)
    gpu_peak_bytes: Callable[[], int | None] = lambda: None
    #: graph -> the runner behind its call, where the backend has one: a timing child
    #: (``harness/perf/envchild.py``) times its ``timed_call``, what the perf suite times in-process
    runners: dict[str, "GraphRunner"] = field(default_factory=dict)


class OnnxExports:
    """The ONNX artifacts a backend that runs exported files reads from the export cache (ONNX
    Runtime, OpenVINO, the ONNX reference): each graph's entry at a precision, exported first when
    missing, and which entries this backend built rather than found -- their files are recorded with
    ``cache_hit: false``. One per backend instance (the judge makes one per case)."""

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx
        self.built: set[Path] = set()

    def entry(self, ref: GraphRef, precision: "Precision | None" = None) -> "CacheEntry":
        """``ref.graph``'s artifact at ``precision`` (default: the variant's)."""
        from harness.export.artifacts import onnx_artifact  # deferred: exporting needs torch, running must not

        with phase("export"):
            entry = onnx_artifact(ref.model, ref.family, ref.graph, precision or ref.variant.precision,
                                  self.ctx.settings, self.ctx.cache)
        if entry.built:
            self.built.add(entry.directory)
        return entry

    def file_infos(self, ref: GraphRef, precision: "Precision | None" = None) -> dict[str, dict[str, Any]]:
        """``Backend.artifacts`` of the entry: each file's path, sha256, bytes and cache hit."""
        entry = self.entry(ref, precision)
        return entry.file_infos(ref.graph.name, cache_hit=entry.directory not in self.built)

    def paths(self, refs: Sequence[GraphRef], precision: "Precision | None" = None) -> dict[str, str]:
        """Graph -> its ONNX file (built here first if missing): what a fresh child loads, never exporting."""
        return {r.graph.name: self.file_infos(r, precision)[f"{r.graph.name}/model.onnx"]["path"] for r in refs}


class Backend(abc.ABC):
    """Makes GraphRunners for one backend (pytorch, onnxruntime, ...)."""

    name: str
    #: how tables name the runtime ("ORT", "OpenVINO"); default: ``name``
    label: ClassVar[str] = ""
    #: executes ONNX files, so pre-built artifacts (``harness check``) can stand in for its exports
    runs_onnx_files: ClassVar[bool] = False
    #: the providers (``--providers`` short names) this backend serves; the one declaration
    #: of each (``harness.runners.PROVIDERS`` is derived from them)
    providers: tuple["Provider", ...] = ()

    #: a runtime a deployment runs, so its speed means something: timed by the perf suites and
    #: ``harness bench``; False: a judge of the numbers only (the ONNX reference, numpy node by node)
    timed: ClassVar[bool] = True

    #: runs the model's PyTorch module itself (or a copy made from it): the workspace keeps a large
    #: model's module loaded between two cases of such a backend (``ModuleMemory.end_case``)
    uses_torch_module: ClassVar[bool] = False

    #: the RuntimeSettings fields this backend honours: shared ones (``intra_op_threads``, ...) and
    #: the fields of the settings sections it reads (``OrtSessionSettings.names()``, declared in the
    #: backend's own module): a runtime axis multiplies only the variants of backends that honour it,
    #: and a record says which settings applied (the others stay at their defaults)
    runtime_settings: ClassVar[frozenset[str]] = frozenset()
    #: execution device (``Provider.device``) -> the EP option keys it accepts, each with its
    #: allowed values (None: any value). A provider missing here takes no options. A backend
    #: with other rules overrides :meth:`validate_provider_options`.
    provider_option_keys: ClassVar[Mapping[str, Mapping[str, Sequence[str] | None]]] = {}

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx

    @classmethod
    def validate_provider_options(cls, provider: "Provider", options: Mapping[str, str], where: str) -> None:
        """Raise a one-line UsageError (exit 2) naming the first EP option ``provider`` does not
        accept. Called when a run or config declares options, before anything runs."""
        if not options:
            return
        accepted = cls.provider_option_keys.get(provider.device)
        if accepted is None:
            raise UsageError(f"{where}: provider {provider.short!r} ({cls.name}) takes no provider options; "
                             f"got {', '.join(sorted(options))}")
        check_option_keys(options, accepted, where, f"{provider.short} ({provider.device})")

    @classmethod
    @abc.abstractmethod
    def unavailable_reason(cls, variant: "Variant") -> str | None:
        """None when the variant can run here, else a precise reason to skip it."""

    @classmethod
    def display(cls) -> str:
        """The runtime's name in tables: ``label``, else ``name``."""
        return cls.label or cls.name

    @classmethod
    def runtime_summary(cls) -> str:
        """One line for ``harness doctor``: the runtime's version and the devices it sees here
        (or why it cannot run). Default: the backend's name only."""
        return f"{cls.name}: (no runtime summary)"

    @classmethod
    def open_onnx_file(cls, path: Path, provider: "Provider", precision: "Precision",
                       threads: int | None, runtime: "RuntimeSettings | None" = None, *,
                       profile_prefix: str | None = None) -> GraphRunner:
        """A runner for an ONNX file built elsewhere (``harness check``), run the way this
        backend runs its own exports at ``precision``, with the settings of ``runtime`` this
        backend honours (``runtime_settings``) and ``provider``'s EP options; ``profile_prefix``:
        where a runtime that profiles (``--profile``) writes the trace (others ignore it). Only
        backends with ``runs_onnx_files``."""
        raise NotImplementedError(f"backend {cls.name!r} does not run ONNX files")

    @abc.abstractmethod
    def load(self, ref: GraphRef) -> GraphRunner:
        """Build (export/convert if needed, cached) and load ``ref.graph`` of ``ref.model`` for
        ``ref.variant``."""

    def artifacts(self, ref: GraphRef) -> dict[str, dict[str, Any]]:
        """Files this backend used for the graph: ``{name: {"path":..., "sha256":..., "bytes":...}}``."""
        return {}

    @classmethod
    def deterministic(cls, variant: "Variant") -> bool:
        """Whether this runtime gives the same outputs for the same inputs, artifacts, library
        versions and settings on this machine (CPU kernels: yes; GPU kernels may be picked per
        run). The one rule both caches read: :meth:`outputs_key` replays outputs only for such a
        variant, and a whole finished case is replayed only for one (``harness.plugins.replay``).
        Default: no."""
        return False

    def outputs_key(self, ref: GraphRef) -> dict[str, Any] | None:
        """What decides this variant's outputs for ``ref.graph`` besides the feeds and the model --
        artifacts' sha256, runtime version, threads -- when the runtime is deterministic for
        them on this machine (:meth:`deterministic`), so a warm rerun may replay them from the
        output cache (``harness.judge.refcache``). None (the default): always run. Timing never
        replays."""
        return None

    def shipped_files(self, refs: Sequence[GraphRef]) -> dict[str, int]:
        """Bytes on disk of what a deployment of the variant ships, per file (``refs``: its graphs,
        ``GraphRef.each``). Default: the artifacts of every graph (built here first if missing)."""
        return {name: int(info["bytes"]) for ref in refs for name, info in self.artifacts(ref).items()}

    # -- fresh-process measurement (cold start, peak memory) --------------------------------------------
    @classmethod
    def fresh_process_reason(cls, variant: "Variant") -> str | None:
        """None when :meth:`child_load` can load the variant in a fresh process, else why not."""
        if cls.child_load.__func__ is Backend.child_load.__func__:  # type: ignore[attr-defined]
            return f"backend {cls.name!r} has no fresh-process loader (Backend.child_load)"
        return None

    def child_spec(self, refs: Sequence[GraphRef]) -> ChildSpec:
        """Parent side: the description from which :meth:`child_load` loads exactly what this
        backend would load here for the graphs ``refs`` (built artifacts, never an export)."""
        raise NotImplementedError(f"backend {self.name!r} has no fresh-process loader")

    @classmethod
    def file_child_spec(cls, paths: Mapping[str, str], variant: "Variant", runtime: "RuntimeSettings") -> ChildSpec:
        """Parent side for files the harness did not build (``harness check --perf``): the
        description from which :meth:`child_load` opens the ONNX files ``paths`` (graph -> file)
        the way this backend runs them for ``variant``."""
        raise NotImplementedError(f"backend {cls.name!r} cannot time a given ONNX file in a fresh process")

    @classmethod
    def child_imports(cls) -> None:
        """Child side: import what a deployed process of this runtime imports (timed as the
        import cost, and the memory floor beside the model). Default: nothing more."""

    @classmethod
    def child_load(cls, spec: ChildSpec) -> ChildLoad:
        """Child side: load every graph ``spec`` describes. Runs in a process that has imported
        only this backend's module, so it must not import another runtime."""
        raise NotImplementedError(f"backend {cls.name!r} has no fresh-process loader")

    @classmethod
    def loader_ref(cls) -> str:
        """``module:Class``: how a fresh child finds this backend without importing the others."""
        return f"{cls.__module__}:{cls.__qualname__}"
