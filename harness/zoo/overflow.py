"""A planted FP16 overflow: ``bert-fp16-overflow``, bert-tiny whose first feed-forward block
produces activations far beyond FP16's largest finite value (65504).

T5-style feed-forward blocks are the classic case in the wild (their FFN outputs reach 1e5+ in
trained checkpoints, which is why T5 FP16 inference returns NaN): FP32 is exact because the
following LayerNorm is scale-invariant, while an FP16 graph turns the FFN output into inf and
the LayerNorm into NaN. Here layer 0's ``intermediate.dense`` and ``output.dense`` weights are
scaled (x100 and x30000, fixed seed), so its ``output.dense`` MatMul reaches ~3e5 on the corpus.
Not a default model: it exists to fail FP16 on purpose, so ``harness bisect --suggest`` has a
real fault to localise and fix (tests/test_bisect_suggest.py, docs/walkthrough-precision-regression.md).
"""

from __future__ import annotations

from pathlib import Path

from harness.zoo.base import ModelSpec, register
from harness.zoo.hf_tiny import build_bert_tiny

#: how the planted fault scales layer 0's feed-forward weights
INTERMEDIATE_SCALE = 100.0
OUTPUT_SCALE = 30000.0


def build_bert_fp16_overflow(directory: Path) -> None:
    import torch
    from transformers import BertForSequenceClassification

    build_bert_tiny(directory)
    model = BertForSequenceClassification.from_pretrained(str(directory), attn_implementation="eager")
    weights = dict(model.named_parameters())
    with torch.no_grad():
        weights["bert.encoder.layer.0.intermediate.dense.weight"].mul_(INTERMEDIATE_SCALE)
        weights["bert.encoder.layer.0.output.dense.weight"].mul_(OUTPUT_SCALE)
    model.eval()
    model.save_pretrained(str(directory), safe_serialization=True)


BERT_FP16_OVERFLOW = register(
    ModelSpec(
        name="bert-fp16-overflow",
        family="encoder",
        description="bert-tiny with a planted FP16 overflow: layer 0's FFN output reaches ~3e5 (> 65504), "
                    "FP32 exact, FP16 NaN",
        build=build_bert_fp16_overflow,
        recipe_version=2,
        default=False,
    )
)
