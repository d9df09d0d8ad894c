"""An exception's text as error bundles compare it: normalised (``normalize``) and clipped for a
terminal line (``clip``). Shared by the two error kinds (``error.py``, ``error_decode.py``)."""

from __future__ import annotations

import re

#: where an exception text names a memory address, a file path or a C++ source location
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_SOURCE = re.compile(r"[\w./\\-]+\.(?:h|hpp|cc|cpp|c|cu|py):\d+")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.+@-]+)+\.[A-Za-z]\w*")  # a file: ONNX node names are paths too


def normalize(message: str) -> str:
    """An error message without what differs between machines for the same error: memory
    addresses, absolute paths (kept as their last component), source file:line locations."""
    text = _SOURCE.sub("<source>", message)
    text = _ADDRESS.sub("0x?", text)
    text = _PATH.sub(lambda m: re.split(r"[\\/]", m.group())[-1], text)
    return " ".join(text.split())


def clip(text: str, n: int = 300) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"
