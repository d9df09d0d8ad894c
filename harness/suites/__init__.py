"""The built-in gating suites, shipped inside the package.

``harness run`` collects this directory unless ``--suites`` names others (``--builtin-suites``
adds it back beside them); in a team's own repository ``pytest --harness-builtin-suites`` (or
``builtin_suites = true`` under ``[run]`` of ``harness.toml``) adds it to pytest's collection.
It is a package so its modules import as ``harness.suites.test_*``: a team's own
``test_logits_parity.py`` cannot collide with the built-in one of the same file name.
"""

from __future__ import annotations

from pathlib import Path


def suites_dir() -> Path:
    """Where the built-in suites are installed."""
    return Path(__file__).resolve().parent
