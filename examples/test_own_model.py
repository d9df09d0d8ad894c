"""A team's own gating tests, written against the harness's public fixtures.

Copy this file into your repository's tests and run it with your model:

    pytest examples/test_own_model.py --harness-models=./models/my-model --harness-precisions=fp32,int8 \\
        --harness-providers=ort_cpu

(pytest reads one value per option: lists are comma-separated, ``--harness-precisions=fp32,int8``;
``harness run --precisions fp32 int8`` takes them space-separated)

(or put the models, precisions and providers in ``harness.toml``). Every test that takes
``variant`` runs once per model x precision x provider; each case writes one record into
``reports/run-<time>/results.jsonl`` with whatever the test put in ``harness.metrics``.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.testing import Case, GraphRef, Variant, fail


def test_numeric_parity(variant: Variant, harness: Case) -> None:
    """The built-in judge: every output of every graph against PyTorch FP32, with the
    per-precision tolerances (and the model's overrides from harness.toml)."""
    harness.numeric_parity().assert_ok()


@pytest.mark.harness(families=["encoder"])
def test_predicted_labels_agree(variant: Variant, harness: Case) -> None:
    """A team's own rule: the deployed classifier predicts the PyTorch label on at least 99% of
    the corpus sentences. The number and its threshold go into the case's record."""
    ws, model = harness.workspace, harness.model
    family = ws.family(model)
    graph = next(g for g in family.graphs(model) if g.logits_outputs)
    output = sorted(graph.logits_outputs)[0]
    runner = ws.backend(variant, model).load(GraphRef(model, family, graph, variant))
    agree = total = 0
    try:
        for feeds, reference, _ in ws.parity_batches(model, family, graph):
            got = runner.run(feeds)[output]
            agree += int((got.argmax(-1) == reference[output].argmax(-1)).sum())
            total += int(np.prod(reference[output].shape[:-1]))
    finally:
        runner.close()
    harness.metrics["label_agreement"] = agree / total
    harness.thresholds["label_agreement"] = {"threshold": 0.99, "op": ">="}
    if agree / total < 0.99:
        fail(f"{variant.id}: label agreement {agree / total:.3f} < 0.99 over {total} sentences")
