"""The built-in gating suites, shipped inside the package.

``harness run`` collects this directory unless ``--suites`` names others (``--builtin-suites``
adds it back beside them); in a team's own repository ``pytest --harness-builtin-suites`` (or
``builtin_suites = true`` under ``[run]`` of ``harness.toml``) adds it to pytest's collection.
It is a package so its modules import as ``harness.suites.test_*``: a team's own
``test_logits_parity.py`` cannot collide with the built-in one of the same file name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Variant
    from harness.zoo.base import ModelSpec


def suites_dir() -> Path:
    """Where the built-in suites are installed."""
    return Path(__file__).resolve().parent


# -- the matrix filters of the suites that judge config-listed artifacts ([models.<name>.artifacts]) ----
def has_config_artifacts(spec: "ModelSpec") -> bool:
    """A model whose config lists pre-built ONNX files (``test_artifact_parity``, ``test_artifact_perf``)."""
    return bool(spec.extra.get("artifacts"))


def timed_backend(spec: "ModelSpec", variant: "Variant") -> bool:
    """The variant's backend is a deployment runtime whose speed means something (``Backend.timed``):
    the perf suites' filter (the ONNX reference judges numbers only)."""
    from harness.runners import backends

    backend = backends().get(variant.backend)
    return backend is None or backend.timed


def runs_config_artifact(spec: "ModelSpec", variant: "Variant") -> bool:
    """The variant's backend runs ONNX files and the config lists a file at its precision."""
    from harness.runners import backends
    from harness.runners.prebuilt import runs_onnx_files

    return runs_onnx_files(backends().get(variant.backend)) and timed_backend(spec, variant) and \
        variant.precision.value in (spec.extra.get("artifacts") or {})
