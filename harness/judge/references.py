"""What every comparison runs on: feeds, PyTorch FP32 references, and the variant's outputs.

References are computed once per process (memoised here, under typed keys) and once per machine
(the on-disk ``ReferenceCache``, keyed by everything that decides their bytes); a backend whose
outputs are deterministic for their inputs has its outputs cached the same way, so a warm rerun of an
unchanged variant opens no session and loads no PyTorch module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from harness.core.cachedir import source_digest
from harness.core.phases import phase
from harness.families import Family, GraphSpec, family_for
from harness.families.graph_modules import to_torch
from harness.judge.corpora import CorpusStore
from harness.judge.memory import ModuleMemory
from harness.judge.refcache import (
    ReferenceCache,
    ReplayRunner,
    error_outputs,
    feeds_digest,
    model_files_digest,
    texts_digest,
)
from harness.runners import Backend
from harness.runners.base import GraphRef, GraphRunner
from harness.zoo.loading import PICKLE_SUFFIXES, LoadedModel

Arrays = dict[str, np.ndarray]
#: one batch of a numeric comparison: feeds, FP32 reference outputs, valid-position masks
ParityBatch = tuple[Arrays, Arrays, dict[str, "np.ndarray | None"]]


@dataclass(frozen=True)
class GraphKey:
    """A graph of a model as a family builds its feeds: what the disk cache keys a reference by
    besides its inputs (the family's class and the graph contract), so the memo is as strict as it."""

    model: str
    family: str
    graph: str

    @classmethod
    def of(cls, model: LoadedModel, family: Family, graph: GraphSpec) -> GraphKey:
        return cls(model.name, _qualified(family), repr(graph))


@dataclass(frozen=True)
class FeedsKey:
    """Family-built feeds of some corpus batches (``mode``: a check's feeding mode, '' for a suite's)."""

    graph: GraphKey
    texts: str
    mode: str = ""


@dataclass(frozen=True)
class OutputsKey:
    """The FP32 reference outputs of one feed dict (of the *correct* graph: no family decides them)."""

    model: str
    graph: str
    feeds: str


class ReferenceStore:
    """Feeds, references and replayed variant outputs, memoised for the process and cached on disk."""

    def __init__(self, references: ReferenceCache, corpora: CorpusStore, memory: ModuleMemory) -> None:
        self.references, self.corpora, self.memory = references, corpora, memory
        self._pairs: dict[FeedsKey, list[tuple[Arrays, Arrays]]] = {}
        self._check_feeds: dict[FeedsKey, Arrays] = {}
        self._outputs: dict[OutputsKey, Arrays] = {}
        self._model_files: dict[str, str] = {}

    def parity_batches(self, model: LoadedModel, family: Family, graph: GraphSpec,
                       batches: Sequence[Sequence[str]] | None = None,
                       feeds: Callable[[Sequence[str]], Arrays] | None = None) -> list[ParityBatch]:
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
                        feeds: Callable[[Sequence[str]], Arrays] | None) -> list[ParityBatch]:
        texts = self.corpora.batches(model) if batches is None else [list(b) for b in batches]
        if feeds is None:
            memo = FeedsKey(GraphKey.of(model, family, graph), texts_digest(texts))
            if memo not in self._pairs:
                parts = {**self._reference_parts(model, family, graph), "texts": texts_digest(texts)}

                def compute() -> list[Arrays]:
                    out = []
                    for batch in texts:
                        inputs = family.feeds(model, graph, batch)
                        out += [inputs, self.reference(model, family, graph, inputs)]
                    return out

                flat = self.references.arrays(f"{model.name}-{graph.name}-feeds", parts, compute)
                self._pairs[memo] = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
                for inputs, ref in self._pairs[memo]:  # caller-built feeds of the same bytes reuse them
                    self._outputs.setdefault(OutputsKey(model.name, graph.name, feeds_digest(inputs)), ref)
            pairs = self._pairs[memo]
        else:
            made = [feeds(batch) for batch in texts]
            pairs = list(zip(made, self.references_for(model, family, graph, made)))
        return [(inputs, ref, family.valid_masks(graph, inputs, ref)) for inputs, ref in pairs]

    def held(self, model: LoadedModel) -> frozenset[OutputsKey]:
        """The FP32 references of ``model`` this process holds (a feed dict seen again is not rerun)."""
        return frozenset(k for k in self._outputs if k.model == model.name)

    def check_feeds(self, model: LoadedModel, family: Family, graph: GraphSpec, mode: str,
                    batches: Sequence[Sequence[str]]) -> list[Arrays]:
        """``family.check_feeds`` of each batch, through the reference cache keyed by the texts and
        the mode (what ``harness check`` feeds a foreign file): they depend only on the model, the
        family's code and the texts, like the references, and computing them can need the PyTorch
        module (a seq2seq decoder's encoder states). Memoised per batch for the session."""
        texts = [list(b) for b in batches]
        graph_key = GraphKey.of(model, family, graph)
        keys = [FeedsKey(graph_key, texts_digest([t]), mode) for t in texts]
        if not all(k in self._check_feeds for k in keys):
            missing = [t for t, k in zip(texts, keys) if k not in self._check_feeds]
            parts = {**self._reference_parts(model, family, graph), "mode": mode, "texts": texts_digest(missing)}
            with phase("reference"):
                made = self.references.arrays(f"{model.name}-{graph.name}-{mode}-check-feeds", parts,
                                              lambda: [family.check_feeds(model, graph, mode, t) for t in missing])
            for t, f in zip(missing, made):
                self._check_feeds[FeedsKey(graph_key, texts_digest([t]), mode)] = f
        return [dict(self._check_feeds[k]) for k in keys]

    def references_for(self, model: LoadedModel, family: Family, graph: GraphSpec,
                       feeds: Sequence[Arrays]) -> list[Arrays]:
        """The FP32 reference of each feed dict, through the reference cache (one entry for them all)."""
        digests = [feeds_digest(f) for f in feeds]
        memo = [OutputsKey(model.name, graph.name, d) for d in digests]
        if all(k in self._outputs for k in memo):
            return [self._outputs[k] for k in memo]
        parts = {**self._reference_parts(model, family, graph), "feeds": digests}
        outs = self.references.arrays(f"{model.name}-{graph.name}-ref", parts,
                                      lambda: [self.reference(model, family, graph, f) for f in feeds])
        for key, out in zip(memo, outs):
            self._outputs.setdefault(key, out)
        return outs

    def reference(self, model: LoadedModel, family: Family, graph: GraphSpec, feeds: Arrays) -> Arrays:
        """PyTorch FP32 outputs of the *correct* graph (never a fault-injected one), memoised
        by the feeds' content, so the same inputs are never run twice and others never collide."""
        key = OutputsKey(model.name, graph.name, feeds_digest(feeds))
        if key not in self._outputs:
            with phase("reference"):
                self._outputs[key] = self._compute_reference(model, graph, feeds)
        return self._outputs[key]

    @staticmethod
    def _compute_reference(model: LoadedModel, graph: GraphSpec, feeds: Arrays) -> Arrays:
        correct = next(g for g in family_for(model.family).graphs(model) if g.name == graph.name)
        module = family_for(model.family).module(model, correct)
        assert not any(m.training for m in model.model.modules()), "reference model left training mode"
        with torch.inference_mode():
            outs = module(*to_torch(feeds, correct.input_names))
        return {n: o.float().numpy() for n, o in zip(correct.output_names, outs)}

    def variant_runner(self, backend: Backend, ref: GraphRef, feeds: Sequence[Arrays]) -> GraphRunner:
        """The variant's runner for ``ref.graph``, to be run on ``feeds``. When the backend declares
        its outputs deterministic for their inputs (``Backend.outputs_key``: CPU runtimes), the
        outputs come from the output cache -- computed once by the real runner on a miss -- so a
        warm rerun of an unchanged variant creates no session and loads no PyTorch module.
        A ``ReplayRunner`` answers other feeds by loading the real runner then."""
        with phase("variant"):
            return self._variant_runner(backend, ref, feeds)

    def _variant_runner(self, backend: Backend, ref: GraphRef, feeds: Sequence[Arrays]) -> GraphRunner:
        model, family, graph, variant = ref.model, ref.family, ref.graph, ref.variant
        key = backend.outputs_key(ref)
        if key is None:
            self.memory.before_session(backend, model, family, variant, [graph])
            return backend.load(ref)
        digests = [feeds_digest(f) for f in feeds]
        parts = {**self._reference_parts(model, family, graph), "variant": key, "feeds": digests}

        def compute() -> list[Arrays]:
            self.memory.before_session(backend, model, family, variant, [graph])
            runner = backend.load(ref)
            outs: list[Arrays] = []
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
        return {"weights": model.weights_sha256, "model_files": self.files_digest(model), "graph": repr(graph),
                "family": _qualified(family), "family_source": source_digest(type(family)),
                "reference_family": source_digest(type(correct)), "torch_threads": torch.get_num_threads()}

    def files_digest(self, model: LoadedModel) -> str:
        """Digest of the model directory's config and tokenizer files (memoised per model)."""
        if model.name not in self._model_files:
            self._model_files[model.name] = model_files_digest(model.path, (".safetensors", *PICKLE_SUFFIXES))
        return self._model_files[model.name]


def _qualified(family: Family) -> str:
    return f"{type(family).__module__}.{type(family).__qualname__}"


__all__ = ["FeedsKey", "GraphKey", "OutputsKey", "ParityBatch", "ReferenceStore"]
