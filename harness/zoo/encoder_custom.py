"""The plain ``nn.TransformerEncoder`` text classifier of the TensorRT deployment practice.

embedding (+ learned positions) -> TransformerEncoder with ``src_key_padding_mask`` ->
mean pool over real tokens -> linear. Not an HF model, so it is saved in an HF-like
directory (``config.json`` with ``model_type: harness-encoder-custom``, safetensors
weights, ``tokenizer.json``) and loaded by :func:`load_encoder_custom`.
``encoder-custom`` is small for CI; ``encoder-custom-12x768`` is the BERT-base-sized
deployment shape used by the performance headline ratios.

Exported with the dynamo exporter by default: the TorchScript tracer bakes the batch size
of ``nn.MultiheadAttention``'s key-padding-mask reshape into the graph (``bsz * num_heads``
is a Python int), so the artifact crashes on any other batch size -- the classic "missing
dynamic axis". ``tests/test_faults.py`` keeps that failure caught.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from harness.zoo.base import ModelSpec, register
from harness.zoo.hf_tiny import SEED, corpus_texts
from harness.zoo.tokenizer import save_tokenizer, train_tokenizer

if TYPE_CHECKING:  # pragma: no cover
    from harness.zoo._encoder_classifier import EncoderClassifier

MODEL_TYPE = "harness-encoder-custom"


def load_encoder_custom(directory: Path) -> EncoderClassifier:
    """The model saved in ``directory`` (the module is in ``harness.zoo._encoder_classifier``, imported
    here: registering the zoo imports no torch)."""
    from harness.zoo._encoder_classifier import load

    return load(directory)


def build_encoder_custom(directory: Path, *, d_model: int, nhead: int, num_layers: int, ffn: int) -> None:
    tok = train_tokenizer(corpus_texts(), "bert", vocab_size=1000)
    config = {
        "model_type": MODEL_TYPE,
        "architectures": ["EncoderClassifier"],
        "vocab_size": len(tok),
        "d_model": d_model,
        "nhead": nhead,
        "num_layers": num_layers,
        "dim_feedforward": ffn,
        "num_labels": 4,
        "max_len": 512,
        "pad_token_id": tok.pad_token_id,
    }
    import torch
    from safetensors.torch import save_file

    from harness.zoo._encoder_classifier import from_config

    torch.manual_seed(SEED)
    model = from_config(config).eval()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"))
    save_tokenizer(tok, directory)


ENCODER_CUSTOM = register(
    ModelSpec(
        name="encoder-custom",
        family="encoder",
        description="nn.TransformerEncoder classifier (d_model 128, 2 layers, 4 heads), mean pool, random weights",
        build=partial(build_encoder_custom, d_model=128, nhead=4, num_layers=2, ffn=256),
        exporter="dynamo",
    )
)
ENCODER_CUSTOM_LARGE = register(
    ModelSpec(
        name="encoder-custom-12x768",
        family="encoder",
        description="nn.TransformerEncoder classifier at BERT-base size (12 layers x 768, 12 heads, ffn 3072)",
        build=partial(build_encoder_custom, d_model=768, nhead=12, num_layers=12, ffn=3072),
        exporter="dynamo",
        default=False,
    )
)
