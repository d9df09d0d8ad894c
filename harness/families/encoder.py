"""Encoders: sequence classifiers (logits per sentence) and bare encoders (hidden states)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.families.base import Family, GraphSpec, token_feeds
from harness.families.pooling import sentence_pooling
from harness.families.registry import register_family

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from harness.families.graph_modules import GraphModule
    from harness.zoo.loading import LoadedModel


def _is_classifier(model: LoadedModel) -> bool:
    """A sequence classifier (its head from transformers' task mappings), else a base model."""
    if model.config.get("model_type") == "harness-encoder-custom":
        return True
    return EncoderFamily().task(model.config) == "sequence_classification"


@register_family
class EncoderFamily(Family):
    name = "encoder"

    def graphs(self, model: LoadedModel) -> list[GraphSpec]:
        axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
        if _is_classifier(model):
            return [GraphSpec("model", ("input_ids", "attention_mask"), ("logits",),
                              {**axes, "logits": {0: "batch"}}, logits_outputs=frozenset({"logits"}))]
        return [GraphSpec("model", ("input_ids", "attention_mask"), ("last_hidden_state",),
                          {**axes, "last_hidden_state": {0: "batch", 1: "sequence"}})]

    def module(self, model: LoadedModel, graph: GraphSpec, torch_model: torch.nn.Module | None = None) -> GraphModule:
        from harness.families.graph_modules import ClassifierModule, HiddenModule

        m = torch_model if torch_model is not None else model.model
        if graph.output_names == ("logits",):
            return ClassifierModule(m, hf=model.config.get("model_type") != "harness-encoder-custom")
        return HiddenModule(m)

    def feeds(self, model: LoadedModel, graph: GraphSpec, texts: Sequence[str]) -> dict[str, np.ndarray]:
        return token_feeds(model, texts)

    def valid_masks(self, graph: GraphSpec, feeds: Mapping[str, np.ndarray],
                    outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | None]:
        mask = feeds["attention_mask"].astype(bool)
        return {name: (None if name == "logits" else mask) for name in graph.output_names}

    # -- detection and loading (see Family) ---------------------------------------------------------------
    detection_priority = 1000
    #: a classifier's logits, or a base model's hidden states (a sentence-transformers directory's too)
    tasks = ("sequence_classification", "feature_extraction")

    @classmethod
    def claims(cls, config: Mapping[str, Any]) -> bool:
        return config.get("model_type") == "harness-encoder-custom"

    # -- judging files built elsewhere (``harness check``) -------------------------------------
    implicit_inputs = ("position_ids",)  # 0..length-1 per row, as the reference computes them
    pads_static_sequence = True  # a file traced at a fixed length is fed padded (masked) inputs

    def sentence_pooling(self, model: LoadedModel, graph: GraphSpec) -> Any:
        """A sentence-transformers directory's pooling recipe, for graphs emitting token states."""
        if "last_hidden_state" not in graph.output_names:
            return None
        return sentence_pooling(model.path)
