"""Sentence-embedding parity for sentence-transformers encoders (all-MiniLM-L6-v2...).

What a search index stores is the pooled, normalised sentence vector, not the token states
the logits suite judges; INT8 can move token states a lot and the sentence vector little,
or the reverse for a pooling bug. One case per model x precision x provider
(``test_embedding_parity[minilm-l6-int8-ort_cpu]``); encoders without a pooling recipe
(``1_Pooling/config.json``) are not part of this suite's matrix.
"""

import time

import numpy as np
import pytest

from harness.case.collector import Case
from harness.case.pipeline import GraphJudgement, close_stage, write_side_outputs
from harness.core import Variant
from harness.core.phases import phase
from harness.families.pooling import sentence_pooling
from harness.judge.embedding import embedding_parity
from harness.judge.numeric import ParityResult
from harness.repro import EmbeddingDerived
from harness.results.outcome import decide
from harness.runners.base import GraphRef
from harness.zoo.base import ModelSpec, materialize


def _has_pooling_recipe(spec: ModelSpec) -> bool:
    """Only sentence-transformers directories ship a pooling recipe; built zoo models never do."""
    return spec.path is not None and sentence_pooling(spec.path) is not None


pytestmark = pytest.mark.harness(families=["encoder"], where=_has_pooling_recipe)


def test_embedding_parity(variant: Variant, harness: Case) -> None:
    ws = harness.workspace
    spec = ws.spec(variant.model)
    if sentence_pooling(materialize(spec)) is None:  # decided before loading any weights
        pytest.skip(f"{spec.name}: no sentence-transformers pooling recipe (1_Pooling/config.json)")
    model = harness.model
    family = ws.family(model)
    (graph,) = [g for g in family.graphs(model) if family.sentence_pooling(model, g) is not None]
    backend = ws.backend(variant, model)
    batches = ws.parity_batches(model, family, graph)
    runner = ws.variant_runner(backend, GraphRef(model, family, graph, variant), [feeds for feeds, _, _ in batches])
    harness.artifacts.update(backend.artifacts(GraphRef(model, family, graph, variant)))
    outputs: list[dict[str, np.ndarray]] = []
    seconds = 0.0
    pooling = family.sentence_pooling(model, graph)
    result = ParityResult(variant.id)
    try:
        with phase("variant"):
            for feeds, _, _ in batches:
                start = time.perf_counter()
                outputs.append(runner.run(feeds))
                seconds += time.perf_counter() - start
        with phase("metrics"):
            judged = embedding_parity(graph.name, pooling, batches, outputs, variant.precision, model.spec.tolerances)
        result.outputs.append(judged.output)
        # the pipeline's side outputs: a failing vector's repro bundle, re-judged by `harness repro` (docs/repro.md)
        write_side_outputs(ws, variant, model, GraphJudgement(graph, runner, batches, [judged.output],
                                                              EmbeddingDerived(pooling.mode, pooling.normalize)),
                           harness.case_dir(), result.side)
    finally:
        close_stage(runner, graph.name, result.side)
    harness.record_parity(result)
    texts = [t for batch in ws.batches(model) for t in batch]
    harness.data.update(pooling=judged.pooling.describe(), sentences=len(texts), run_seconds=round(seconds, 4),
                        worst={f"{graph.name}.{judged.output.output}": judged.describe_worst(texts)})
    harness.conclude(decide(result.assert_ok))
    result.assert_ok()
