"""The one small interface every backend implements.

A runner *runs*: it never compares, times or decides. Feeds and outputs are dicts of
numpy arrays keyed by the graph's input/output names, so PyTorch, ONNX Runtime and
TensorRT are interchangeable under the comparison, generation and timing code.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Mapping

import numpy as np

from dataclasses import dataclass

if TYPE_CHECKING:  # pragma: no cover
    from harness.config import Variant
    from harness.export.artifacts import ExportSettings
    from harness.export.cache import ArtifactCache
    from harness.families.base import Family, GraphSpec
    from harness.model import LoadedModel


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


class GraphRunner(abc.ABC):
    """A loaded, runnable graph (one ONNX file, or one torch wrapper module)."""

    input_names: list[str]
    output_names: list[str]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Validate the feeds, then run. Outputs always come back as numpy (FP32 for float)."""
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise KeyError(f"{type(self).__name__}: missing inputs {missing}; got {sorted(feeds)}")
        return self._run({n: feeds[n] for n in self.input_names})

    @abc.abstractmethod
    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def close(self) -> None:
        """Release sessions/devices. Safe to call twice."""

    def __enter__(self) -> "GraphRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Backend(abc.ABC):
    """Makes GraphRunners for one backend (pytorch, onnxruntime, ...)."""

    name: str

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx

    @classmethod
    @abc.abstractmethod
    def unavailable_reason(cls, variant: "Variant") -> str | None:
        """None when the variant can run here, else a precise reason to skip it."""

    @abc.abstractmethod
    def load(self, model: "LoadedModel", family: "Family", graph: "GraphSpec", variant: "Variant") -> GraphRunner:
        """Build (export/convert if needed, cached) and load ``graph`` of ``model`` for ``variant``."""

    def artifacts(self, model: "LoadedModel", family: "Family", graph: "GraphSpec", variant: "Variant") -> dict[str, dict]:
        """Files this backend used for the graph: ``{name: {"path":..., "sha256":..., "bytes":...}}``."""
        return {}
