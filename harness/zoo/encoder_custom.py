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
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from harness.zoo.base import ModelSpec, register
from harness.zoo.hf_tiny import SEED, corpus_texts
from harness.zoo.tokenizer import save_tokenizer, train_tokenizer

MODEL_TYPE = "harness-encoder-custom"


class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size: int, d_model: int, nhead: int, num_layers: int, dim_feedforward: int,
                 num_labels: int, max_len: int, pad_token_id: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.pad_token_id = pad_token_id
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_token_id)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout=dropout, batch_first=True)
        # enable_nested_tensor=False: the nested-tensor fast path cannot be exported.
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.classifier = nn.Linear(d_model, num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.embed(input_ids) + self.pos(positions)
        x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        weights = attention_mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        logits: torch.Tensor = self.classifier(pooled)
        return logits


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
    torch.manual_seed(SEED)
    model = _from_config(config).eval()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(directory / "model.safetensors"))
    save_tokenizer(tok, directory)


def _from_config(config: dict[str, Any]) -> EncoderClassifier:
    return EncoderClassifier(
        vocab_size=config["vocab_size"], d_model=config["d_model"], nhead=config["nhead"],
        num_layers=config["num_layers"], dim_feedforward=config["dim_feedforward"],
        num_labels=config["num_labels"], max_len=config["max_len"], pad_token_id=config["pad_token_id"],
    )


def load_encoder_custom(directory: Path) -> EncoderClassifier:
    config = json.loads((directory / "config.json").read_text())
    model = _from_config(config)
    model.load_state_dict(load_file(str(directory / "model.safetensors")))
    return model.eval()


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
