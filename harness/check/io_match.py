"""Match a foreign artifact's inputs and outputs to the reference graph's, by name and shape.

Other pipelines name things their own way (``ids``/``mask``, ``past.0.key``, ``output``,
torch's ``input.1``). Matching goes in stages, each recorded in the account printed to the
user: ``--map`` given by the user, exact name, the same *role* (``ids`` is ``input_ids``,
``past_key_values_3_value`` is ``past_key_values.3.value``), and finally shape: a lone
remaining tensor of the same kind and rank. Every stage checks kind (int/float/bool) and
rank, so a name match with the wrong shape is an error, not a silent comparison of
unrelated tensors. Artifact inputs the reference does not have are synthesized only when
their value is known (``token_type_ids`` zeros, ``use_cache_branch``); anything else is a
clear error that suggests ``--map``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harness.check.layout import TensorInfo
from harness.core import UsageError

#: role -> names other pipelines use for it (compared after lower-casing and joining with "_")
ALIASES: dict[str, frozenset[str]] = {
    "input_ids": frozenset({"input_ids", "ids", "input", "inputs", "tokens", "token_ids", "input_tokens", "src",
                            "src_tokens", "source_ids", "decoder_input_ids", "x"}),
    "attention_mask": frozenset({"attention_mask", "mask", "attn_mask", "input_mask", "padding_mask", "src_mask"}),
    "token_type_ids": frozenset({"token_type_ids", "segment_ids", "token_types", "type_ids"}),
    "position_ids": frozenset({"position_ids", "positions", "pos_ids", "position"}),
    "encoder_hidden_states": frozenset({"encoder_hidden_states", "encoder_outputs", "encoder_output", "memory",
                                        "enc_out", "encoder_states", "enc_hidden_states"}),
    "encoder_attention_mask": frozenset({"encoder_attention_mask", "enc_mask", "memory_mask", "encoder_mask",
                                         "memory_key_padding_mask", "cross_attention_mask"}),
    "use_cache_branch": frozenset({"use_cache_branch"}),
    "last_hidden_state": frozenset({"last_hidden_state", "hidden_states", "hidden", "hidden_state", "embeddings",
                                    "token_embeddings", "encoder_hidden_states", "output", "outputs", "y"}),
    "logits": frozenset({"logits", "scores", "lm_logits", "output", "outputs", "y", "prediction_scores"}),
}
#: in a decoder, an artifact's plain "attention_mask" is the encoder's mask (an older naming)
CONTEXT_ALIASES = {"encoder_attention_mask": frozenset({"attention_mask", "mask"})}
#: words that say which side of a step a cache tensor is on ("cache" alone says neither)
_PAST = frozenset({"past", "pkv", "cached", "prev", "previous", "in"})
_PRESENT = frozenset({"present", "new", "out", "updated", "next"})


@dataclass(frozen=True)
class Role:
    """What a tensor *is*, independent of spelling: a base name, or a KV-cache slot."""

    base: str | None
    kv: str | None = None  # "key" | "value"
    layer: int | None = None
    side: str | None = None  # "decoder" (self-attention) | "encoder" (cross-attention)
    cache: str | None = None  # "past" | "present"


def _words(name: str) -> list[str]:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    text = re.sub(r"(?<=[a-z])(?=\d)|(?<=\d)(?=[a-z])", "_", text)
    for phrase, short in (("past_key_values", "past"), ("present_key_values", "present"), ("key_values", "kv")):
        text = text.replace(phrase, short)
    return [w for w in re.split(r"[^a-z0-9]+", text) if w]


def canonical(name: str) -> str | None:
    """The role name other pipelines' ``name`` stands for (``ids`` -> ``input_ids``), if known."""
    joined = "_".join(w for w in _words(name) if not w.isdigit())
    return next((base for base, names in ALIASES.items() if joined in names), None)


