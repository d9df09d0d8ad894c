"""Feed an artifact in its own protocol while everything else speaks the reference's.

The reference side (PyTorch, the parity code, the decoding loops) works with a 2-D keep mask,
left-padded batches, logits at every position and one ``[B, H, T, D]`` tensor per layer and
role. :func:`canonical_inputs`/:func:`canonical_outputs` describe a file in that form (so the
I/O matcher checks kind and rank against what the file will *receive*), and
:class:`ProtocolRunner` converts on every call: it builds the 4-D additive or pre-expanded
mask from the 2-D one (causal part included), stacks and splits ``[2, B, H, T, D]`` caches,
gives last-token logits a length-1 position axis, and -- where the graph needs it -- feeds
one unpadded row per call and puts each row's outputs back at its padded positions (pad
positions stay zero; every comparison masks them out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from harness.check.layout import TensorInfo
from harness.check.protocol.model import CacheLayout, Logits, MaskForm, Protocol
from harness.runners.base import GraphRunner, TimedCall

_STACK_SUFFIX = ("[key]", "[value]")
#: the keep mask a file without a mask input is given by the reference: read to unpad rows, never fed
VIRTUAL_MASK = "attention_mask"


def stacked_names(name: str) -> tuple[str, str]:
    """The two canonical tensors a stacked ``[2, B, H, T, D]`` cache tensor stands for."""
    return name + _STACK_SUFFIX[0], name + _STACK_SUFFIX[1]


def _stacked(protocol: Protocol) -> bool:
    return protocol.cache is not None and protocol.cache.layout is CacheLayout.STACKED


def _sequence_first(protocol: Protocol) -> bool:
    return protocol.cache is not None and protocol.cache.layout is CacheLayout.SEQUENCE_FIRST


def _heads_first(info: TensorInfo) -> TensorInfo:
    """A ``[B, T, H, D]`` cache tensor described as the reference's ``[B, H, T, D]``."""
    assert info.shape is not None
    b, t, h, d = info.shape
    return TensorInfo(info.name, info.dtype, (b, h, t, d))


def canonical_inputs(protocol: Protocol, inputs: Sequence[TensorInfo]) -> list[TensorInfo]:
    out = []
    if protocol.mask is None and protocol.rows_because and all(t.name != VIRTUAL_MASK for t in inputs):
        out.append(TensorInfo(VIRTUAL_MASK, "int64", ("batch", "past_sequence + sequence")))
    for info in inputs:
        if info.name == protocol.mask and protocol.mask_form in (MaskForm.ADDITIVE, MaskForm.EXPANDED):
            batch = info.shape[0] if info.shape else "batch"
            out.append(TensorInfo(info.name, "int64", (batch, "past_sequence + sequence")))
        else:
            out += _cache_view(protocol, info)
    return out


def canonical_outputs(protocol: Protocol, outputs: Sequence[TensorInfo]) -> list[TensorInfo]:
    out = []
    for info in outputs:
        if info.name == protocol.logits_output and protocol.logits is Logits.LAST and info.shape is not None:
            out.append(TensorInfo(info.name, info.dtype, (info.shape[0], 1, *info.shape[1:])))
        else:
            out += _cache_view(protocol, info)
    return out


def _cache_view(protocol: Protocol, info: TensorInfo) -> list[TensorInfo]:
    """A tensor as the reference sees it: a stacked cache tensor as its key and value, a
    sequence-first one heads first, anything else as it is."""
    if info.shape is None or not _is_cache(protocol, info.name):
        return [info]
    if _stacked(protocol) and len(info.shape) == 5:
        return [TensorInfo(n, info.dtype, info.shape[1:]) for n in stacked_names(info.name)]
    if _sequence_first(protocol) and len(info.shape) == 4:
        return [_heads_first(info)]
    return [info]


def _is_cache(protocol: Protocol, name: str) -> bool:
    return protocol.cache is not None and any(name in (s.input, s.output) for s in protocol.cache.slots)


