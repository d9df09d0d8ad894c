"""The run's models by name: each resolved through the run's catalogue once, loaded once per process.

A suite case, ``harness check`` and a served-endpoint check all name a model; this store is where a
name becomes a ``ModelSpec`` (the zoo, a config's ``[models.<name>]``, the model a check judges, with
its tolerances and corpus) and a ``LoadedModel`` whose PyTorch module loads on first use.
"""

from __future__ import annotations

from harness.families import Family, family_for
from harness.zoo.base import ModelCatalog, ModelSpec
from harness.zoo.loading import LoadedModel, load_model


class ModelStore:
    """Specs and loaded models of one process, memoised by name."""

    def __init__(self, catalog: ModelCatalog) -> None:
        self.catalog = catalog
        self._models: dict[str, LoadedModel] = {}
        self._specs: dict[str, ModelSpec] = {}

    def spec(self, name: str) -> ModelSpec:
        if name not in self._specs:
            self._specs[name] = self.catalog.resolve(name)
        return self._specs[name]

    def model(self, name: str) -> LoadedModel:
        if name not in self._models:  # the PyTorch module loads on first use (a warm rerun may need none)
            self._models[name] = load_model(self.spec(name), lazy=True)
        return self._models[name]

    def loaded(self, name: str) -> LoadedModel | None:
        """The model if this process has loaded it (freeing memory must never load one)."""
        return self._models.get(name)

    @staticmethod
    def family(model: LoadedModel) -> Family:
        return family_for(model.family)


__all__ = ["ModelStore"]
