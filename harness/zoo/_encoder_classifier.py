"""The module of the ``encoder-custom`` zoo models (``harness.zoo.encoder_custom``): a plain
``nn.TransformerEncoder`` classifier, and how it is built from its ``config.json`` and loaded.

Apart from the zoo module that registers the models, so that registering the zoo imports no
torch (a rerun whose every case replays needs the specs, never the modules).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import nn


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


def from_config(config: dict[str, Any]) -> EncoderClassifier:
    return EncoderClassifier(
        vocab_size=config["vocab_size"], d_model=config["d_model"], nhead=config["nhead"],
        num_layers=config["num_layers"], dim_feedforward=config["dim_feedforward"],
        num_labels=config["num_labels"], max_len=config["max_len"], pad_token_id=config["pad_token_id"],
    )


def load(directory: Path) -> EncoderClassifier:
    config = json.loads((directory / "config.json").read_text())
    model = from_config(config)
    model.load_state_dict(load_file(str(directory / "model.safetensors")))
    return model.eval()
