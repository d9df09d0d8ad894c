"""Overriding an inferred protocol: a ``--io-protocol FILE`` (TOML) or ``[protocol]`` in a config,
and ``--map`` pairs, which are the protocol's ``names``.

A key the protocol does not know, or a value outside its choices, is a one-line
``UsageError`` naming the file and key (exit 2). Cache names are templates with ``{layer}``::

    mask_form = "additive"          # keep | additive | expanded | none
    logits = "last"                 # all | last
    padding = ["left"]              # the sides the graph accepts: left, right (empty: unpadded rows)
    positions = "explicit"          # explicit | implicit
    static_intended = true          # the baked shapes are deliberate: report, do not fail
    feeding = "rows"                # rows (one unpadded row per call) | batched
    [names]                         # reference = artifact (what --map says)
    input_ids = "tokens"
    [cache]
    key_input = "past_key_in{layer}"
    value_input = "past_value_in{layer}"
    key_output = "past_key{layer}"
    value_output = "past_value{layer}"
    layout = "split"                # split | stacked (key_input names both roles' tensor) | sequence_first
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import tomllib

from harness.check.protocol.model import Cache, CacheLayout, CacheSlot, Logits, MaskForm, Positions, Protocol
from harness.core import UsageError

_KEYS = frozenset({"mask", "mask_form", "logits", "logits_output", "padding", "positions", "static_intended",
                   "feeding", "names", "cache"})
_CACHE_KEYS = frozenset({"key_input", "value_input", "key_output", "value_output", "layout", "layers", "kv_heads"})
_SIDES = frozenset({"left", "right"})


def read_protocol_file(path: Path) -> dict[str, Any]:
    """The table of a ``--io-protocol`` file (its ``[protocol]`` table, or the whole file)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--io-protocol: {path}: no such file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"--io-protocol: {path}: not a readable TOML file ({exc})") from None
    table = data.get("protocol", data)
    if not isinstance(table, dict):
        raise UsageError(f"--io-protocol: {path}: [protocol] must be a table")
    return table


def apply(protocol: Protocol, table: Mapping[str, Any], origin: str) -> Protocol:
    """``protocol`` with ``table``'s values (``origin`` names the file in errors and sources)."""
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise UsageError(f"{origin}: unknown protocol key(s) {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}")
    sources = dict(protocol.sources)
    changed = protocol
    for key, value in table.items():
        changed = _set(changed, key, value, origin)
        sources[key] = origin
    return replace(changed, sources=tuple(sorted(sources.items())))


def with_names(protocol: Protocol, names: Mapping[str, str], origin: str) -> Protocol:
    """``--map`` pairs added to the protocol's names (they win over the file's)."""
    if not names:
        return protocol
    merged = {**dict(protocol.names), **names}
    sources = {**dict(protocol.sources), "names": origin}
    return replace(protocol, names=tuple(merged.items()), sources=tuple(sorted(sources.items())))


def _choice(value: Any, enum: type[MaskForm] | type[Logits] | type[Positions] | type[CacheLayout], origin: str,
            key: str) -> Any:
    choices = [m.value for m in enum]
    if value not in choices:
        raise UsageError(f"{origin}: {key} = {value!r}: choose one of {', '.join(choices)}")
    return enum(value)


def _set(protocol: Protocol, key: str, value: Any, origin: str) -> Protocol:
    if key == "mask_form":
        return replace(protocol, mask_form=_choice(value, MaskForm, origin, key))
    if key == "logits":
        return replace(protocol, logits=_choice(value, Logits, origin, key))
    if key == "positions":
        return replace(protocol, positions=_choice(value, Positions, origin, key))
    if key in ("mask", "logits_output"):
        if not isinstance(value, str):
            raise UsageError(f"{origin}: {key} must be a tensor name (a string)")
        return replace(protocol, mask=value) if key == "mask" else replace(protocol, logits_output=value)
    if key == "padding":
        if not isinstance(value, list) or not set(value) <= _SIDES:
            raise UsageError(f"{origin}: padding = {value!r}: a list of left / right (empty: unpadded rows)")
        rows = protocol.rows_because or ("" if value else f"unpadded, one row per call: {origin} accepts no padding")
        return replace(protocol, padding=tuple(value), rows_because=rows)
    if key == "static_intended":
        if not isinstance(value, bool):
            raise UsageError(f"{origin}: static_intended must be true or false")
        return replace(protocol, static_intended=value)
    if key == "feeding":
        if value not in ("rows", "batched"):
            raise UsageError(f"{origin}: feeding = {value!r}: choose rows or batched")
        return replace(protocol, rows_because=f"unpadded, one row per call: {origin} says so" if value == "rows" else "")
    if key == "names":
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise UsageError(f"{origin}: [names] must map reference names to artifact names (strings)")
        return replace(protocol, names=tuple({**dict(protocol.names), **value}.items()))
    return _cache(protocol, value, origin)


def _cache(protocol: Protocol, value: Any, origin: str) -> Protocol:
    if not isinstance(value, dict):
        raise UsageError(f"{origin}: [cache] must be a table")
    unknown = sorted(set(value) - _CACHE_KEYS)
    if unknown:
        raise UsageError(f"{origin}: unknown [cache] key(s) {', '.join(unknown)}; known: {', '.join(sorted(_CACHE_KEYS))}")
    layers = value.get("layers", protocol.cache.layers if protocol.cache else None)
    if not isinstance(layers, int) or layers < 1:
        raise UsageError(f"{origin}: [cache] layers: give the number of layers (the file's cache was not recognised)")
    layout = _choice(value.get("layout", "split"), CacheLayout, origin, "cache.layout")
    old = {(s.layer, s.role): s for s in (protocol.cache.slots if protocol.cache else ())}

    def name(template_key: str, layer: int, role: str, current: str | None) -> str | None:
        template = value.get(template_key)
        if template is None:
            return current
        if not isinstance(template, str) or "{layer}" not in template:
            raise UsageError(f"{origin}: [cache] {template_key} = {template!r}: a name template with {{layer}}")
        return template.format(layer=layer)

    slots = []
    for layer in range(layers):
        for role in ("key", "value"):
            prev = old.get((layer, role))
            src = "key" if layout is CacheLayout.STACKED else role
            slots.append(CacheSlot(layer, role, name(f"{src}_input", layer, role, prev.input if prev else None),
                                   name(f"{src}_output", layer, role, prev.output if prev else None)))
    heads = value.get("kv_heads", protocol.cache.kv_heads if protocol.cache else None)
    return replace(protocol, cache=Cache(tuple(slots), layout, heads))
