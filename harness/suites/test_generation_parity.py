"""Generation parity: every model with a generation head decodes its corpus per variant.

One case per model x precision x provider (``test_generation_parity[numbers-en-zh-int8-ort_cpu]``);
the record holds BLEU / chrF / edit distance / exact match against PyTorch FP32 (and
against the corpus references where it has them), the gates, and the worst sentences;
the decoded text of every sentence is kept in the case's ``decoded.jsonl``.
"""

import pytest

from harness.case.collector import Case
from harness.case.pipeline import generation_case as judge
from harness.core import Variant
from harness.judge.generation import GenerationRequest


@pytest.mark.harness(generates=True)
def test_generation_parity(variant: Variant, harness: Case, generation_request: GenerationRequest) -> None:
    judge(harness, generation_request).assert_ok()
