"""How a case's artifacts are built and run: export settings, runtime settings, the backend.

The run's options, a model's own ``[models.<name>]`` table and a case's runtime axis values meet
here, once, so a record's settings, a repro bundle and the session that ran say the same thing.
The backend comes from the workspace's artifact source (``harness.runners.source``): built by the
harness, or files / a served model that serve the variants they can.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.core import RunOptions, Variant
from harness.core.runtime import SECTIONS, RuntimeSettings
from harness.export.artifacts import ExportSettings
from harness.export.cache import ArtifactCache
from harness.export.reduce_range import ReduceRange
from harness.export.reduce_range import resolve as resolve_reduce_range
from harness.judge.corpora import CorpusStore
from harness.judge.models import ModelStore
from harness.runners import Backend, backends
from harness.runners.base import BackendContext
from harness.runners.prebuilt import PrebuiltGraphs
from harness.runners.source import ArtifactSource, serving_backend
from harness.zoo.loading import LoadedModel


class RuntimeStore:
    """The export and runtime settings of each model and variant, and the backend that runs them."""

    def __init__(self, options: RunOptions, cache_dir: Path, models: ModelStore, corpora: CorpusStore,
                 source: ArtifactSource | None) -> None:
        self.options, self.cache_dir, self.models, self.corpora = options, cache_dir, models, corpora
        self.artifacts = ArtifactCache(cache_dir / "artifacts")
        #: where the graphs come from, fixed for the workspace's life (None: the harness builds them)
        self.source = source

    def settings_for(self, model: LoadedModel) -> ExportSettings:
        settings = self.options.settings
        spec = model.spec
        blocked = tuple(dict.fromkeys((*settings.fp16_block_list, *spec.fp16_op_block_list)))
        export = ExportSettings(opset=settings.opset, exporter=self.options.exporter,
                                fp16_op_block_list=blocked,
                                int8_per_channel=settings.int8_per_channel or spec.int8_per_channel,
                                int8_reduce_range=self.reduce_range(
                                    settings.int8_per_channel or spec.int8_per_channel).enabled,
                                int8_calibration=settings.int8_calibration,
                                calibration_texts=tuple(self.corpora.calibration_texts(model)),
                                calibration_batch_size=settings.batch_size,
                                external_data=settings.external_data,
                                fp16_node_block_list=tuple(dict.fromkeys(
                                    (*settings.fp16_node_block_list, *spec.fp16_node_block_list))),
                                int8_nodes_to_exclude=tuple(dict.fromkeys(
                                    (*settings.int8_nodes_to_exclude, *spec.int8_nodes_to_exclude))))
        if model.spec.exporter and not self.options.explicit_exporter:
            export = replace(export, exporter=model.spec.exporter)
        return export

    def reduce_range(self, per_channel: bool) -> ReduceRange:
        """The effective INT8 ``reduce_range`` for a model with these weight scales, and why
        (``harness.export.reduce_range``)."""
        return resolve_reduce_range(self.options.settings.int8_reduce_range, per_channel=per_channel)

    def runtime_for(self, variant: Variant, model: LoadedModel | None = None) -> RuntimeSettings:
        """The case's runtime settings: the run's, refined by the model's ``runtime`` table, with
        the case's own axis values; fields the variant's backend does not honour are left at
        their defaults (so a PyTorch record does not claim an ORT optimisation level)."""
        runtime = self.options.runtime
        spec = model.spec if model is not None else self.models.spec(variant.model)
        own = dict(spec.extra.get("runtime") or {})
        if own:
            runtime = runtime.merged(own)
        if variant.runtime:
            runtime = runtime.merged(dict(variant.runtime))
        if runtime.intra_op_threads is None and self.options.settings.threads:  # RunOptions built directly
            runtime = replace(runtime, intra_op_threads=self.options.settings.threads)
        if runtime.inter_op_threads is None and self.options.settings.inter_threads:
            runtime = replace(runtime, inter_op_threads=self.options.settings.inter_threads)
        if self.options.runtime == RuntimeSettings():  # RunOptions built directly: its settings say it
            runtime = runtime.merged(self._section_settings(runtime))
        backend = backends().get(variant.backend)
        return runtime.only(backend.runtime_settings if backend is not None else frozenset())

    def _section_settings(self, runtime: RuntimeSettings) -> dict[str, Any]:
        """The backends' section fields (not axes: the variant carries those) that ``settings`` sets
        away from their defaults and ``runtime`` leaves at them -- what ``build_options`` would have
        resolved for a RunOptions built without it (scripts, tests)."""
        out: dict[str, Any] = {}
        for cls in SECTIONS.values():
            defaults = cls()
            for option_name, name in cls.options().items():
                info = cls.info(name)
                raw = getattr(self.options.settings, option_name)
                if info.axis is not None or raw is None or runtime.value(name) != getattr(defaults, name):
                    continue
                value = info.parse(list(raw) if isinstance(raw, tuple) else raw, option_name)
                if value != getattr(defaults, name):
                    out[name] = value
        return out

    def backend(self, variant: Variant, model: LoadedModel, profile_dir: Path | None = None) -> Backend:
        runtime = self.runtime_for(variant, model)
        ctx = BackendContext(self.artifacts, self.settings_for(model), runtime.intra_op_threads,
                             runtime.inter_op_threads, cache_dir=self.cache_dir, runtime=runtime,
                             batch_size=self.options.settings.batch_size,
                             profile_dir=profile_dir if runtime.profile else None)
        return serving_backend(self.source, backends()[variant.backend], ctx)

    @property
    def prebuilt(self) -> PrebuiltGraphs | None:
        """The source when it is files built elsewhere (``harness check`` serves decoding runners on it)."""
        return self.source if isinstance(self.source, PrebuiltGraphs) else None

    @staticmethod
    def unavailable_reason(variant: Variant) -> str | None:
        backend = backends().get(variant.backend)
        if backend is None:
            return f"backend {variant.backend!r} not available (no runner module for it)"
        return backend.unavailable_reason(variant)


__all__ = ["RuntimeStore"]
