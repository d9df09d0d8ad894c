"""Numeric parity: every graph of every variant against PyTorch FP32 on padded corpus batches.

One case per model x precision x provider (``test_logits_parity[marian-tiny-int8-ort_cpu]``);
the record holds every metric of every output, the thresholds and the worst element.
"""

from harness.case.collector import Case
from harness.core import Variant


def test_logits_parity(variant: Variant, harness: Case) -> None:
    result = harness.numeric_parity()
    result.assert_ok()
