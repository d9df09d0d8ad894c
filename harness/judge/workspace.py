"""Per-process state of one run: loaded models, corpora, backends, FP32 references.

Each pytest(-xdist) process owns one ``Workspace``; everything expensive is computed once
per model per process (the PyTorch FP32 reference in particular) and exported artifacts are
shared across processes through the on-disk cache.
"""

from __future__ import annotations

import hashlib
from dataclasses import fields, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from harness.core import RunOptions, Variant
from harness.core.runtime import RuntimeSettings
from harness.data.corpus import Corpus
from harness.export.artifacts import ExportSettings
from harness.export.cache import ArtifactCache
from harness.families import Family, GraphSpec, family_for
from harness.families.base import to_torch
from harness.runners import Backend, backends
from harness.runners.base import BackendContext
from harness.runners.prebuilt import PrebuiltBackend, PrebuiltGraphs, runs_onnx_files
from harness.zoo.base import ModelCatalog, ModelSpec, cache_root
from harness.zoo.loading import LoadedModel, load_model

#: one batch of a numeric comparison: feeds, FP32 reference outputs, valid-position masks
ParityBatch = tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, "np.ndarray | None"]]


class Workspace:
    """Models resolve through the run's ``ModelCatalog`` (the zoo, a config's models, the model a
    ``harness check`` judges, with its tolerances and corpus); ``prebuilt`` is the artifact source when the graphs were built
    elsewhere: variants whose backend runs ONNX files then run those files instead of exports.
    Both are fixed at construction, so one workspace never changes where its graphs come from."""

    def __init__(self, options: RunOptions, cache_dir: Path | None = None, *,
                 prebuilt: PrebuiltGraphs | None = None) -> None:
        self.options = options
        self.cache_dir = Path(cache_dir) if cache_dir else cache_root()
        self.artifacts = ArtifactCache(self.cache_dir / "artifacts")
        self.catalog = options.catalog or ModelCatalog()
        self.prebuilt = prebuilt
        self._models: dict[str, LoadedModel] = {}
        self._specs: dict[str, ModelSpec] = {}

    # -- models and data -----------------------------------------------------------------
    def spec(self, name: str) -> ModelSpec:
        if name not in self._specs:
            self._specs[name] = self.catalog.resolve(name)
        return self._specs[name]

    def model(self, name: str) -> LoadedModel:
        if name not in self._models:
            model = load_model(self.spec(name))
            assert not model.model.training, f"{name}: reference model must be in eval mode"
            self._models[name] = model
        return self._models[name]

    def family(self, model: LoadedModel) -> Family:
        return family_for(model.family)

    @staticmethod
    def corpus(model: LoadedModel) -> Corpus:
        """The model's corpus: a manifest name, or a user's .txt/.tsv file. The one place that
        tells them apart (numeric parity, generation and ``harness check`` all read it here)."""
        from harness.data.corpus import corpus_by_name

        return corpus_by_name(model.spec.corpus)

    def texts(self, model: LoadedModel) -> list[str]:
        return list(self.corpus(model).sources[: self.options.num_samples])

    def batches(self, model: LoadedModel, size: int | None = None) -> list[list[str]]:
        """The corpus sentences in batches of ``size`` (default: the run's batch size)."""
        texts, size = self.texts(model), size or self.options.batch_size
        return [texts[i: i + size] for i in range(0, len(texts), size)]

    def parity_batches(self, model: LoadedModel, family: Family, graph: GraphSpec,
                       batches: Sequence[Sequence[str]] | None = None,
                       feeds: Callable[[Sequence[str]], dict[str, np.ndarray]] | None = None) -> list[ParityBatch]:
        """(feeds, FP32 reference outputs, valid masks) per corpus batch: what every numeric
        comparison runs on. ``feeds`` builds a batch's inputs (default: the family's feeds
        for ``graph``), so a check's other modes and fixed shapes share the same reference."""
        make = feeds or (lambda texts: family.feeds(model, graph, texts))
        out = []
        for texts in self.batches(model) if batches is None else batches:
            inputs = make(texts)
            ref = self.reference(model, family, graph, inputs)
            out.append((inputs, ref, family.valid_masks(graph, inputs, ref)))
        return out

    # -- execution -----------------------------------------------------------------------
    def settings_for(self, model: LoadedModel) -> ExportSettings:
        spec = model.spec
        blocked = tuple(dict.fromkeys((*self.options.fp16_op_block_list, *spec.fp16_op_block_list)))
        settings = ExportSettings(opset=self.options.opset, exporter=self.options.exporter,
                                  fp16_op_block_list=blocked,
                                  int8_per_channel=self.options.int8_per_channel or spec.int8_per_channel,
                                  int8_calibration=self.options.int8_calibration,
                                  calibration_texts=tuple(self.calibration_texts(model)),
                                  calibration_batch_size=self.options.batch_size)
        if model.spec.exporter and not self.options.explicit_exporter:
            settings = replace(settings, exporter=model.spec.exporter)
        return settings

    def calibration_texts(self, model: LoadedModel) -> list[str]:
        """Static INT8 calibration sentences: the corpus sentences *after* the judged ones, so
        calibration never sees what parity is measured on (``int8_calibration_samples`` of them,
        or what the corpus has left). Empty when nothing is left: the artifact build then says so."""
        sources = self.corpus(model).sources
        start = self.options.num_samples
        return list(sources[start: start + self.options.int8_calibration_samples])

    def runtime_for(self, variant: Variant, model: LoadedModel | None = None) -> RuntimeSettings:
        """The case's runtime settings: the run's, refined by the model's ``runtime`` table, with
        the case's own axis values; fields the variant's backend does not honour are left at
        their defaults (so a PyTorch record does not claim an ORT optimisation level)."""
        runtime = self.options.runtime
        spec = model.spec if model is not None else self.spec(variant.model)
        own = dict(spec.extra.get("runtime") or {})
        if own:
            runtime = runtime.merged(own)
        if variant.runtime:
            runtime = runtime.merged(dict(variant.runtime))
        if runtime.intra_op_threads is None and self.options.intra_op_threads:  # RunOptions built directly
            runtime = replace(runtime, intra_op_threads=self.options.intra_op_threads)
        if runtime.inter_op_threads is None and self.options.inter_op_threads:
            runtime = replace(runtime, inter_op_threads=self.options.inter_op_threads)
        backend = backends().get(variant.backend)
        honoured = backend.runtime_settings if backend is not None else frozenset()
        defaults = RuntimeSettings()
        return replace(runtime, **{f.name: getattr(defaults, f.name) for f in fields(RuntimeSettings)
                                   if f.name not in honoured})

    def backend(self, variant: Variant, model: LoadedModel, profile_dir: Path | None = None) -> Backend:
        runtime = self.runtime_for(variant, model)
        ctx = BackendContext(self.artifacts, self.settings_for(model), runtime.intra_op_threads,
                             runtime.inter_op_threads,
                             trt_max_batch=self.options.trt_max_batch or self.options.batch_size,
                             trt_max_seq=self.options.trt_max_seq, cache_dir=self.cache_dir, runtime=runtime,
                             profile_dir=profile_dir if runtime.profile else None)
        backend = backends()[variant.backend]
        if self.prebuilt is not None and runs_onnx_files(backend):
            return PrebuiltBackend(ctx, self.prebuilt)
        return backend(ctx)

    @staticmethod
    def unavailable_reason(variant: Variant) -> str | None:
        backend = backends().get(variant.backend)
        if backend is None:
            return f"backend {variant.backend!r} not available (no runner module for it)"
        return backend.unavailable_reason(variant)

    def reference(self, model: LoadedModel, family: Family, graph: GraphSpec,
                  feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """PyTorch FP32 outputs of the *correct* graph (never a fault-injected one), memoised
        by the feeds' content, so the same inputs are never run twice and others never collide."""
        key = ("reference", graph.name, _digest(feeds))
        if key not in model.cache:
            correct = next(g for g in family_for(model.family).graphs(model) if g.name == graph.name)
            module = family_for(model.family).module(model, correct)
            assert not any(m.training for m in model.model.modules()), "reference model left training mode"
            with torch.inference_mode():
                outs = module(*to_torch(feeds, correct.input_names))
            model.cache[key] = {n: o.float().numpy() for n, o in zip(correct.output_names, outs)}
        reference: dict[str, np.ndarray] = model.cache[key]
        return reference


def _digest(feeds: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(feeds):
        array = np.ascontiguousarray(feeds[name])
        h.update(f"{name}:{array.dtype}:{array.shape}".encode())
        h.update(array.tobytes())
    return h.hexdigest()
