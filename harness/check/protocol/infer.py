"""Infer an artifact's :class:`~harness.check.protocol.model.Protocol` from the file itself.

What the graph declares decides: input and output names (by role, whatever the spelling:
``harness.check.io_match.role``), ranks, dtypes, static dimensions, the ops it uses
(GroupQueryAttention constrains padding and batching) and, beside it, onnxruntime-genai's
``genai_config.json``. A float mask of rank 3 or 4 is additive when the graph adds it to the
attention scores and a keep mask otherwise (``Where``/``Mul``/``Not`` consumers). Each field
records where its value came from (``Protocol.sources``), so the report says "inferred: rank
4 float, added to the scores" beside the value.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Mapping

from harness.check.io_match import canonical, role
from harness.check.layout import ArtifactFile, TensorInfo
from harness.check.protocol.model import Cache, CacheLayout, CacheSlot, Logits, MaskForm, Positions, Protocol, StaticDim

#: the kernel whose CPU implementation refuses left padding and batched multi-token steps with past
GQA = "GroupQueryAttention"
GQA_FEEDING = ("unpadded, one row per call: GroupQueryAttention (ONNX Runtime CPU) needs unpadded or right-padded "
               "prompts and batch 1 for multi-token steps with past")
_CACHE_WORDS = frozenset({"past", "present", "cache", "kv", "cached"})


def infer(art: ArtifactFile) -> Protocol:
    """The protocol of one file (a ``genai_config.json`` beside it names its I/O)."""
    ins, outs, used = list(art.inputs), list(art.outputs), art.ops
    sources: dict[str, str] = {}
    ids = _find(ins, "input_ids") or next((t.name for t in ins if t.kind == "int" and _rank(t) == 2), None)
    mask = _find(ins, "attention_mask") or next((t.name for t in ins if "mask" in t.name.lower()), None)
    form, why = _mask_form(next((t for t in ins if t.name == mask), None), dict(art.consumers))
    sources["mask_form"] = why
    cache = _cache(ins, outs)
    if cache is not None:
        sources["cache"] = "inferred from the cache-like inputs/outputs, paired by layer and role"
    logits_name = _find(outs, "logits") or next((t.name for t in outs if t.kind == "float"), None)
    logits_info = next((t for t in outs if t.name == logits_name), None)
    logits = Logits.LAST if cache is not None and logits_info is not None and _rank(logits_info) == 2 else Logits.ALL
    if logits is Logits.LAST:
        sources["logits"] = f"inferred: {logits_name} has rank 2 in a decoder with a cache (last token only)"
    positions = Positions.EXPLICIT if _find(ins, "position_ids") else Positions.IMPLICIT
    static = _static(next((t for t in ins if t.name == ids), None))
    padding: tuple[str, ...] = ("left", "right")
    rows = ""
    if GQA in used:
        padding, rows = ("right",), GQA_FEEDING
        sources["padding"] = f"inferred: the graph uses {GQA}"
    elif mask is None and ids is not None and cache is not None:
        padding, rows = (), "unpadded, one row per call: the graph takes no attention mask"
        sources["padding"] = "inferred: no attention mask input"
    protocol = Protocol(ids=ids, mask=mask, mask_form=form, padding=padding, logits=logits, logits_output=logits_name,
                        cache=cache, positions=positions, static=static, rows_because=rows)
    if protocol.static_batch == 1 and (protocol.static_sequence is None or protocol.one_token) and not rows:
        protocol = replace(protocol, rows_because="one row per call: the file's batch is fixed at 1")
    if art.path.is_file():  # a served model's description has no folder
        protocol = _genai(protocol, art.path.parent, sources)
    return replace(protocol, sources=tuple(sorted(sources.items())))


def follow_names(protocol: Protocol, art: ArtifactFile) -> Protocol:
    """The protocol after its ``names`` (``--map``, ``[names]``): a tensor named for the ids, the
    mask or the logits becomes that field, and a mask's form is inferred for the named tensor
    unless the form was given. ``--map attention_mask=bias`` on a 4-D float bias is one mechanism
    with the protocol: the file is fed the additive mask built for it, not refused for its rank."""
    names = dict(protocol.names)
    sources = dict(protocol.sources)
    ids = names.get("input_ids", protocol.ids)
    mask = names.get("attention_mask", protocol.mask)
    logits = names.get("logits", protocol.logits_output)
    form = protocol.mask_form
    said = sources.get("mask_form", "inferred")
    if mask is not None and said.startswith("inferred") and f" {mask} " not in f"{said} ":
        form, sources["mask_form"] = _mask_form(next((t for t in art.inputs if t.name == mask), None),
                                                dict(art.consumers))
    return replace(protocol, ids=ids, mask=mask, logits_output=logits, mask_form=form,
                   sources=tuple(sorted(sources.items())))


def _find(tensors: Iterable[TensorInfo], base: str) -> str | None:
    return next((t.name for t in tensors if t.name == base), None) or next(
        (t.name for t in tensors if canonical(t.name) == base), None)


def _rank(info: TensorInfo) -> int | None:
    return None if info.shape is None else len(info.shape)


def _mask_form(info: TensorInfo | None, consumers: Mapping[str, str]) -> tuple[MaskForm, str]:
    if info is None:
        return MaskForm.NONE, "inferred: no attention mask input"
    rank = _rank(info)
    if rank in (None, 2):
        return MaskForm.KEEP, f"inferred: {info.name} has rank 2"
    if info.kind != "float":
        return MaskForm.EXPANDED, f"inferred: {info.name} is {info.dtype} of rank {rank} (1 = attend)"
    consumer = consumers.get(info.name)
    if consumer in ("Where", "Mul", "Not", "Sub"):  # selected by, multiplied with, or 1 - mask: a keep mask
        return MaskForm.EXPANDED, f"inferred: {info.name} is float of rank {rank}, read by {consumer} (1 = attend)"
    return MaskForm.ADDITIVE, (f"inferred: {info.name} is float of rank {rank}"
                               + (f", read by {consumer}" if consumer else "") + " (added to the scores)")


def _static(ids: TensorInfo | None) -> tuple[StaticDim, ...]:
    if ids is None or ids.shape is None:
        return ()
    return tuple(StaticDim(ids.name, axis, size) for axis, size in enumerate(ids.shape[:2])
                 if isinstance(size, int) and size > 0)


def _slot_key(info: TensorInfo) -> tuple[int, str | None] | None:
    """(layer, role or None for a stacked key+value tensor) of a cache-like tensor."""
    r = role(info.name)
    if r.kv is not None and r.layer is not None:
        return (r.layer, r.kv) if r.side is None else None  # a seq2seq cache: the name-based matcher pairs it
    words = set(re.split(r"[^a-z0-9]+", re.sub(r"(?<=[a-z])(?=\d)", "_", info.name.lower())))
    digits = [w for w in words if w.isdigit()]
    if words & _CACHE_WORDS and len(digits) == 1 and _rank(info) in (None, 5):
        return int(digits[0]), None
    return None


def _cache(ins: list[TensorInfo], outs: list[TensorInfo]) -> Cache | None:
    """Cache slots by layer and role: an input is a past and an output a present whatever
    their names say (``past_key{i}`` as an output is a present)."""
    past = {k: t for t in ins if (k := _slot_key(t)) is not None}
    present = {k: t for t in outs if (k := _slot_key(t)) is not None}
    if not past and not present:
        return None
    stacked = any(k[1] is None for k in (*past, *present))
    layers = sorted({k[0] for k in (*past, *present)})
    slots = []
    for layer in layers:
        for kv in ("key", "value"):
            key = (layer, None) if stacked else (layer, kv)
            p, q = past.get(key), present.get(key)
            slots.append(CacheSlot(layer, kv, p.name if p else None, q.name if q else None))
    layout = CacheLayout.STACKED if stacked else CacheLayout.SPLIT
    heads: int | None = None
    for t in (*past.values(), *present.values()):
        dims = t.shape or ()
        at = 2 if stacked else 1
        size = dims[at] if len(dims) > at else None
        if isinstance(size, int):
            heads = size
            break
        if not stacked and len(dims) == 4 and isinstance(dims[2], int) and isinstance(dims[3], int):
            heads, layout = dims[2], CacheLayout.SEQUENCE_FIRST  # [B, T, H, D]: a named length before the heads
            break
    return Cache(tuple(slots), layout, heads)


def _genai(protocol: Protocol, folder: Path, sources: dict[str, str]) -> Protocol:
    """onnxruntime-genai's ``genai_config.json`` names the decoder's inputs and outputs."""
    path = folder / "genai_config.json"
    if not path.is_file():
        return protocol
    try:
        decoder = json.loads(path.read_text(encoding="utf-8"))["model"]["decoder"]
        names: Mapping[str, str] = {**decoder.get("inputs", {}), **decoder.get("outputs", {})}
    except (OSError, ValueError, KeyError, TypeError):
        return protocol
    sources["names"] = f"{path.name}: decoder inputs/outputs"
    return replace(protocol, ids=names.get("input_ids", protocol.ids), mask=names.get("attention_mask", protocol.mask),
                   logits_output=names.get("logits", protocol.logits_output),
                   positions=Positions.EXPLICIT if "position_ids" in names else Positions.IMPLICIT)
