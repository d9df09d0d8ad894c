"""At most one full-precision copy of a large model at a time: when a PyTorch module is freed.

A case of a large model builds its artifacts, opens sessions of them and needs the PyTorch module
only for references; holding the module through every ONNX conversion and session is what took a
2 GB model's run to 5x its weights. This store decides when the module goes (``--release-models``)
and frees it between cases and before sessions open.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.core import Variant
from harness.core.rss import release_freed_memory
from harness.core.values import Settings
from harness.families import Family, GraphSpec
from harness.judge.models import ModelStore
from harness.runners import Backend, backends
from harness.runners.base import GraphRef
from harness.zoo.loading import LoadedModel, weight_files

#: ``--release-models auto`` frees the PyTorch module of models with at least this many bytes of weights
RELEASE_BYTES = 1_000_000_000


class ModuleMemory:
    """When the models of ``models`` give their PyTorch module back."""

    def __init__(self, settings: Settings, models: ModelStore) -> None:
        self.settings, self.models = settings, models
        self._weight_bytes: dict[str, int] = {}

    def releases(self, model: LoadedModel) -> bool:
        """Whether ``model``'s PyTorch module is freed between cases (``--release-models``): for
        ``auto``, when its weight files reach :data:`RELEASE_BYTES` -- then a reload costs seconds
        beside minutes of export; a small model keeps it (reloads would cost more than the memory saves)."""
        mode = self.settings.release_models
        if mode != "auto":
            return mode == "always"
        if model.name not in self._weight_bytes:
            self._weight_bytes[model.name] = sum(p.stat().st_size for p in weight_files(model.path))
        return self._weight_bytes[model.name] >= RELEASE_BYTES

    def end_case(self, variant: Variant, following: Variant | None = None) -> bool:
        """Called when a case of ``variant`` ends (``following``: the next case this process runs,
        when known). Frees the model's PyTorch module and its converted copies unless the next case
        runs the same model on a backend that uses the module itself; whatever needs the module
        later loads it again (``LoadedModel.release_module``). References, feeds and decodes stay:
        they are arrays in the reference store and the reference cache. True when something was freed.

        Sessions are not this method's business: every judge closes its runners when its case ends."""
        model = self.models.loaded(variant.model)
        if model is None or not self.releases(model):
            return False
        keep = following is not None and following.model == variant.model and _uses_module(following)
        if keep:
            freed = bool(model.derived)
            model.derived.clear()  # the next case converts its own precision
        else:
            freed = model.release_module()
        # always: a case that freed its module earlier (``before_session``) still leaves the protobuf
        # and session allocations of its artifacts in the allocator's free lists (measured: 0.25-0.5 GB
        # per ONNX Runtime case of a 0.57 GB model, carried into the next case's peak)
        release_freed_memory()
        return freed

    def before_session(self, backend: Backend, model: LoadedModel, family: Family,
                       variant: Variant, graphs: Sequence[GraphSpec] | None = None) -> None:
        """Called before ``backend`` opens sessions of ``variant`` (parity, decoding): for a large
        model (``releases``) whose backend runs built artifacts, not the module, the artifacts are
        built now (an export loads the module if it must) and then the PyTorch module is freed, so
        a session of the FP32 graph and the FP32 module are never alive together. The references
        were computed before this point; anything that still needs the module loads it again."""
        if backend.uses_torch_module or not self.releases(model):
            return

        for graph in graphs if graphs is not None else family.graphs(model):
            backend.artifacts(GraphRef(model, family, graph, variant))
        if model.release_module():
            release_freed_memory()


def _uses_module(variant: Variant) -> bool:
    backend = backends().get(variant.backend)
    return bool(backend is not None and backend.uses_torch_module)


__all__ = ["RELEASE_BYTES", "ModuleMemory"]
