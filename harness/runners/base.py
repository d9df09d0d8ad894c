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
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Provider, Variant
    from harness.export.artifacts import ExportSettings
    from harness.export.cache import ArtifactCache
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
    #: TensorRT optimisation-profile limits (max batch, max sequence length)
    trt_max_batch: int = 8
    trt_max_seq: int = 128
    #: the workspace's cache root (a fresh child that loads weights looks there)
    cache_dir: Path | None = None


class GraphRunner(abc.ABC):
    """A loaded, runnable graph (one ONNX file, or one torch wrapper module)."""

    input_names: list[str]
    output_names: list[str]

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


@dataclass
class ChildLoad:
    """What a backend loaded in a fresh measurement child: a call per graph, the load time
    of each part (ms), the live settings that change speed or memory, and how to read the
    device's peak memory afterwards (None: no device memory to report)."""

    calls: dict[str, ChildCall]
    load_ms: dict[str, float]
    settings: dict[str, Any] = field(default_factory=dict)
    gpu_peak_bytes: Callable[[], int | None] = lambda: None


class Backend(abc.ABC):
    """Makes GraphRunners for one backend (pytorch, onnxruntime, ...)."""

    name: str
    #: executes ONNX files, so pre-built artifacts (``harness check``) can stand in for its exports
    runs_onnx_files: ClassVar[bool] = False
    #: the providers (``--providers`` short names) this backend serves; the one declaration
    #: of each (``harness.core.PROVIDERS`` is derived from them)
    providers: tuple["Provider", ...] = ()

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx

    @classmethod
    @abc.abstractmethod
    def unavailable_reason(cls, variant: "Variant") -> str | None:
        """None when the variant can run here, else a precise reason to skip it."""

    @abc.abstractmethod
    def load(self, model: "LoadedModel", family: "Family", graph: "GraphSpec", variant: "Variant") -> GraphRunner:
        """Build (export/convert if needed, cached) and load ``graph`` of ``model`` for ``variant``."""

    def artifacts(self, model: "LoadedModel", family: "Family", graph: "GraphSpec",
                  variant: "Variant") -> dict[str, dict[str, Any]]:
        """Files this backend used for the graph: ``{name: {"path":..., "sha256":..., "bytes":...}}``."""
        return {}

    def outputs_key(self, model: "LoadedModel", family: "Family", graph: "GraphSpec",
                    variant: "Variant") -> dict[str, Any] | None:
        """What decides this variant's outputs for ``graph`` besides the feeds and the model --
        artifacts' sha256, runtime version, threads -- when the runtime is deterministic for
        them on this machine, so a warm rerun may replay them from the output cache
        (``harness.judge.refcache``). None (the default): always run. Timing never replays."""
        return None

    def shipped_files(self, model: "LoadedModel", family: "Family", graphs: Sequence["GraphSpec"],
                      variant: "Variant") -> dict[str, int]:
        """Bytes on disk of what a deployment of the variant ships, per file. Default: the
        artifacts of every graph (built here first if missing)."""
        return {name: int(info["bytes"]) for graph in graphs
                for name, info in self.artifacts(model, family, graph, variant).items()}

    # -- fresh-process measurement (cold start, peak memory) --------------------------------------------
    @classmethod
    def fresh_process_reason(cls, variant: "Variant") -> str | None:
        """None when :meth:`child_load` can load the variant in a fresh process, else why not."""
        if cls.child_load.__func__ is Backend.child_load.__func__:  # type: ignore[attr-defined]
            return f"backend {cls.name!r} has no fresh-process loader (Backend.child_load)"
        return None

    def child_spec(self, model: "LoadedModel", family: "Family", graphs: Sequence["GraphSpec"],
                   variant: "Variant") -> dict[str, Any]:
        """Parent side: a JSON-serialisable description from which :meth:`child_load` loads
        exactly what this backend would load here (built artifacts, never an export)."""
        raise NotImplementedError(f"backend {self.name!r} has no fresh-process loader")

    @classmethod
    def child_imports(cls) -> None:
        """Child side: import what a deployed process of this runtime imports (timed as the
        import cost, and the memory floor beside the model). Default: nothing more."""

    @classmethod
    def child_load(cls, spec: Mapping[str, Any]) -> ChildLoad:
        """Child side: load every graph ``spec`` describes. Runs in a process that has imported
        only this backend's module, so it must not import another runtime."""
        raise NotImplementedError(f"backend {cls.name!r} has no fresh-process loader")

    @classmethod
    def loader_ref(cls) -> str:
        """``module:Class``: how a fresh child finds this backend without importing the others."""
        return f"{cls.__module__}:{cls.__qualname__}"
