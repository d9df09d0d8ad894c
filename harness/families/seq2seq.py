"""Encoder-decoder models (MarianMT...): encoder + decoder step, with and without past.

Graphs and I/O names follow optimum's layout (``encoder_model.onnx``, ``decoder_model.onnx``,
``decoder_with_past_model.onnx``) so artifacts from other pipelines line up name for name.
The decoder takes ``encoder_attention_mask``: without it, cross-attention silently reads
padding, which only padded batches of mixed lengths reveal (PITFALLS #4). Decoder feeds use
the FP32 reference encoder's states, so each graph is judged on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.families.base import CheckedGraph, CheckMode, Family, GraphSpec, tokenize
from harness.families.registry import register_family
from harness.families.steppers import Seq2SeqModel

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from harness.families.graph_modules import GraphModule
    from harness.families.steppers import Starter
    from harness.runners.base import GraphRunner
    from harness.zoo.loading import LoadedModel


NO_ENCODER_MASK = "no_encoder_mask"


def n_layers(model: LoadedModel) -> int:
    cfg: Any = model.hf_config  # a transformers PretrainedConfig (no weights loaded for it)
    return int(getattr(cfg, "decoder_layers", None) or cfg.num_hidden_layers)


def present_names(layers: int, kinds: Sequence[str] = ("decoder", "encoder"),
                  prefix: str = "present") -> tuple[str, ...]:
    return tuple(f"{prefix}.{i}.{kind}.{kv}" for i in range(layers) for kind in kinds for kv in ("key", "value"))


@register_family
class Seq2SeqFamily(Family):
    name = "seq2seq"

    def __init__(self, *, encoder_mask: bool = True) -> None:
        self.encoder_mask = encoder_mask

    def graphs(self, model: LoadedModel) -> list[GraphSpec]:
        layers = n_layers(model)
        tag = "" if self.encoder_mask else NO_ENCODER_MASK
        mask_in = ("encoder_attention_mask",) if self.encoder_mask else ()
        enc_axes = {0: "batch", 1: "encoder_sequence"}
        dec_present = present_names(layers, ("decoder",))
        enc_present = present_names(layers, ("encoder",))
        decoder_axes: dict[str, Any] = {
            "input_ids": {0: "batch", 1: "decoder_sequence"},
            "encoder_hidden_states": enc_axes,
            "encoder_attention_mask": enc_axes,
            "logits": {0: "batch", 1: "decoder_sequence"},
            **{n: {0: "batch", 2: "decoder_sequence"} for n in dec_present},
            **{n: {0: "batch", 2: "encoder_sequence"} for n in enc_present},
        }
        past_dec = present_names(layers, ("decoder",), "past_key_values")
        past_enc = present_names(layers, ("encoder",), "past_key_values")
        with_past_axes: dict[str, Any] = {
            "input_ids": {0: "batch", 1: "decoder_sequence"},
            "encoder_attention_mask": enc_axes,
            "logits": {0: "batch", 1: "decoder_sequence"},
            **{n: {0: "batch", 2: "past_decoder_sequence"} for n in past_dec},
            **{n: {0: "batch", 2: "encoder_sequence"} for n in past_enc},
            **{n: {0: "batch", 2: "past_decoder_sequence + decoder_sequence"} for n in dec_present},
        }
        logits = frozenset({"logits"})
        return [
            GraphSpec("encoder", ("input_ids", "attention_mask"), ("last_hidden_state",),
                      {"input_ids": enc_axes, "attention_mask": enc_axes, "last_hidden_state": enc_axes}),
            GraphSpec("decoder", ("input_ids", "encoder_hidden_states", *mask_in),
                      ("logits", *present_names(layers)), decoder_axes,
                      logits_outputs=logits, gated_outputs=logits, variant_tag=tag),
            GraphSpec("decoder_with_past", ("input_ids", *mask_in, *present_names(layers, prefix="past_key_values")),
                      ("logits", *dec_present), with_past_axes,
                      logits_outputs=logits, gated_outputs=logits, variant_tag=tag),
        ]

    def module(self, model: LoadedModel, graph: GraphSpec, torch_model: torch.nn.Module | None = None) -> GraphModule:
        from harness.families.graph_modules import DecoderModule, EncoderModule

        m = torch_model if torch_model is not None else model.model
        if graph.name == "encoder":
            return EncoderModule(m)
        return DecoderModule(m, graph, n_layers(model))

    # -- feeds ---------------------------------------------------------------------------
    def feeds(self, model: LoadedModel, graph: GraphSpec, texts: Sequence[str]) -> dict[str, np.ndarray]:
        memo_key = ("seq2seq-feeds", tuple(texts))
        if memo_key not in model.cache:
            model.cache[memo_key] = self._all_feeds(model, texts)
        # Every feed of the graph, including ones a faulty graph ignores (runners pick
        # their inputs by name), so masks and references are the same for every variant.
        return dict(model.cache[memo_key][graph.name])

    def _all_feeds(self, model: LoadedModel, texts: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
        import torch

        from harness.families.graph_modules import to_torch

        enc = tokenize(model, texts)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        reference = Seq2SeqFamily(encoder_mask=True)
        ref_graphs = {g.name: g for g in reference.graphs(model)}
        with torch.no_grad():
            (states,) = reference.module(model, ref_graphs["encoder"])(*to_torch(enc, ("input_ids", "attention_mask")))
        cfg: Any = model.hf_config  # a transformers PretrainedConfig (no weights loaded for it)
        start = int(cfg.decoder_start_token_id)
        pad = int(cfg.pad_token_id)
        # Teacher-forced decoder inputs: <start> + the source ids, right-padded (causal, so
        # padding after a row's end never reaches its real positions).
        lengths = mask.sum(axis=1)
        dec = np.full((ids.shape[0], ids.shape[1]), pad, dtype=np.int64)
        dec[:, 0] = start
        for row, n in enumerate(lengths):
            dec[row, 1:n] = ids[row, : n - 1]
        dec_len = lengths  # start + (n - 1) ids
        decoder = {"input_ids": dec, "encoder_hidden_states": states.numpy(), "encoder_attention_mask": mask}
        # decoder_with_past: a prefix every row fills, its cache from the FP32 decoder, then one step.
        prefix = max(1, int(dec_len.min()) - 1)
        with torch.no_grad():
            outs = reference.module(model, ref_graphs["decoder"])(
                torch.from_numpy(dec[:, :prefix]), states, torch.from_numpy(mask))
        presents = dict(zip(ref_graphs["decoder"].output_names[1:], (o.numpy() for o in outs[1:])))
        with_past = {"input_ids": dec[:, prefix: prefix + 1], "encoder_attention_mask": mask}
        for name, value in presents.items():
            with_past[name.replace("present", "past_key_values", 1)] = value
        return {
            "encoder": {"input_ids": ids, "attention_mask": mask},
            "decoder": decoder,
            "decoder_with_past": with_past,
        }

    def shape_probes(self, model: LoadedModel, graph: GraphSpec,
                     feeds: Mapping[str, np.ndarray]) -> list[tuple[str, dict[str, np.ndarray]]]:
        """The corpus batches feed the decoder a target exactly as long as the source (teacher
        forcing on the source ids), so a decoder exported with one dynamic axis for both lengths
        passes them. Probes: target shorter than the source, target longer than the source
        (the source cut), and for the cached step two other past lengths."""
        out: list[tuple[str, dict[str, np.ndarray]]] = []
        if graph.name == "decoder" and "encoder_hidden_states" in feeds:
            ids, src = feeds["input_ids"], feeds["encoder_hidden_states"].shape[1]
            if ids.shape[1] > 1:
                short = {**feeds, "input_ids": ids[:, : max(1, ids.shape[1] // 2)]}
                out.append((f"target length {short['input_ids'].shape[1]} < source length {src}", short))
            if src > 1:
                cut = max(1, src // 2)
                longer = {**feeds, "encoder_hidden_states": feeds["encoder_hidden_states"][:, :cut]}
                if "encoder_attention_mask" in feeds:
                    mask = feeds["encoder_attention_mask"][:, :cut].copy()
                    mask[:, 0] = 1  # every row keeps a real source token
                    longer["encoder_attention_mask"] = mask
                out.append((f"target length {ids.shape[1]} > source length {cut}", longer))
        elif graph.name == "decoder_with_past" and "encoder_attention_mask" in feeds:
            past = next((v for k, v in feeds.items() if ".decoder." in k and k.startswith("past")), None)
            if past is not None and past.shape[2] > 1:
                for length in sorted({1, max(1, past.shape[2] // 2)}):
                    if length == past.shape[2]:
                        continue
                    probe = {k: (v[:, :, :length] if ".decoder." in k and k.startswith("past") else v)
                             for k, v in feeds.items()}
                    out.append((f"past length {length} (corpus: {past.shape[2]})", probe))
        return out

    def valid_masks(self, graph: GraphSpec, feeds: Mapping[str, np.ndarray],
                    outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | None]:
        enc_mask = feeds["encoder_attention_mask"].astype(bool) if "encoder_attention_mask" in feeds else None
        if graph.name == "encoder":
            return {"last_hidden_state": feeds["attention_mask"].astype(bool)}
        masks: dict[str, np.ndarray | None] = {}
        dec_mask: np.ndarray | None = None
        if graph.name == "decoder":
            ids = feeds["input_ids"]
            dec_mask = np.zeros(ids.shape, dtype=bool)
            lengths = _decoder_lengths(ids, feeds)
            for row, n in enumerate(lengths):
                dec_mask[row, :n] = True
        for name, value in outputs.items():
            if name == "logits":
                masks[name] = dec_mask
            elif ".encoder." in name and enc_mask is not None:
                masks[name] = np.broadcast_to(enc_mask[:, None, :], value.shape[:3]).copy()
            elif dec_mask is not None and value.shape[2] == dec_mask.shape[1]:
                masks[name] = np.broadcast_to(dec_mask[:, None, :], value.shape[:3]).copy()
            else:
                masks[name] = None
        return masks

    # -- detection, loading and generation (see Family) ---------------------------------------------------
    generates = True
    detection_priority = 10
    tasks = ("seq2seq_lm",)

    def generation_graphs(self, use_cache: bool) -> tuple[str, ...]:
        return ("encoder", "decoder", "decoder_with_past") if use_cache else ("encoder", "decoder")

    def starter(self, model: "LoadedModel", runners: Mapping[str, "GraphRunner"],
                start_token_id: int | None = None) -> "Starter":
        """Runs the encoder once per batch, then decodes from ``decoder_start_token_id``."""
        if start_token_id is None:
            cfg: Any = model.hf_config  # a transformers PretrainedConfig (no weights loaded for it)
            start_token_id = cfg.decoder_start_token_id
        if start_token_id is None:
            raise ValueError(f"{model.name}: no decoder_start_token_id in its config")
        return Seq2SeqModel(runners, int(start_token_id))

    # -- judging files built elsewhere (``harness check``) -------------------------------------
    #: the merged decoder's other-branch inputs: zeros its active branch never reads
    implicit_inputs = ("encoder_hidden_states", "past")
    _CHECK_GRAPHS = {"encoder": ("encoder",), "decoder": ("decoder",), "decoder_with_past": ("decoder_with_past",),
                     "merged": ("decoder", "decoder_with_past")}

    def artifact_role(self, named_role: str, input_names: Sequence[str]) -> str:
        """A single file's graph, from its inputs: a branch flag is optimum's merged decoder, a
        cache the cached step, encoder states the first step, otherwise the encoder."""
        if named_role != "model":
            return named_role
        names = {n.lower() for n in input_names}
        if any("use_cache_branch" in n for n in names):
            return "merged"
        if any("past" in n or "cache" in n for n in names):
            return "decoder_with_past"
        if any("encoder_hidden" in n or "memory" in n or "encoder_out" in n for n in names):
            return "decoder"
        return "encoder"

    def check_modes(self, role: str, takes_cache: bool) -> list[CheckMode]:
        """A merged decoder is judged twice: its uncached branch as ``decoder``, its cached one
        as ``decoder_with_past``."""
        graphs = self._CHECK_GRAPHS["encoder" if role == "model" else role]
        return [CheckMode(g, g, f"merged_{g}" if role == "merged" else g) for g in graphs]

    def decoding_runners(self, judged: Mapping[str, CheckedGraph]) -> tuple[dict[str, Any], bool, str]:
        if "encoder" not in judged or "decoder" not in judged:
            return {}, False, f"needs the encoder and decoder graphs; judged: {', '.join(sorted(judged)) or 'none'}"
        runners = {g: judged[g].runner for g in ("encoder", "decoder", "decoder_with_past") if g in judged}
        cached = "decoder_with_past" in judged and judged["decoder"].gives_cache and \
            judged["decoder_with_past"].gives_cache
        return runners, cached, ""


def _decoder_lengths(dec_ids: np.ndarray, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    """Real decoder lengths: the encoder lengths (decoder = <start> + source[:-1])."""
    mask = feeds.get("encoder_attention_mask")
    if mask is not None:
        lengths: np.ndarray = mask.sum(axis=1)
        return lengths
    return np.full(dec_ids.shape[0], dec_ids.shape[1])
