"""The families' PyTorch side: the modules that compute each graph over a loaded model.

What is exported and what the PyTorch runners execute. Kept apart from the family declarations
(``harness.families.<family>``) so that declaring, detecting and keying a family imports no torch:
a rerun whose every case replays from the cache needs a family's graphs and names, never its
modules. A family's ``module`` imports this when a graph is computed or exported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import torch

if TYPE_CHECKING:  # pragma: no cover
    from harness.families.base import GraphSpec


def cache_kv(layer: object) -> list[torch.Tensor]:
    """The key and value tensors of one filled layer of a transformers attention cache.

    transformers types a cache's layers as a union that also holds linear-attention and dummy
    layers; the graphs here only ever build attention caches, so anything else is a bug."""
    from transformers.cache_utils import CacheLayerMixin

    if not isinstance(layer, CacheLayerMixin) or layer.keys is None or layer.values is None:
        raise TypeError(f"expected a filled attention-cache layer, got {type(layer).__name__}")
    return [layer.keys, layer.values]


class GraphModule(torch.nn.Module):
    """Base for export wrappers: positional tensors in ``input_names`` order, a tuple out.

    Wrappers are created in eval mode: torch.onnx.export restores the *wrapper's* training
    flag recursively afterwards, and a fresh module is in training mode (PITFALLS #1).
    """

    def __init__(self) -> None:
        super().__init__()
        self.eval()


def to_torch(feeds: Mapping[str, np.ndarray], names: Sequence[str]) -> tuple[torch.Tensor, ...]:
    return tuple(torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in names)


# -- encoder -------------------------------------------------------------------------------------------
class ClassifierModule(GraphModule):
    def __init__(self, model: torch.nn.Module, hf: bool) -> None:
        super().__init__()
        self.model, self.hf = model, hf

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor]:
        if self.hf:
            return (self.model(input_ids=input_ids, attention_mask=attention_mask).logits,)
        return (self.model(input_ids, attention_mask),)


class HiddenModule(GraphModule):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state,)


# -- heads ---------------------------------------------------------------------------------------------
class HeadModule(GraphModule):
    """The head's named outputs of one forward pass, in ``outputs`` order."""

    def __init__(self, model: torch.nn.Module, outputs: tuple[str, ...]) -> None:
        super().__init__()
        self.model, self.outputs = model, outputs

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return tuple(getattr(out, name) for name in self.outputs)


# -- seq2seq -------------------------------------------------------------------------------------------
class EncoderModule(GraphModule):
    def __init__(self, model: Any) -> None:  # a transformers encoder-decoder model
        super().__init__()
        self.encoder = model.get_encoder()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state,)


class DecoderModule(GraphModule):
    """One decoder pass; returns logits and the self/cross-attention caches it produced."""

    model: Any  # a transformers encoder-decoder model: config, get_decoder(), lm_head

    def __init__(self, model: torch.nn.Module, graph: GraphSpec, layers: int) -> None:
        super().__init__()
        self.model, self.graph, self.layers = model, graph, layers
        self.with_past = graph.name == "decoder_with_past"

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = dict(zip(self.graph.input_names, args))
        # imported here: importing a family must not load transformers (a replayed run needs none)
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        d_model = self.model.config.d_model
        if self.with_past:
            pairs = [
                (x[f"past_key_values.{i}.decoder.key"], x[f"past_key_values.{i}.decoder.value"],
                 x[f"past_key_values.{i}.encoder.key"], x[f"past_key_values.{i}.encoder.value"])
                for i in range(self.layers)
            ]
            cache = EncoderDecoderCache(DynamicCache([p[:2] for p in pairs]), DynamicCache([p[2:] for p in pairs]))
            enc_k = pairs[0][2]
            # Cross-attention K/V come from the cache; the decoder only needs the states'
            # shape to build the cross-attention mask.
            states = enc_k.new_zeros((enc_k.shape[0], enc_k.shape[2], d_model))
        else:
            cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
            states = x["encoder_hidden_states"]
        out = self.model.get_decoder()(
            input_ids=x["input_ids"],
            encoder_hidden_states=states,
            encoder_attention_mask=x.get("encoder_attention_mask"),
            cache=cache,
            use_cache=True,
        )
        logits = self.model.lm_head(out.last_hidden_state)
        bias = getattr(self.model, "final_logits_bias", None)
        if bias is not None:
            logits = logits + bias
        presents: list[torch.Tensor] = []
        for i in range(self.layers):
            presents += cache_kv(cache.self_attention_cache.layers[i])
            if not self.with_past:
                presents += cache_kv(cache.cross_attention_cache.layers[i])
        return (logits, *presents)


# -- causal_lm -----------------------------------------------------------------------------------------
class StepModule(GraphModule):
    def __init__(self, model: torch.nn.Module, layers: int) -> None:
        super().__init__()
        self.model, self.layers = model, layers

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # imported here: importing a family must not load transformers (a replayed run needs none)
        from transformers.cache_utils import DynamicCache

        cache = DynamicCache([(past[2 * i], past[2 * i + 1]) for i in range(self.layers)])
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         cache=cache, use_cache=True)
        presents: list[torch.Tensor] = []
        for layer in cache.layers:
            presents += cache_kv(layer)
        return (out.logits, *presents)
