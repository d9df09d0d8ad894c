"""A file's protocol put to work in a check: resolved (inferred, then overridden), turned
into I/O pairs for the matcher, and the reference adapted where the file returns less
(last-token logits); plus the shape-coverage count of a file with baked shapes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from harness.check.layout import ArtifactFile
from harness.check.protocol.adapt import stacked_names
from harness.check.protocol.infer import follow_names, infer
from harness.check.protocol.model import CacheLayout, Logits, Protocol
from harness.check.protocol.overrides import apply, with_names
from harness.judge.numeric import Batch


def resolve_protocol(art: ArtifactFile, table: Mapping[str, Any] | None, origin: str,
                     maps: Mapping[str, str]) -> Protocol:
    """Inferred from the file, then the ``--io-protocol``/config table, then ``--map``."""
    protocol = infer(art)
    if table:
        protocol = apply(protocol, table, origin)
    return follow_names(with_names(protocol, maps, "--map"), art)


def protocol_pairs(protocol: Protocol) -> dict[str, tuple[str, str]]:
    """Reference tensor -> (the file's canonical tensor, how): each cache slot by layer and role."""
    pairs: dict[str, tuple[str, str]] = {}
    if protocol.cache is None:
        return pairs
    stacked = protocol.cache.layout is CacheLayout.STACKED
    for slot in protocol.cache.slots:
        past, present = slot.reference_names()
        how = f"protocol: layer {slot.layer} {slot.role}"
        for ref, name in ((past, slot.input), (present, slot.output)):
            if name:
                pairs[ref] = (stacked_names(name)[slot.index] if stacked else name, how)
    return pairs


def last_token_reference(batches: Sequence[Batch], logits: str) -> list[Batch]:
    """The reference's logits (and their valid mask) at the last position only, for a file
    that returns the last token's logits: the left-padded batch's last column is always real."""
    out: list[Batch] = []
    for feeds, ref, masks in batches:
        cut = {**ref, logits: ref[logits][:, -1:]} if logits in ref and ref[logits].ndim == 3 else dict(ref)
        mask = masks.get(logits)
        out.append((feeds, cut, {**masks, logits: mask[:, -1:] if mask is not None and mask.ndim == 2 else mask}))
    return out


def cut_sentences(masks: Sequence[np.ndarray], length: int) -> tuple[int, int]:
    """(sentences longer than ``length`` tokens, sentences) over the corpus batches' masks."""
    lengths = np.concatenate([m.sum(axis=1) for m in masks]) if masks else np.zeros(0)
    return int((lengths > length).sum()), int(lengths.size)


def wants_last_logits(protocol: Protocol, reference_rank: int | None, file_rank: int | None) -> Protocol:
    """A file whose logits have one axis fewer than the reference's returns the last token's."""
    if protocol.logits is Logits.ALL and reference_rank == 3 and file_rank == 2:
        sources = {**dict(protocol.sources),
                   "logits": "inferred: rank 2 against the reference's rank 3 (last token only)"}
        return replace(protocol, logits=Logits.LAST, sources=tuple(sorted(sources.items())))
    return protocol
