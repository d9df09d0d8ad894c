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

from harness.results import CheckResult, MetricKey, raise_failures
from harness.zoo.base import materialize
from harness.zoo.minilm import embedding_metrics, embedding_tolerance, pool, sentence_pooling

def _has_pooling_recipe(spec) -> bool:
    """Only sentence-transformers directories ship a pooling recipe; built zoo models never do."""
    return spec.path is not None and sentence_pooling(spec.path) is not None


pytestmark = pytest.mark.harness(families=["encoder"], where=_has_pooling_recipe)


def test_embedding_parity(variant, harness):
    ws = harness.workspace
    spec = ws.spec(variant.model)
    pooling = sentence_pooling(materialize(spec))  # decided before loading any weights
    if pooling is None:
        pytest.skip(f"{spec.name}: no sentence-transformers pooling recipe (1_Pooling/config.json)")
    model = harness.model
    family = ws.family(model)
    (graph,) = [g for g in family.graphs(model) if "last_hidden_state" in g.output_names]
    backend = ws.backend(variant, model)
    runner = backend.load(model, family, graph, variant)
    harness.artifacts.update(backend.artifacts(model, family, graph, variant))
    refs, gots, seconds = [], [], 0.0
    try:
        for texts in ws.batches(model):
            feeds = family.feeds(model, graph, texts)
            ref = ws.reference(model, family, graph, feeds)
            start = time.perf_counter()
            got = runner.run(feeds)
            seconds += time.perf_counter() - start
            refs.append(pool(ref["last_hidden_state"], feeds["attention_mask"], pooling))
            gots.append(pool(got["last_hidden_state"], feeds["attention_mask"], pooling))
    finally:
        runner.close()
    ref_emb, got_emb = np.concatenate(refs), np.concatenate(gots)
    metrics = embedding_metrics(ref_emb, got_emb)
    tolerance = embedding_tolerance(variant.precision.value, model.spec.tolerances)
    prefix = f"{graph.name}.sentence_embedding"  # the output, as data.worst keys it
    harness.metrics.update({str(MetricKey(k, graph.name, "sentence_embedding")): v for k, v in metrics.items()})
    harness.thresholds.update({str(MetricKey(k, graph.name, "sentence_embedding")): v
                               for k, v in tolerance.as_dict().items()})
    per_sentence = (ref_emb * got_emb).sum(-1) / (np.linalg.norm(ref_emb, axis=-1) * np.linalg.norm(got_emb, axis=-1))
    worst = int(np.argmin(per_sentence))
    texts = [t for batch in ws.batches(model) for t in batch]
    harness.data.update(pooling=pooling.describe(), sentences=len(texts), run_seconds=round(seconds, 4),
                        worst={prefix: f"sentence {worst} (cosine {per_sentence[worst]:.6f}): {texts[worst][:80]!r}"})
    failures = [CheckResult(c.metric, metrics[c.metric], c.symbol, c.threshold, f"{graph.name}/sentence_embedding",
                             f"sentence {worst}") for c in tolerance.checks if not c.passes(metrics[c.metric])]
    raise_failures(variant.id, [f.message() for f in failures])
