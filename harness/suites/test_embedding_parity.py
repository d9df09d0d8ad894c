"""Sentence-embedding parity for sentence-transformers encoders (all-MiniLM-L6-v2...).

What a search index stores is the pooled, normalised sentence vector, not the token states
the logits suite judges; INT8 can move token states a lot and the sentence vector little,
or the reverse for a pooling bug. One case per model x precision x provider
(``test_embedding_parity[minilm-l6-int8-ort_cpu]``); encoders without a pooling recipe
(``1_Pooling/config.json``) are not part of this suite's matrix.
"""


import pytest

from harness.case.collector import Case
from harness.case.pipeline import embedding_case
from harness.core import Variant
from harness.families.pooling import sentence_pooling
from harness.zoo.base import ModelSpec, materialize


def _has_pooling_recipe(spec: ModelSpec) -> bool:
    """Only sentence-transformers directories ship a pooling recipe; built zoo models never do."""
    return spec.path is not None and sentence_pooling(spec.path) is not None


pytestmark = pytest.mark.harness(families=["encoder"], where=_has_pooling_recipe)


def test_embedding_parity(variant: Variant, harness: Case) -> None:
    spec = harness.workspace.spec(variant.model)
    if sentence_pooling(materialize(spec)) is None:  # decided before loading any weights
        pytest.skip(f"{spec.name}: no sentence-transformers pooling recipe (1_Pooling/config.json)")
    embedding_case(harness).assert_ok()
