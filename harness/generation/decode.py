"""Decode a list of texts with one variant: tokenize in padded batches, search, detokenize.

Batches keep corpus order, so they mix lengths and are padded: that is where a decoder
exported without its cross-attention mask goes wrong (PITFALLS #4), and a corpus sorted
by length would hide it.
"""

from __future__ import annotations

import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from harness.families import family_for
from harness.generation.search import search
from harness.generation.settings import GenerationSettings
from harness.runners.base import GraphRef

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Variant
    from harness.families import Family
    from harness.families.steppers import Start
    from harness.runners.base import Backend, GraphRunner
    from harness.zoo.loading import LoadedModel


#: torch intra-op threads while decoding, unless the run sets ``--harness-threads``. A
#: decode is hundreds of tiny calls; a thread pool only adds synchronisation, and on a
#: shared 2-core machine it made a 48-sentence torch decode 0.5 s -> 11-14 s.
DECODE_TORCH_THREADS = 1


@contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run the block with ``count`` torch intra-op threads, then restore the previous count."""
    import torch  # here: importing the decoding loops imports no torch (a replayed run needs none)

    before = torch.get_num_threads()
    if count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass
class Decoded:
    """Generated token ids (up to and including EOS) and their text, per input."""

    tokens: list[list[int]]
    texts: list[str]
    seconds: float = 0.0
    calls: int = 0  # graph calls of the decoder steps
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    replayed: bool = False  # read from the output cache (harness.judge.refcache), not decoded now

    @property
    def new_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)


def graphs_needed(family_name: str, use_cache: bool) -> tuple[str, ...]:
    """The graphs decoding a model of ``family_name`` runs (``Family.generation_graphs``)."""
    return family_for(family_name).generation_graphs(use_cache)


def load_runners(backend: "Backend", model: "LoadedModel", family: "Family", variant: "Variant",
                 use_cache: bool, stack: ExitStack) -> tuple[dict[str, "GraphRunner"], dict[str, dict[str, Any]]]:
    """Load the graphs decoding needs (closed by ``stack``) and the artifacts they came from."""
    wanted = family.generation_graphs(use_cache)
    runners, artifacts = {}, {}
    for graph in family.graphs(model):
        if graph.name in wanted:
            runners[graph.name] = stack.enter_context(backend.load(GraphRef(model, family, graph, variant)))
            artifacts.update(backend.artifacts(GraphRef(model, family, graph, variant)))
    return runners, artifacts


def prompt_batch(model: "LoadedModel", texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and mask, padded as the model's family decodes them (decoder-only prompts
    are left-padded: generation needs the last real token in the last column)."""
    return family_for(model.family).prompt_batch(model, texts)


def decode_texts(backend: "Backend", model: "LoadedModel", family: "Family", variant: "Variant",
                 texts: Sequence[str], settings: GenerationSettings, batch_size: int = 16,
                 threads: int | None = DECODE_TORCH_THREADS,
                 observe: Callable[["Start"], "Start"] | None = None) -> Decoded:
    """Decode ``texts`` with ``variant`` in batches of ``batch_size``; PyTorch runs with
    ``threads`` intra-op threads (None: leave torch's setting alone). ``observe`` is handed each
    batch's start and returns the one searched (a recorder of the steps, wrapped around it)."""
    with ExitStack() as stack:
        stack.enter_context(torch_threads(threads))
        runners, artifacts = load_runners(backend, model, family, variant, settings.use_cache, stack)
        starter = family.starter(model, runners, settings.decoder_start_token_id)
        tokens: list[list[int]] = []
        calls = 0
        began = time.perf_counter()
        for i in range(0, len(texts), batch_size):
            ids, mask = family.generation_prompts(model, texts[i: i + batch_size], settings.max_new_tokens)
            start = starter.start(ids, mask, settings.num_beams, settings.use_cache)
            if observe is not None:
                start = observe(start)
            tokens += search(start, settings)
            calls += getattr(start.stepper, "calls", 0)
        seconds = time.perf_counter() - began
    decoded = [model.tokenizer.decode(t, skip_special_tokens=True) for t in tokens]
    return Decoded(tokens, decoded, seconds, calls, artifacts)
