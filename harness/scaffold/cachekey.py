"""The CI cache key of ``$HARNESS_CACHE``: the config and every model it names, hashed.

A key written into the workflow as ``hashFiles('harness.toml', 'models/first/**')`` covers the
models the workflow's author knew of: a model added later changes harness.toml's text but not
the hash of its weights, so a retrained second model would reuse stale exports. The workflow
asks ``harness cache key`` instead, which reads harness.toml the way ``harness run`` does and
hashes the file, the harness version and every file of every model directory and artifact it
names -- nothing to keep in sync by hand.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness import __version__
from harness.settings.config_file import load_config

#: hex digits of the key (64 bits: collisions between a repository's cache entries are not a concern)
KEY_DIGITS = 16


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []


def model_paths(config: Path) -> list[Path]:
    """Every model directory and artifact the config names, in the config's order."""
    suite = load_config(config)
    paths: list[Path] = []
    for entry in suite.entries.values():
        if entry.path is not None:
            paths.append(entry.path)
        paths.extend(entry.artifacts.values())
    return paths


def cache_key(config: Path) -> str:
    """A short hash of ``config``, the harness version, and the bytes of every model file it names."""
    digest = hashlib.sha256(f"model-harness {__version__}\n".encode())
    digest.update(config.read_bytes())
    root = config.resolve().parent
    for model in model_paths(config):
        for f in _files(model):
            name = f.resolve().relative_to(root).as_posix() if f.resolve().is_relative_to(root) else f.as_posix()
            digest.update(f"\n{name}\n".encode())
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()[:KEY_DIGITS]