def role(name: str) -> Role:
    words = _words(name)
    digits = [int(w) for w in words if w.isdigit()]
    letters = [w for w in words if not w.isdigit()]
    kv = None
    for word in letters:
        if word in ("key", "k"):
            kv = "key"
        elif word in ("value", "v", "val", "values"):
            kv = "value"
    if kv and digits:
        side = ("encoder" if {"encoder", "cross"} & set(letters)
                else "decoder" if {"decoder", "self"} & set(letters) else None)
        cache = "present" if _PRESENT & set(letters) else "past" if _PAST & set(letters) else None
        return Role(None, kv, digits[0], side, cache)
    return Role("_".join(letters) or None)


@dataclass(frozen=True)
class Pair:
    """One line of the account: which reference tensor met which artifact tensor, and how."""

    reference: str | None
    artifact: str | None
    how: str
    detail: str = ""


@dataclass
class IOMatch:
    inputs: list[Pair] = field(default_factory=list)
    outputs: list[Pair] = field(default_factory=list)

    @property
    def input_map(self) -> dict[str, str]:
        return {p.reference: p.artifact for p in self.inputs if p.reference and p.artifact and p.how != "synthesized"}

    @property
    def synthesized(self) -> dict[str, str]:
        """artifact input -> what it is (a role name) for inputs the harness fills in."""
        return {p.artifact: p.detail.split(":", 1)[0] for p in self.inputs if p.how == "synthesized" and p.artifact}

    @property
    def output_map(self) -> dict[str, str]:
        return {p.reference: p.artifact for p in self.outputs if p.reference and p.artifact}

    def account(self) -> list[dict[str, Any]]:
        return [{"side": side, "reference": p.reference, "artifact": p.artifact, "how": p.how, "detail": p.detail}
                for side, pairs in (("input", self.inputs), ("output", self.outputs)) for p in pairs]


def reference_info(arrays: Mapping[str, np.ndarray]) -> dict[str, TensorInfo]:
    """Reference tensors described from one batch of real feeds or outputs."""
    out = {}
    for name, value in arrays.items():
        dtype = "bool" if value.dtype == np.bool_ else str(value.dtype)
        out[name] = TensorInfo(name, dtype, tuple(int(d) for d in value.shape))
    return out


