"""Decoder-only LMs (Llama...): one decode step with past key/values.

One graph serves prefill (empty past) and every later step. Batches are left-padded with
explicit ``position_ids`` (cumulative sum of the mask), the layout generation uses; the
parity feed is a prefix whose cache comes from the FP32 model, then a two-token step, so
both the cache path and padding are exercised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.core import UsageError
from harness.families.base import (
    CheckedGraph,
    CheckMode,
    Family,
    GraphSpec,
    PromptThenStep,
    tokenize,
)
from harness.families.registry import register_family
from harness.families.steppers import CausalLMModel, position_ids

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from harness.families.graph_modules import GraphModule
    from harness.families.steppers import Starter
    from harness.runners.base import GraphRunner
    from harness.zoo.loading import LoadedModel



def lm_layout(model: LoadedModel) -> tuple[int, int, int]:
    """(layers, kv_heads, head_dim) of a causal LM config."""
    cfg: Any = model.hf_config  # a transformers PretrainedConfig (no weights loaded for it)
    heads = getattr(cfg, "num_attention_heads", None)
    if not heads:
        raise UsageError(f"{model.path}: {type(cfg).__name__} has no attention heads (a state-space or recurrent "
                         "cache): the causal_lm family's graphs carry attention key/value caches, so it cannot "
                         "judge this model")
    kv = getattr(cfg, "num_key_value_heads", None) or getattr(cfg, "num_kv_heads", None) or heads
    if getattr(cfg, "multi_query", False) and not getattr(cfg, "new_decoder_architecture", False):
        kv = 1  # Falcon's multi-query attention: one key/value head
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return cfg.num_hidden_layers, kv, head_dim


def kv_names(layers: int, prefix: str) -> tuple[str, ...]:
    return tuple(f"{prefix}.{i}.{kv}" for i in range(layers) for kv in ("key", "value"))


@register_family
class CausalLMFamily(Family):
    name = "causal_lm"

    def graphs(self, model: LoadedModel) -> list[GraphSpec]:
        layers, _, _ = lm_layout(model)
        past, present = kv_names(layers, "past_key_values"), kv_names(layers, "present")
        axes: dict[str, Any] = {
            "input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "past_sequence + sequence"},
            "position_ids": {0: "batch", 1: "sequence"},
            "logits": {0: "batch", 1: "sequence"},
            **{n: {0: "batch", 2: "past_sequence"} for n in past},
            **{n: {0: "batch", 2: "past_sequence + sequence"} for n in present},
        }
        return [GraphSpec("model", ("input_ids", "attention_mask", "position_ids", *past), ("logits", *present),
                          axes, logits_outputs=frozenset({"logits"}), gated_outputs=frozenset({"logits"}))]

    def module(self, model: LoadedModel, graph: GraphSpec, torch_model: torch.nn.Module | None = None) -> GraphModule:
        from harness.families.graph_modules import StepModule

        return StepModule(torch_model if torch_model is not None else model.model, lm_layout(model)[0])

    def empty_past(self, model: LoadedModel, batch: int) -> dict[str, np.ndarray]:
        layers, kv, head_dim = lm_layout(model)
        return {n: np.zeros((batch, kv, 0, head_dim), np.float32) for n in kv_names(layers, "past_key_values")}

    def feeds(self, model: LoadedModel, graph: GraphSpec, texts: Sequence[str], step: int = 2) -> dict[str, np.ndarray]:
        memo_key = ("lm-feeds", tuple(texts), step)
        if memo_key in model.cache:
            return dict(model.cache[memo_key])
        import torch

        from harness.families.graph_modules import to_torch

        enc = tokenize(model, texts)  # left-padded (tokenizer padding_side)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        if model.tokenizer.padding_side != "left":
            ids, mask = _left_pad(ids, mask, int(model.tokenizer.pad_token_id or 0))
        pos = position_ids(mask)
        cut = max(1, ids.shape[1] - step)
        prefix = {"input_ids": ids[:, :cut], "attention_mask": mask[:, :cut], "position_ids": pos[:, :cut],
                  **self.empty_past(model, ids.shape[0])}
        with torch.no_grad():
            outs = self.module(model, graph)(*to_torch(prefix, graph.input_names))
        feeds = {"input_ids": ids[:, cut:], "attention_mask": mask, "position_ids": pos[:, cut:]}
        for name, value in zip(graph.output_names[1:], outs[1:]):
            feeds[name.replace("present", "past_key_values", 1)] = value.numpy()
        model.cache[memo_key] = feeds
        return dict(feeds)

    def valid_masks(self, graph: GraphSpec, feeds: Mapping[str, np.ndarray],
                    outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | None]:
        mask = feeds["attention_mask"].astype(bool)
        step = feeds["input_ids"].shape[1]
        masks: dict[str, np.ndarray | None] = {"logits": mask[:, -step:]}
        for name, value in outputs.items():
            if name != "logits":
                masks[name] = np.broadcast_to(mask[:, None, :], value.shape[:3]).copy()
        return masks

    # -- detection, loading and generation (see Family) ---------------------------------------------------
    generates = True
    detection_priority = 20
    tasks = ("causal_lm",)

    def generation_graphs(self, use_cache: bool) -> tuple[str, ...]:
        return ("model",)

    shares_positions = True

    def prompt_batch(self, model: "LoadedModel", texts: Sequence[str],
                     max_length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Left-padded: generation needs the last real token in the last column."""
        ids, mask = super().prompt_batch(model, texts, max_length)
        if getattr(model.tokenizer, "padding_side", "right") != "left":
            ids, mask = _left_pad(ids, mask, int(model.tokenizer.pad_token_id or 0))
        return ids, mask

    def starter(self, model: "LoadedModel", runners: Mapping[str, "GraphRunner"],
                start_token_id: int | None = None) -> "Starter":
        """Prefill and step the one ``model`` graph from a left-padded prompt."""
        return CausalLMModel(runners["model"], self, model)

    # -- judging files built elsewhere (``harness check``) -------------------------------------
    def check_modes(self, role: str, takes_cache: bool) -> list[CheckMode]:
        """A step graph that takes a cache is judged on the prompt (empty cache) and on a later
        step; optimum's ``decoder_with_past_model.onnx`` only on the later step."""
        modes = ("step",) if role == "decoder_with_past" else ("prefill", "step") if takes_cache else ("prefill",)
        return [CheckMode("model", mode, f"{role}_{mode}") for mode in modes]

    def check_feeds(self, model: LoadedModel, graph: GraphSpec, mode: str,
                    texts: Sequence[str]) -> dict[str, np.ndarray]:
        """``prefill``: the whole left-padded prompt with an empty cache; ``step``: the parity feeds."""
        if mode != "prefill":
            return self.feeds(model, graph, texts)
        enc = tokenize(model, texts)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        if getattr(model.tokenizer, "padding_side", "right") != "left":
            ids, mask = _left_pad(ids, mask, int(model.tokenizer.pad_token_id or 0))
        return {"input_ids": ids, "attention_mask": mask, "position_ids": position_ids(mask),
                **self.empty_past(model, ids.shape[0])}

    def decoding_runners(self, judged: Mapping[str, CheckedGraph]) -> tuple[dict[str, Any], bool, str]:
        """The prompt graph alone decodes without a cache; with a cached step graph too (the same
        file, or optimum's pair), the loop gets one step graph that serves both."""
        prefill, step = judged.get("prefill"), judged.get("step")
        if prefill is None:
            return {}, False, "needs a graph that takes the prompt (decoder_model.onnx, model.onnx or merged)"
        if step is None or not (prefill.gives_cache and step.gives_cache):
            return {"model": prefill.runner}, False, ""
        if step.file == prefill.file:
            return {"model": step.runner}, True, ""
        return {"model": PromptThenStep(prefill.runner, step.runner)}, True, ""


def _left_pad(ids: np.ndarray, mask: np.ndarray, pad: int) -> tuple[np.ndarray, np.ndarray]:
    out_ids, out_mask = np.full_like(ids, pad), np.zeros_like(mask)
    for row in range(ids.shape[0]):
        n = int(mask[row].sum())
        out_ids[row, ids.shape[1] - n:] = ids[row, :n]
        out_mask[row, ids.shape[1] - n:] = 1
    return out_ids, out_mask
