"""Per-process state of one run: loaded models, corpora, backends, FP32 references.

Each pytest(-xdist) process owns one ``Workspace``; everything expensive is computed once
per model per process (the PyTorch FP32 reference in particular) and exported artifacts are
shared across processes through the on-disk cache.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from harness.core import RunOptions, Variant
from harness.core.cachedir import source_digest
from harness.core.phases import phase
from harness.core.runtime import SECTIONS, RuntimeSettings
from harness.data.corpus import Corpus
from harness.export.artifacts import ExportSettings
from harness.export.cache import ArtifactCache
from harness.export.reduce_range import ReduceRange
from harness.export.reduce_range import resolve as resolve_reduce_range
from harness.families import Family, GraphSpec, family_for
from harness.families.graph_modules import to_torch
from harness.judge.refcache import (
    ReferenceCache,
    ReplayRunner,
    error_outputs,
    feeds_digest,
    model_files_digest,
    texts_digest,
)
from harness.runners import Backend, backends
from harness.runners.base import BackendContext, GraphRef
from harness.runners.prebuilt import PrebuiltGraphs
from harness.runners.source import ArtifactSource, serving_backend
from harness.zoo.base import ModelCatalog, ModelSpec, cache_root
from harness.zoo.loading import LoadedModel, load_model

#: one batch of a numeric comparison: feeds, FP32 reference outputs, valid-position masks
ParityBatch = tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, "np.ndarray | None"]]


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
        self.artifacts = ArtifactCache(self.cache_dir / "artifacts")
        self.catalog = options.catalog or ModelCatalog()
        self.source: ArtifactSource | None = source
        self._models: dict[str, LoadedModel] = {}
        self._specs: dict[str, ModelSpec] = {}
        self.references = ReferenceCache(self.cache_dir / "references", fresh=options.settings.fresh_references)

    # -- models and data -----------------------------------------------------------------
    def spec(self, name: str) -> ModelSpec:
        if name not in self._specs:
            self._specs[name] = self.catalog.resolve(name)
        return self._specs[name]

    def model(self, name: str) -> LoadedModel:
        if name not in self._models:  # the PyTorch module loads on first use (a warm rerun may need none)
            self._models[name] = load_model(self.spec(name), lazy=True)
        return self._models[name]

    # -- memory: at most one full-precision copy of a large model at a time ------------------------
    def releases(self, model: LoadedModel) -> bool:
        """Whether ``model``'s PyTorch module is freed between cases (``--release-models``): for
        ``auto``, when its weight files reach :data:`RELEASE_BYTES` -- then a reload costs seconds
        beside minutes of export, and holding the module through every ONNX conversion and session
        is what took a 2 GB model's run to 5x its weights; a small model keeps it (reloads would
        cost more than the memory saves)."""
        mode = self.options.settings.release_models
        if mode != "auto":
            return mode == "always"
        if "weight_bytes" not in model.cache:
            from harness.zoo.loading import weight_files

            model.cache["weight_bytes"] = sum(p.stat().st_size for p in weight_files(model.path))
        return int(model.cache["weight_bytes"]) >= RELEASE_BYTES

    def end_case(self, variant: Variant, following: Variant | None = None) -> bool:
        """Called when a case of ``variant`` ends (``following``: the next case this process runs,
        when known). Frees the model's PyTorch module and its converted copies unless the next case
        runs the same model on a backend that uses the module itself; whatever needs the module
        later loads it again (``LoadedModel.release_module``). References, feeds and decodes stay:
        they are arrays in the model's memo and the reference cache. True when something was freed.

        Sessions are not this method's business: every judge closes its runners when its case ends."""
        from harness.core.rss import release_freed_memory

        model = self._models.get(variant.model)
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
        from harness.core.rss import release_freed_memory

        for graph in graphs if graphs is not None else family.graphs(model):
            backend.artifacts(GraphRef(model, family, graph, variant))
        if model.release_module():
            release_freed_memory()

    def family(self, model: LoadedModel) -> Family:
        return family_for(model.family)

    @staticmethod
    def corpus(model: LoadedModel) -> Corpus:
        """The model's corpus: a manifest name, or a user's .txt/.tsv file. The one place that
        tells them apart (numeric parity, generation and ``harness check`` all read it here)."""
        from harness.data.corpus import corpus_by_name

        return corpus_by_name(model.spec.corpus)

    def texts(self, model: LoadedModel) -> list[str]:
        return list(self.corpus(model).sources[: self.options.settings.samples])

    def batches(self, model: LoadedModel, size: int | None = None) -> list[list[str]]:
        """The corpus sentences in batches of ``size`` (default: the run's batch size)."""
        texts, size = self.texts(model), size or self.options.settings.batch_size
        return [texts[i: i + size] for i in range(0, len(texts), size)]

    def parity_batches(self, model: LoadedModel, family: Family, graph: GraphSpec,
                       batches: Sequence[Sequence[str]] | None = None,
                       feeds: Callable[[Sequence[str]], dict[str, np.ndarray]] | None = None) -> list[ParityBatch]:
        """(feeds, FP32 reference outputs, valid masks) per corpus batch: what every numeric
        comparison runs on. ``feeds`` builds a batch's inputs (default: the family's feeds
        for ``graph``), so a check's other modes and fixed shapes share the same reference.

        Family-built feeds and their references come from the reference cache keyed by the
        batches' texts (a seq2seq decoder's feeds hold PyTorch encoder states, so they are part
        of the reference); caller-built feeds are made here and only the outputs are cached."""
        with phase("reference"):
            return self._parity_batches(model, family, graph, batches, feeds)

    def _parity_batches(self, model: LoadedModel, family: Family, graph: GraphSpec,
                        batches: Sequence[Sequence[str]] | None,
                        feeds: Callable[[Sequence[str]], dict[str, np.ndarray]] | None) -> list[ParityBatch]:
        texts = self.batches(model) if batches is None else [list(b) for b in batches]
        if feeds is None:
            memo = ("parity", id(family), graph.name, texts_digest(texts))
            if memo not in model.cache:
                parts = {**self._reference_parts(model, family, graph), "texts": texts_digest(texts)}

                def compute() -> list[dict[str, np.ndarray]]:
                    out = []
                    for batch in texts:
                        inputs = family.feeds(model, graph, batch)
                        out += [inputs, self.reference(model, family, graph, inputs)]
                    return out

                flat = self.references.arrays(f"{model.name}-{graph.name}-feeds", parts, compute)
                model.cache[memo] = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
                for inputs, ref in model.cache[memo]:  # caller-built feeds of the same bytes reuse them
                    model.cache.setdefault(("reference", graph.name, _digest(inputs)), ref)
            pairs = model.cache[memo]
        else:
            made = [feeds(batch) for batch in texts]
            pairs = list(zip(made, self.references_for(model, family, graph, made)))
        return [(inputs, ref, family.valid_masks(graph, inputs, ref)) for inputs, ref in pairs]

    def check_feeds(self, model: LoadedModel, family: Family, graph: GraphSpec, mode: str,
                    batches: Sequence[Sequence[str]]) -> list[dict[str, np.ndarray]]:
        """``family.check_feeds`` of each batch, through the reference cache keyed by the texts and
        the mode (what ``harness check`` feeds a foreign file): they depend only on the model, the
        family's code and the texts, like the references, and computing them can need the PyTorch
        module (a seq2seq decoder's encoder states). Memoised per batch for the session."""
        texts = [list(b) for b in batches]
        keys = [("check-feeds", id(family), graph.name, mode, texts_digest([t])) for t in texts]
        if not all(k in model.cache for k in keys):
            missing = [t for t, k in zip(texts, keys) if k not in model.cache]
            parts = {**self._reference_parts(model, family, graph), "mode": mode, "texts": texts_digest(missing)}
            with phase("reference"):
                made = self.references.arrays(f"{model.name}-{graph.name}-{mode}-check-feeds", parts,
                                              lambda: [family.check_feeds(model, graph, mode, t) for t in missing])
            for t, f in zip(missing, made):
                model.cache[("check-feeds", id(family), graph.name, mode, texts_digest([t]))] = f
        return [dict(model.cache[k]) for k in keys]

    def references_for(self, model: LoadedModel, family: Family, graph: GraphSpec,
                       feeds: Sequence[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
        """The FP32 reference of each feed dict, through the reference cache (one entry for them all)."""
        digests = [_digest(f) for f in feeds]
        memo = [("reference", graph.name, d) for d in digests]
        if all(k in model.cache for k in memo):
            return [model.cache[k] for k in memo]
        parts = {**self._reference_parts(model, family, graph), "feeds": digests}
        outs = self.references.arrays(f"{model.name}-{graph.name}-ref", parts,
                                      lambda: [self.reference(model, family, graph, f) for f in feeds])
        for key, out in zip(memo, outs):
            model.cache.setdefault(key, out)
        return outs

    def variant_runner(self, backend: Backend, ref: GraphRef, feeds: Sequence[dict[str, np.ndarray]]) -> Any:
        """The variant's runner for ``ref.graph``, to be run on ``feeds``. When the backend declares
        its outputs deterministic for their inputs (``Backend.outputs_key``: CPU runtimes), the
        outputs come from the output cache -- computed once by the real runner on a miss -- so a
        warm rerun of an unchanged variant creates no session and loads no PyTorch module.
        A ``ReplayRunner`` answers other feeds by loading the real runner then."""
        with phase("variant"):
            return self._variant_runner(backend, ref, feeds)

    def _variant_runner(self, backend: Backend, ref: GraphRef, feeds: Sequence[dict[str, np.ndarray]]) -> Any:
        model, family, graph, variant = ref.model, ref.family, ref.graph, ref.variant
        key = backend.outputs_key(ref)
        if key is None:
            self.before_session(backend, model, family, variant, [graph])
            return backend.load(ref)
        digests = [_digest(f) for f in feeds]
        parts = {**self._reference_parts(model, family, graph), "variant": key, "feeds": digests}

        def compute() -> list[dict[str, np.ndarray]]:
            self.before_session(backend, model, family, variant, [graph])
            runner = backend.load(ref)
            outs: list[dict[str, np.ndarray]] = []
            try:
                for f in feeds:
                    try:
                        outs.append(runner.run(f))
                    except Exception as exc:  # noqa: BLE001 - kept as the refusal it is: replayed as the same error
                        outs.append(error_outputs(exc))
                return outs
            finally:
                runner.close()

        misses = self.references.misses
        outs = self.references.arrays(ref.label, parts, compute)
        artifact = backend.artifacts(ref).get(f"{graph.name}/model.onnx")
        return ReplayRunner(dict(zip(digests, outs)), lambda: backend.load(ref),
                            path=artifact["path"] if artifact else None, replayed=self.references.misses == misses)

    def _reference_parts(self, model: LoadedModel, family: Family, graph: GraphSpec) -> dict[str, Any]:
        """What decides a reference besides its inputs: model files, graph contract, family code."""
        correct = family_for(model.family)
        return {"weights": model.weights_sha256, "model_files": _model_files(model), "graph": repr(graph),
                "family": f"{type(family).__module__}.{type(family).__qualname__}",
                "family_source": source_digest(type(family)), "reference_family": source_digest(type(correct)),
                "torch_threads": torch.get_num_threads()}

    # -- execution -----------------------------------------------------------------------
    def settings_for(self, model: LoadedModel) -> ExportSettings:
        spec = model.spec
        blocked = tuple(dict.fromkeys((*self.options.settings.fp16_block_list, *spec.fp16_op_block_list)))
        settings = ExportSettings(opset=self.options.settings.opset, exporter=self.options.exporter,
                                  fp16_op_block_list=blocked,
                                  int8_per_channel=self.options.settings.int8_per_channel or spec.int8_per_channel,
                                  int8_reduce_range=self.reduce_range(
                                      self.options.settings.int8_per_channel or spec.int8_per_channel).enabled,
                                  int8_calibration=self.options.settings.int8_calibration,
                                  calibration_texts=tuple(self.calibration_texts(model)),
                                  calibration_batch_size=self.options.settings.batch_size,
                                  external_data=self.options.settings.external_data,
                                  fp16_node_block_list=tuple(dict.fromkeys(
                                      (*self.options.settings.fp16_node_block_list, *spec.fp16_node_block_list))),
                                  int8_nodes_to_exclude=tuple(dict.fromkeys(
                                      (*self.options.settings.int8_nodes_to_exclude, *spec.int8_nodes_to_exclude))))
        if model.spec.exporter and not self.options.explicit_exporter:
            settings = replace(settings, exporter=model.spec.exporter)
        return settings

    def reduce_range(self, per_channel: bool) -> ReduceRange:
        """The effective INT8 ``reduce_range`` for a model with these weight scales, and why
        (``harness.export.reduce_range``)."""
        return resolve_reduce_range(self.options.settings.int8_reduce_range, per_channel=per_channel)

    def calibration_texts(self, model: LoadedModel) -> list[str]:
        """Static INT8 calibration sentences: the corpus sentences *after* the judged ones, so
        calibration never sees what parity is measured on (``int8_calibration_samples`` of them,
        or what the corpus has left). Empty when nothing is left: the artifact build then says so."""
        sources = self.corpus(model).sources
        start = self.options.settings.samples
        return list(sources[start: start + self.options.settings.int8_calibration_samples])

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

    def reference(self, model: LoadedModel, family: Family, graph: GraphSpec,
                  feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """PyTorch FP32 outputs of the *correct* graph (never a fault-injected one), memoised
        by the feeds' content, so the same inputs are never run twice and others never collide."""
        key = ("reference", graph.name, _digest(feeds))
        if key not in model.cache:
            with phase("reference"):
                model.cache[key] = self._compute_reference(model, graph, feeds)
        reference: dict[str, np.ndarray] = model.cache[key]
        return reference

    @staticmethod
    def _compute_reference(model: LoadedModel, graph: GraphSpec,
                           feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        correct = next(g for g in family_for(model.family).graphs(model) if g.name == graph.name)
        module = family_for(model.family).module(model, correct)
        assert not any(m.training for m in model.model.modules()), "reference model left training mode"
        with torch.inference_mode():
            outs = module(*to_torch(feeds, correct.input_names))
        return {n: o.float().numpy() for n, o in zip(correct.output_names, outs)}


#: ``--release-models auto`` frees the PyTorch module of models with at least this many bytes of weights
RELEASE_BYTES = 1_000_000_000


def _uses_module(variant: Variant) -> bool:
    backend = backends().get(variant.backend)
    return bool(backend is not None and backend.uses_torch_module)


def _digest(feeds: dict[str, np.ndarray]) -> str:
    return feeds_digest(feeds)


def _model_files(model: LoadedModel) -> str:
    """Digest of the model directory's config and tokenizer files (memoised on the model)."""
    if "model_files_digest" not in model.cache:
        from harness.zoo.loading import PICKLE_SUFFIXES

        model.cache["model_files_digest"] = model_files_digest(model.path, (".safetensors", *PICKLE_SUFFIXES))
    digest: str = model.cache["model_files_digest"]
    return digest
