"""An artifact's I/O protocol: how a foreign ONNX file wants to be fed and what it returns.

Exporters disagree on everything around the weights: the mask can be a 2-D keep mask, a 4-D
additive float mask ``[B, 1, N, past + N]`` or a pre-expanded ``[B, T, T]`` one; logits can
cover every position or the last token only; the cache can be named ``present.N.key``,
``past_key{i}`` (as an *output*), ``present_N`` stacked ``[2, B, H, T, D]``; positions can be
an input or computed from the mask; a kernel (GroupQueryAttention on ONNX Runtime's CPU) can
refuse left padding. One frozen :class:`Protocol` says all of it, so matching, feeding and
comparison read the same facts instead of each guessing from names. It is inferred from the
graph (``harness.check.protocol.infer``) and overridden by a ``--io-protocol`` file or ``[protocol]``
in a config (``harness.check.protocol.overrides``); the record and the report show it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class MaskForm(str, Enum):
    """How the artifact takes the attention mask."""

    KEEP = "keep"  # [B, past + N], 1 = attend (the reference's form)
    ADDITIVE = "additive"  # float [B, 1, N, past + N] (or [B, N, past + N]): 0 = attend, very negative = masked
    EXPANDED = "expanded"  # [B, N, past + N] or [B, 1, N, past + N], bool or 0/1: 1 = attend, causal included
    NONE = "none"  # no mask input: the artifact sees only real tokens (one unpadded row per call)


class Logits(str, Enum):
    ALL = "all"  # [B, N, V]
    LAST = "last"  # [B, V]: the last position only


class CacheLayout(str, Enum):
    SPLIT = "split"  # one tensor per layer and role, [B, kv_heads, T, head_dim]
    STACKED = "stacked"  # one tensor per layer, [2, B, kv_heads, T, head_dim]: key at 0, value at 1
    SEQUENCE_FIRST = "sequence_first"  # one tensor per layer and role, [B, T, kv_heads, head_dim]


class Positions(str, Enum):
    EXPLICIT = "explicit"  # a position_ids input
    IMPLICIT = "implicit"  # computed inside the graph (from the mask, or 0..N-1)


@dataclass(frozen=True)
class CacheSlot:
    """One layer's key or value: the artifact's past input and present output for it. A
    stacked layout names the same tensor for both roles (``index`` 0 key, 1 value)."""

    layer: int
    role: str  # "key" | "value"
    input: str | None
    output: str | None

    @property
    def index(self) -> int:
        return 0 if self.role == "key" else 1

    def reference_names(self) -> tuple[str, str]:
        """The reference graph's (past input, present output) for this slot."""
        return f"past_key_values.{self.layer}.{self.role}", f"present.{self.layer}.{self.role}"


@dataclass(frozen=True)
class Cache:
    slots: tuple[CacheSlot, ...]
    layout: CacheLayout = CacheLayout.SPLIT
    kv_heads: int | None = None

    @property
    def layers(self) -> int:
        return len({s.layer for s in self.slots})

    def describe(self) -> str:
        first = self.slots[0] if self.slots else None
        naming = f"{first.input} -> {first.output}" if first else "none"
        heads = f", {self.kv_heads} KV heads" if self.kv_heads else ""
        return f"{self.layers} layer(s), {self.layout.value} ({naming} ...){heads}"


@dataclass(frozen=True)
class StaticDim:
    """A dimension the file bakes in: ``tensor`` axis ``axis`` is always ``size``."""

    tensor: str
    axis: int
    size: int


@dataclass(frozen=True)
class Protocol:
    """Everything about an artifact's I/O that is not its weights; see the module docstring.

    ``names`` pairs reference tensors with the file's by hand (``--map``: the same mechanism as
    the inferred cache slots). ``rows_because``, when set, says why the file is fed one
    unpadded row per call (GroupQueryAttention, a static batch of 1, no mask input);
    ``static_intended`` declares the baked shapes deliberate, so the shape-coverage check
    reports instead of failing. ``sources`` says, per field, where its value came from."""

    ids: str | None = None
    mask: str | None = None
    mask_form: MaskForm = MaskForm.KEEP
    padding: tuple[str, ...] = ("left", "right")
    logits: Logits = Logits.ALL
    logits_output: str | None = None
    cache: Cache | None = None
    positions: Positions = Positions.EXPLICIT
    static: tuple[StaticDim, ...] = ()
    static_intended: bool = False
    rows_because: str = ""
    names: tuple[tuple[str, str], ...] = ()
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def static_batch(self) -> int | None:
        return next((d.size for d in self.static if d.tensor == self.ids and d.axis == 0), None)

    @property
    def static_sequence(self) -> int | None:
        return next((d.size for d in self.static if d.tensor == self.ids and d.axis == 1), None)

    @property
    def one_token(self) -> bool:
        """A decoder step graph whose sequence length is fixed at 1: fed one token per call."""
        return self.static_sequence == 1 and self.cache is not None

    @property
    def adapts(self) -> bool:
        """Whether feeds or outputs are transformed between the reference's form and the file's."""
        stacked = self.cache is not None and self.cache.layout is not CacheLayout.SPLIT
        return (self.mask_form in (MaskForm.ADDITIVE, MaskForm.EXPANDED) or self.logits is Logits.LAST or stacked
                or bool(self.rows_because) or self.one_token)

    def describe(self) -> list[str]:
        """The lines the report prints under the file's name."""
        lines = [f"mask: {self.mask_form.value}" + (f" ({self.mask})" if self.mask else ""),
                 f"padding accepted: {', '.join(self.padding) or 'none (unpadded rows)'}",
                 f"logits: {self.logits.value} position(s)" + (f" ({self.logits_output})" if self.logits_output else ""),
                 f"cache: {self.cache.describe() if self.cache else 'none'}",
                 f"positions: {self.positions.value}"]
        if self.static:
            lines.append("static: " + ", ".join(f"{d.tensor}[{d.axis}]={d.size}" for d in self.static)
                         + (" (declared intended)" if self.static_intended else ""))
        if self.rows_because:
            lines.append(f"feeding: {self.rows_because}")
        if self.one_token:
            lines.append("steps: one token per call (the file's sequence length is fixed at 1)")
        if self.names:
            lines.append("names: " + ", ".join(f"{r}={a}" for r, a in self.names))
        return lines

    def as_dict(self) -> dict[str, Any]:
        """The record's ``protocol`` entry (plain JSON)."""
        cache = None
        if self.cache is not None:
            cache = {"layout": self.cache.layout.value, "kv_heads": self.cache.kv_heads, "layers": self.cache.layers,
                     "slots": [{"layer": s.layer, "role": s.role, "input": s.input, "output": s.output}
                               for s in self.cache.slots]}
        return {"ids": self.ids, "mask": self.mask, "mask_form": self.mask_form.value, "padding": list(self.padding),
                "logits": self.logits.value, "logits_output": self.logits_output, "cache": cache,
                "positions": self.positions.value,
                "static": [{"tensor": d.tensor, "axis": d.axis, "size": d.size} for d in self.static],
                "static_intended": self.static_intended, "feeding": self.rows_because or "batched, as given",
                "one_token_per_call": self.one_token,
                "names": dict(self.names), "sources": dict(self.sources)}
