"""Per-process state of one run: the stores a case reads its models, sentences, settings and references from.

Each pytest(-xdist) process owns one ``Workspace``; everything expensive is computed once per model
per process (the PyTorch FP32 reference in particular) and exported artifacts are shared across
processes through the on-disk cache. The state is split by job, each a small typed store:

* ``models`` (``ModelStore``): names to specs and loaded models;
* ``corpora`` (``CorpusStore``): the judged and calibration sentences;
* ``runtimes`` (``RuntimeStore``): export and runtime settings, and the backend of a variant;
* ``memory`` (``ModuleMemory``): when a large model's PyTorch module is freed;
* ``refs`` (``ReferenceStore``): feeds, FP32 references, replayed variant outputs.

The workspace itself only builds them and names the few things nearly every caller asks for.
"""

from __future__ import annotations

from pathlib import Path

from harness.core import RunOptions, Variant
from harness.core.runtime import RuntimeSettings
from harness.families import Family, GraphSpec
from harness.judge.corpora import CorpusStore
from harness.judge.memory import ModuleMemory
from harness.judge.models import ModelStore
from harness.judge.refcache import ReferenceCache
from harness.judge.references import ParityBatch, ReferenceStore
from harness.judge.runtimes import RuntimeStore
from harness.runners import Backend
from harness.runners.source import ArtifactSource
from harness.zoo.base import ModelCatalog, ModelSpec, cache_root
from harness.zoo.loading import LoadedModel


class Workspace:
    """Models resolve through the run's ``ModelCatalog`` (the zoo, a config's models, the model a
    ``harness check`` judges, with its tolerances and corpus); ``source`` is where the graphs come
    from (``harness.runners.source``): None, the harness builds them; ``PrebuiltGraphs``, files
    built elsewhere serve the variants whose backend runs ONNX files; an endpoint source, a served
    model. Both are fixed at construction, so one workspace never changes where its graphs come from."""

    def __init__(self, options: RunOptions, cache_dir: Path | None = None, *,
                 source: ArtifactSource | None = None) -> None:
        self.options = options
        self.cache_dir = Path(cache_dir) if cache_dir else cache_root()
        self.models = ModelStore(options.catalog or ModelCatalog())
        self.corpora = CorpusStore(options.settings)
        self.runtimes = RuntimeStore(options, self.cache_dir, self.models, self.corpora, source)
        self.memory = ModuleMemory(options.settings, self.models)
        self.refs = ReferenceStore(ReferenceCache(self.cache_dir / "references", fresh=options.settings.fresh_references),
                                   self.corpora, self.memory)

    @property
    def references(self) -> ReferenceCache:
        """The on-disk reference cache (references, decodes, cached outputs), owned by ``refs``."""
        return self.refs.references

    # -- what nearly every caller asks for: one line each, the store does the work ----------
    def spec(self, name: str) -> ModelSpec:
        return self.models.spec(name)

    def model(self, name: str) -> LoadedModel:
        return self.models.model(name)

    def family(self, model: LoadedModel) -> Family:
        return self.models.family(model)

    def texts(self, model: LoadedModel) -> list[str]:
        return self.corpora.texts(model)

    def batches(self, model: LoadedModel, size: int | None = None) -> list[list[str]]:
        return self.corpora.batches(model, size)

    def runtime_for(self, variant: Variant, model: LoadedModel | None = None) -> RuntimeSettings:
        return self.runtimes.runtime_for(variant, model)

    def backend(self, variant: Variant, model: LoadedModel, profile_dir: Path | None = None) -> Backend:
        return self.runtimes.backend(variant, model, profile_dir)

    def parity_batches(self, model: LoadedModel, family: Family, graph: GraphSpec) -> list[ParityBatch]:
        """(feeds, FP32 reference, valid masks) per corpus batch: the public API's name for what a
        team's own test compares on (``harness.testing``); the store's call takes more options."""
        return self.refs.parity_batches(model, family, graph)


__all__ = ["ParityBatch", "Workspace"]