def mask_for(protocol: Protocol, keep: np.ndarray, new: int, info: TensorInfo | None) -> np.ndarray:
    """The file's mask from the reference's 2-D keep mask ``[B, past + new]`` for ``new`` tokens:
    causal and padding in one ``[B, (1,) new, past + new]`` tensor."""
    total = keep.shape[1]
    past = total - new
    causal = np.arange(total)[None, :] <= (past + np.arange(new))[:, None]  # [new, total]
    allowed = causal[None] & keep.astype(bool)[:, None, :]
    allowed[:, np.arange(new), past + np.arange(new)] = True  # a pad query row still attends to itself (no NaN)
    rank = len(info.shape) if info is not None and info.shape is not None else 4
    if rank == 4:
        allowed = allowed[:, None]
    dtype = np.dtype(info.dtype) if info is not None and info.dtype not in ("bfloat16", "unknown") else np.float32
    if protocol.mask_form is MaskForm.ADDITIVE:
        additive: np.ndarray = np.where(allowed, 0.0, np.finfo(dtype).min).astype(dtype)
        return additive
    expanded: np.ndarray = allowed.astype(dtype)
    return expanded


class ProtocolRunner(GraphRunner):
    """A file's session seen in the reference's form (canonical names: the file's own, stacked
    caches split into ``name[key]``/``name[value]``)."""

    def __init__(self, session: GraphRunner, protocol: Protocol, inputs: Sequence[TensorInfo],
                 outputs: Sequence[TensorInfo]) -> None:
        self.session, self.protocol = session, protocol
        self.infos = {t.name: t for t in inputs}
        self.input_names = [t.name for t in canonical_inputs(protocol, inputs)]
        self.output_names = [t.name for t in canonical_outputs(protocol, outputs)]
        self.path = session.path
        self.mask_name = protocol.mask or VIRTUAL_MASK
        self.calls = 0  # calls into the file (a row-wise batch makes one per row)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self._run(dict(feeds))

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.protocol.rows_because and self.protocol.ids in feeds:
            return self._by_rows(feeds)
        return self._once(feeds)

    def timed_call(self, feeds: Mapping[str, np.ndarray]) -> TimedCall:
        if self.protocol.rows_because:
            return lambda: self.run(feeds)
        prepared = self._file_feeds(dict(feeds))
        return self.session.timed_call(prepared)

    def close(self) -> None:
        """The session belongs to the artifact source."""

    def file_view(self) -> None:
        """The file does not take the feeds this runner takes: nothing portable to re-run as is."""
        return None

    # -- one call --------------------------------------------------------------------------------------
    def _file_feeds(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self.protocol
        theirs = dict(feeds)
        if p.mask is None:
            theirs.pop(VIRTUAL_MASK, None)
        if p.mask in theirs and p.mask_form in (MaskForm.ADDITIVE, MaskForm.EXPANDED) and p.ids in theirs:
            theirs[p.mask] = mask_for(p, theirs[p.mask], theirs[p.ids].shape[1], self.infos.get(p.mask))
        if _stacked(p):
            for name in self.infos:
                key, value = stacked_names(name)
                if key in theirs and value in theirs:
                    theirs[name] = np.stack([theirs.pop(key), theirs.pop(value)])
        if _sequence_first(p):
            for name in theirs:
                if _is_cache(p, name) and theirs[name].ndim == 4:
                    theirs[name] = np.ascontiguousarray(theirs[name].transpose(0, 2, 1, 3))
        return theirs

    def _once(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self.protocol
        if p.one_token and p.ids in feeds and feeds[p.ids].shape[1] > 1:
            return self._by_tokens(feeds)
        return self._call(feeds)

    def _by_tokens(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A file that takes one token per call (its sequence length is fixed at 1): the tokens
        in turn, each call fed the presents the previous one returned; logits of every token."""
        p = self.protocol
        assert p.ids is not None and p.cache is not None
        ids = feeds[p.ids]
        new = ids.shape[1]
        mask = feeds.get(self.mask_name)
        carried = dict(feeds)
        logits: list[np.ndarray] = []
        out: dict[str, np.ndarray] = {}
        for t in range(new):
            step = {name: value[:, t: t + 1] if value.ndim == 2 and value.shape == ids.shape else value
                    for name, value in carried.items()}
            if mask is not None:
                step[self.mask_name] = mask[:, : mask.shape[1] - new + t + 1]
            out = self._call(step)
            if p.logits_output in out:
                logits.append(out[p.logits_output])
            for present, past in _present_to_past(p):
                if present in out:
                    carried[past] = out[present]
        if p.logits is Logits.ALL and logits:
            out[p.logits_output or ""] = np.concatenate(logits, axis=1)
        return out

    def _call(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.calls += 1
        out = self.session.run(self._file_feeds(feeds))
        p = self.protocol
        if p.logits is Logits.LAST and p.logits_output in out and out[p.logits_output].ndim == 2:
            out[p.logits_output] = out[p.logits_output][:, None]
        if _sequence_first(p):
            for name in out:
                if _is_cache(p, name) and out[name].ndim == 4:
                    out[name] = out[name].transpose(0, 2, 1, 3)
        if _stacked(p):
            for name in list(out):
                if out[name].ndim == 5 and _is_cache(p, name):
                    stacked = out.pop(name)
                    key, value = stacked_names(name)
                    out[key], out[value] = stacked[0], stacked[1]
        return out

    # -- one unpadded row per call -------------------------------------------------------------------------
    def _by_rows(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self.protocol
        ids = feeds[p.ids] if p.ids else None
        assert ids is not None
        new = ids.shape[1]
        keep = (feeds[self.mask_name].astype(bool) if self.mask_name in feeds
                else np.ones((ids.shape[0], new), bool))
        past = keep.shape[1] - new
        rows = [self._row(feeds, r, keep[r], past, new) for r in range(ids.shape[0])]
        return {name: np.concatenate([row[name] for row in rows]) for name in rows[0]}

    def _row(self, feeds: dict[str, np.ndarray], r: int, keep: np.ndarray, past: int,
             new: int) -> dict[str, np.ndarray]:
        """Row ``r`` without its pad positions; outputs scattered back to the padded layout."""
        p = self.protocol
        kept_new = keep[past:] if keep[past:].any() else np.ones(new, bool)
        cols = np.concatenate([keep[:past], kept_new])
        batch = feeds[p.ids or ""].shape[0]
        row: dict[str, np.ndarray] = {}
        for name, value in feeds.items():
            if name == self.mask_name:
                row[name] = np.ones((1, int(cols.sum())), value.dtype)
            elif value.ndim == 2 and value.shape == (batch, new):  # ids, positions, token types
                row[name] = value[r: r + 1, kept_new]
            elif self._is_cache_input(name) and value.ndim == 4:
                row[name] = value[r: r + 1, :, keep[:past]]
            elif value.ndim >= 1 and value.shape[0] == batch:
                row[name] = value[r: r + 1]
            else:
                row[name] = value
        out = self._once(row)
        return {name: value if name == p.logits_output and p.logits is Logits.LAST
                else _scatter(value, kept_new, cols) for name, value in out.items()}

    def _is_cache_input(self, name: str) -> bool:
        for suffix in _STACK_SUFFIX:
            name = name.removesuffix(suffix)
        return _is_cache(self.protocol, name)


def _present_to_past(protocol: Protocol) -> list[tuple[str, str]]:
    """(canonical present, canonical past) of every cache slot: what one call hands the next."""
    assert protocol.cache is not None
    stacked = _stacked(protocol)
    return [(stacked_names(s.output)[s.index] if stacked else s.output,
             stacked_names(s.input)[s.index] if stacked else s.input)
            for s in protocol.cache.slots if s.input and s.output]


def _scatter(value: np.ndarray, kept_new: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """A one-row output back at its padded positions: ``[1, n, ...]`` over the new tokens
    (logits) or ``[1, H, T, D]`` over every kept position (presents); anything else as is."""
    if value.ndim == 3 and value.shape[1] == int(kept_new.sum()):
        full = np.zeros((1, kept_new.size, *value.shape[2:]), value.dtype)
        full[:, kept_new] = value
        return full
    if value.ndim == 4 and value.shape[2] == int(cols.sum()):
        full = np.zeros((1, value.shape[1], cols.size, value.shape[3]), value.dtype)
        full[:, :, cols] = value
        return full
    return value
