"""Strict JSON for records: non-finite floats as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.

Python's ``json`` writes bare ``NaN``/``Infinity`` tokens by default; they are not JSON, and
``JSON.parse``, ``jq``, Go's ``encoding/json`` and most other parsers reject the whole line. A metric
that blew up (an overflowed FP16 logit: ``max_abs = inf``) is exactly the record people need to read,
so it must not be the one that breaks their tools. We follow protobuf's canonical JSON mapping for
``double``: in a numeric field, the three strings above stand for the non-finite values. The writer
refuses anything else (``allow_nan=False``); the reader turns the strings back into floats in the
fields it knows to be numeric (``decode_numbers``), so a NaN metric reads back as NaN and still fails
its check.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

#: the canonical string of each non-finite float (protobuf JSON mapping)
NONFINITE: dict[str, float] = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def encode_float(value: float) -> float | str:
    """``value`` itself when finite, else its canonical string."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def decode_float(value: Any) -> Any:
    """The float a canonical non-finite string stands for; anything else unchanged."""
    if isinstance(value, str) and value in NONFINITE:
        return NONFINITE[value]
    return value


def to_jsonable(value: Any) -> Any:
    """``value`` as plain JSON types: numpy scalars and arrays unwrapped, paths and unknown objects
    as strings, tuples as lists, and every non-finite float as its canonical string."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return encode_float(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    item = getattr(value, "tolist", None)  # numpy scalars and arrays (numpy imported by whoever made them)
    if callable(item) and type(value).__module__ == "numpy":
        return to_jsonable(item())
    if isinstance(value, Path):
        return str(value)
    return str(value)


def decode_numbers(value: Any) -> Any:
    """``value`` with every canonical non-finite string (at any depth) turned back into a float.
    Only for sections that hold measurements: a sentence in ``data`` may well read "NaN"."""
    if isinstance(value, dict):
        return {k: decode_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_numbers(v) for v in value]
    return decode_float(value)


def dumps(value: Any, **kwargs: Any) -> str:
    """One strict JSON text (never a bare NaN/Infinity token; raises if one slipped through)."""
    return json.dumps(to_jsonable(value), allow_nan=False, **kwargs)
