"""Whether the heavy libraries a harness process imports are compiled to bytecode.

Installers differ: pip compiles a package's modules when it installs them, uv does not unless
given ``--compile-bytecode``. Python writes the bytecode itself on first import -- unless
``PYTHONDONTWRITEBYTECODE`` is set (common in CI images and containers), and then every process
compiles torch and transformers from source again: about 8 s of a 21-s ``harness check`` on the
2-core machine this was measured on (docs/pitfalls.md #22). ``harness doctor`` says so, with the fix.
Nothing here imports the libraries it asks about: a package's spec names its files.
"""

from __future__ import annotations

import importlib.util
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

#: what every ``harness run`` / ``harness check`` process that computes a reference imports
HEAVY_PACKAGES = ("torch", "transformers", "onnxruntime", "onnx")


def uncompiled(packages: Sequence[str] = HEAVY_PACKAGES) -> list[str]:
    """The installed ``packages`` whose ``__init__`` has no bytecode for this interpreter."""
    missing = []
    for name in packages:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = spec.origin if spec is not None else None
        if not origin or not origin.endswith(".py"):
            continue
        if not Path(importlib.util.cache_from_source(origin)).exists():
            missing.append(name)
    return missing


def bytecode_line(packages: Sequence[str] = HEAVY_PACKAGES) -> str:
    """One line for ``harness doctor``: compiled, compiled on first use, or compiled every time."""
    missing = uncompiled(packages)
    if not missing:
        return "bytecode: compiled (" + ", ".join(p for p in packages if importlib.util.find_spec(p)) + ")"
    names = ", ".join(missing)
    if not sys.dont_write_bytecode:
        return f"bytecode: {names} not compiled yet; the first process that imports them writes it"
    site = sysconfig.get_paths()["purelib"]
    return (f"bytecode: {names} not compiled, and this interpreter writes none (PYTHONDONTWRITEBYTECODE): every "
            "harness process compiles them from source again (seconds each); install with pip or with "
            f"`uv pip install --compile-bytecode`, or run `{Path(sys.executable).name} -m compileall -q {site}` once")