def match_io(label: str, ref_inputs: Mapping[str, TensorInfo], ref_outputs: Mapping[str, TensorInfo],
             art_inputs: Sequence[TensorInfo], art_outputs: Sequence[TensorInfo], *,
             synthesizable: Mapping[str, str], gated_outputs: frozenset[str] | None,
             user_map: Mapping[str, str] | None = None,
             protocol_pairs: Mapping[str, tuple[str, str]] | None = None) -> IOMatch:
    """Pair reference and artifact tensors; raise ``UsageError`` when they cannot be paired.

    ``synthesizable`` maps roles the harness can fill in (``token_type_ids``...) to a short
    description; ``gated_outputs`` (None: all) are the reference outputs that must be found.
    ``protocol_pairs`` (reference -> (artifact, how)) are the artifact protocol's own pairs
    (its cache slots by layer and role): taken first, where both tensors exist. An artifact
    output left without a reference counterpart is listed; a cache-like one is an error.
    """
    user_map = dict(user_map or {})
    ins = _Matcher(label, "input", ref_inputs, {t.name: t for t in art_inputs}, user_map, protocol_pairs)
    ins.run()
    match = IOMatch()
    for ref in ref_inputs:
        paired = ins.pairs.get(ref)
        if paired:
            match.inputs.append(Pair(ref, paired[0], paired[1], _shapes(ref_inputs[ref], ins.theirs[paired[0]])))
    for name, info in ins.theirs.items():
        if name in {a for a, _ in ins.pairs.values()}:
            continue
        r = role(name)
        what = canonical(name) if canonical(name) in synthesizable else (
            "past" if r.kv is not None and r.cache == "past" and "past" in synthesizable else None)
        if what is None:
            raise UsageError(
                f"{label}: artifact input {name!r} {info.describe()} has no counterpart in the reference "
                f"(reference inputs: {', '.join(ref_inputs)}); map it with --map REFERENCE={name}")
        match.inputs.append(Pair(None, name, "synthesized", f"{what}: {synthesizable[what]}"))
    for ref in ref_inputs:
        if ref not in ins.pairs:
            match.inputs.append(Pair(ref, None, "not an input of the artifact",
                                     "the artifact computes without it"))
    if not ins.pairs:
        raise UsageError(f"{label}: none of the artifact's inputs ({', '.join(ins.theirs)}) match the reference "
                         f"inputs ({', '.join(ref_inputs)}); use --map REFERENCE=ARTIFACT")
    main = next(iter(ref_inputs))
    if main not in ins.pairs:
        raise UsageError(f"{label}: no artifact input matches the reference {main!r} "
                         f"{ref_inputs[main].describe()}; artifact inputs: "
                         f"{', '.join(t.name + ' ' + t.describe() for t in art_inputs)}; use --map {main}=NAME")

    outs = _Matcher(label, "output", ref_outputs, {t.name: t for t in art_outputs}, user_map, protocol_pairs)
    outs.run()
    for ref in ref_outputs:
        if ref in outs.pairs:
            art, how = outs.pairs[ref]
            match.outputs.append(Pair(ref, art, how, _shapes(ref_outputs[ref], outs.theirs[art])))
        elif gated_outputs is None or ref in gated_outputs:
            raise UsageError(
                f"{label}: no artifact output matches the reference output {ref!r} {ref_outputs[ref].describe()}; "
                f"artifact outputs: {', '.join(t.name + ' ' + t.describe() for t in art_outputs)}; "
                f"use --map {ref}=NAME")
        else:
            match.outputs.append(Pair(ref, None, "not produced by the artifact", "not compared"))
    used = {a for a, _ in outs.pairs.values()}
    _refuse_unpaired_cache(label, [n for n in outs.theirs if n not in used], ref_outputs)
    for name, info in outs.theirs.items():
        if name not in used:
            match.outputs.append(Pair(None, name, "ignored", f"no reference counterpart {info.describe()}"))
    return match


def _refuse_unpaired_cache(label: str, unpaired: Sequence[str], ref_outputs: Mapping[str, TensorInfo]) -> None:
    """A cache-like output left unpaired would pass unseen (and decoding would run uncached); one
    of a cache the reference graph does not return (a merged decoder's cross-attention passthrough)
    is only listed."""
    sides = {role(n).side for n in ref_outputs if _cache_like(n)}
    cache = [n for n in unpaired if _cache_like(n) and (role(n).side in sides or n.endswith(("[key]", "[value]")))]
    if cache:
        raise UsageError(
            f"{label}: cache output(s) {', '.join(cache[:4])}{' ...' if len(cache) > 4 else ''} pair with no "
            f"reference cache tensor (reference: {', '.join(n for n in ref_outputs if _cache_like(n))}); a cache "
            "that is not compared would pass unseen: describe it in an --io-protocol file ([cache]) or pair it with --map")


def _cache_like(name: str) -> bool:
    r = role(name)
    return r.kv is not None and r.layer is not None or name.endswith(("[key]", "[value]"))


