"""sentence-transformers pooling: how an encoder's token states become one sentence vector.

A sentence-transformers directory says how (``modules.json``, ``1_Pooling/config.json``):
:func:`sentence_pooling` reads that recipe from any such directory and :func:`pool` applies it to
``last_hidden_state``, so suites and ``harness check`` judge the embedding a search index stores,
next to the token-level errors. It lives with the families (``Family.sentence_pooling`` asks it),
below the zoo, whose ``minilm-l6`` is one such directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Pooling:
    """How token states become one sentence vector (sentence-transformers' Pooling + Normalize)."""

    mode: str  # "mean" | "cls" | "max"
    normalize: bool

    def describe(self) -> str:
        return f"{self.mode} pooling{' + L2 normalise' if self.normalize else ''}"


def sentence_pooling(path: Path) -> Pooling | None:
    """The pooling recipe of a sentence-transformers directory, or None for a plain HF model."""
    modules_file, config_file = Path(path) / "modules.json", Path(path) / "1_Pooling" / "config.json"
    if not config_file.is_file():
        return None
    try:
        cfg = json.loads(config_file.read_text(encoding="utf-8"))
        modules = json.loads(modules_file.read_text(encoding="utf-8")) if modules_file.is_file() else []
    except (OSError, json.JSONDecodeError):
        return None
    if cfg.get("pooling_mode_mean_tokens"):
        mode = "mean"
    elif cfg.get("pooling_mode_cls_token"):
        mode = "cls"
    elif cfg.get("pooling_mode_max_tokens"):
        mode = "max"
    else:
        return None  # mean_sqrt_len / weighted modes: not judged rather than judged wrongly
    normalize = any(str(m.get("type", "")).endswith(".Normalize") for m in modules if isinstance(m, dict))
    return Pooling(mode, normalize)


def pool(hidden: np.ndarray, mask: np.ndarray, pooling: Pooling) -> np.ndarray:
    """(batch, seq, dim) token states -> (batch, dim) sentence embeddings; padding excluded."""
    h = hidden.astype(np.float64)
    m = mask.astype(bool)
    if pooling.mode == "cls":
        out = h[:, 0]
    elif pooling.mode == "max":
        out = np.where(m[..., None], h, -np.inf).max(axis=1)
    else:
        weights = m[..., None].astype(np.float64)
        out = (h * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    if pooling.normalize:
        out = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
    return out
