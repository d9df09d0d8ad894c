"""Inputs a foreign file declares that the reference computes implicitly, and their values.

Values are the ones the PyTorch reference uses implicitly (zeros ``token_type_ids``,
``arange`` positions) or ones the artifact's active branch never reads (the merged
decoder's other-branch inputs), so synthesizing them cannot hide an error. Which of them a
family may fill is the family's to say (``Family.implicit_inputs``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.check.layout import TensorInfo
from harness.runners.prebuilt import Synth, has_past

if TYPE_CHECKING:  # pragma: no cover
    from harness.families import Family
    from harness.zoo.loading import LoadedModel

Factory = Callable[[TensorInfo], Synth]


def synthesizers(model: LoadedModel, family: Family) -> dict[str, tuple[str, Factory]]:
    """Roles the harness can fill in -> (description, factory(artifact tensor) -> feeds -> array).

    Sizes come from the model's ``config.json`` (``LoadedModel.config``), never from the PyTorch
    module: a check whose references are cached must not load it (importing transformers and
    building the module was 40 % of ``harness check``'s wall time on a cached Marian)."""
    cfg: Mapping[str, Any] = model.config or {}  # a plain torch module's has no sizes and needs none

    def batch(feeds: Mapping[str, np.ndarray]) -> int:
        return int(feeds["input_ids"].shape[0])

    def token_types(info: TensorInfo) -> Synth:
        return lambda feeds: np.zeros_like(feeds["input_ids"])

    def positions(info: TensorInfo) -> Synth:
        def make(feeds: Mapping[str, np.ndarray]) -> np.ndarray:
            ids = feeds["input_ids"]
            return np.broadcast_to(np.arange(ids.shape[1], dtype=np.int64), ids.shape).copy()
        return make

    def cache_branch(info: TensorInfo) -> Synth:
        return lambda feeds: np.array([has_past(feeds)], dtype=np.bool_)

    def states(info: TensorInfo) -> Synth:
        width = info.shape[-1] if info.shape and isinstance(info.shape[-1], int) else int(cfg["d_model"])

        def make(feeds: Mapping[str, np.ndarray]) -> np.ndarray:
            mask = feeds.get("encoder_attention_mask", feeds.get("attention_mask"))
            assert mask is not None, "decoder feeds carry an attention mask"
            return np.zeros((batch(feeds), mask.shape[1], width), np.float32)
        return make

    def dummy_past(info: TensorInfo) -> Synth:
        """(batch, heads, 1, head_dim); the artifact's own static dims win over the config's."""
        heads = int(cfg.get("decoder_attention_heads") or cfg["num_attention_heads"])
        guess: list[int] = [0, heads, 1, int(cfg["d_model"]) // heads]
        dims = [d if isinstance(d, int) else g for d, g in zip(info.shape or guess, guess)]
        return lambda feeds: np.zeros([batch(feeds), *dims[1:]], np.float32)

    known: dict[str, tuple[str, Factory]] = {
        "token_type_ids": ("zeros, as the reference uses when given none", token_types),
        "use_cache_branch": ("true when the feeds carry a KV cache", cache_branch),
        "position_ids": ("0..length-1 per row, as the reference computes", positions),
        "encoder_hidden_states": ("zeros: the cached branch reads the cross-attention cache instead", states),
        "past": ("zeros of length 1: the uncached branch does not read them", dummy_past),
    }
    wanted = ("token_type_ids", "use_cache_branch", *family.implicit_inputs)
    return {name: known[name] for name in wanted}