class _Matcher:
    """Stage-by-stage pairing of one side (inputs or outputs)."""

    def __init__(self, label: str, side: str, ours: Mapping[str, TensorInfo], theirs: Mapping[str, TensorInfo],
                 user_map: Mapping[str, str], protocol_pairs: Mapping[str, tuple[str, str]] | None = None) -> None:
        self.label, self.side, self.ours, self.theirs, self.user_map = label, side, ours, theirs, user_map
        self.protocol_pairs = dict(protocol_pairs or {})
        self.pairs: dict[str, tuple[str, str]] = {}

    def free_theirs(self) -> list[str]:
        used = {a for a, _ in self.pairs.values()}
        return [n for n in self.theirs if n not in used]

    def take(self, ref: str, art: str, how: str) -> None:
        problem = _incompatible(self.ours[ref], self.theirs[art])
        if problem:
            raise UsageError(f"{self.label}: {self.side} {art!r} {self.theirs[art].describe()} matches the reference "
                             f"{ref!r} {self.ours[ref].describe()} by {how}, but {problem}")
        self.pairs[ref] = (art, how)

    def run(self) -> None:
        for ref, art in self.user_map.items():
            if ref in self.ours:
                if art not in self.theirs:
                    raise UsageError(f"{self.label}: --map {ref}={art}: the artifact has no {self.side} {art!r}; "
                                     f"its {self.side}s: {', '.join(self.theirs)}")
                self.take(ref, art, "--map")
        for ref, (art, how) in self.protocol_pairs.items():
            if ref in self.ours and ref not in self.pairs and art in self.free_theirs():
                self.take(ref, art, how)
        for ref in self.ours:
            if ref not in self.pairs and ref in self.free_theirs():
                self.take(ref, ref, "name")
        self._by_role(lambda r, a: _words(r) == _words(a), "normalized name")
        self._by_role(lambda r, a: canonical(a) == r, "alias")
        self._by_role(lambda r, a: role(r).kv is not None and role(r) == role(a), "cache slot")
        self._by_role(lambda r, a: role(r).kv is not None and _kv_loose(role(r), role(a)), "cache slot")
        if self.side == "input":  # a decoder's plain "attention_mask" is the encoder's mask
            self._by_role(lambda r, a: role(a).base in CONTEXT_ALIASES.get(r, frozenset())
                          and role(a).base not in self.ours, "alias")
        self._by_shape()

    def _by_role(self, same: Callable[[str, str], bool], how: str) -> None:
        for ref in self.ours:
            if ref in self.pairs:
                continue
            hits = [a for a in self.free_theirs() if same(ref, a) and not _incompatible(self.ours[ref], self.theirs[a])]
            if len(hits) == 1:
                # unambiguous the other way round too: no other free reference claims it
                rivals = [r for r in self.ours if r not in self.pairs and r != ref and same(r, hits[0])]
                if not rivals:
                    self.take(ref, hits[0], how)

    def _by_shape(self) -> None:
        progress = True
        while progress:
            progress = False
            free_ours = [r for r in self.ours if r not in self.pairs]
            for ref in free_ours:
                fits = [a for a in self.free_theirs()
                        if not _incompatible(self.ours[ref], self.theirs[a]) and _unnamed_for(a, free_ours)]
                claims = [r for r in free_ours if fits and not _incompatible(self.ours[r], self.theirs[fits[0]])]
                if len(fits) == 1 and claims == [ref]:
                    self.take(ref, fits[0], "shape")
                    progress = True
                    break


def _unnamed_for(art: str, free_refs: Sequence[str]) -> bool:
    """Shape matching must not steal a tensor whose name clearly says it is something else
    (``token_type_ids`` is never the attention mask, whatever its shape)."""
    if role(art).kv is not None:
        return False
    known = canonical(art)
    return known is None or known in free_refs or known in ("last_hidden_state", "logits")


def _kv_loose(ref: Role, art: Role) -> bool:
    """A cache slot whose name omits what the position makes unambiguous (no side in a
    decoder-only model; no past/present word on an input/output)."""
    return (art.kv == ref.kv and art.layer == ref.layer and (art.side in (None, ref.side))
            and (art.cache in (None, ref.cache)))


def _incompatible(ours: TensorInfo, theirs: TensorInfo) -> str:
    if ours.kind != theirs.kind and not {ours.kind, theirs.kind} <= {"int", "bool"}:
        return f"it is {theirs.kind}, not {ours.kind}"
    if theirs.shape is not None and ours.shape is not None and len(theirs.shape) != len(ours.shape):
        return f"its rank is {len(theirs.shape)}, not {len(ours.shape)}"
    return ""


def _shapes(ours: TensorInfo, theirs: TensorInfo) -> str:
    return f"{theirs.describe()} ~ reference {ours.describe()}"
