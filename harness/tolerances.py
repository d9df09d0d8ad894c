"""Default numeric tolerances per precision, and how a model overrides them.

Chosen from measurements on the built-in zoo (docs/tolerances.md has the table): each
threshold sits well above the worst value a *correct* export showed and well below what a
broken one (no cross-attention mask, dropout left on, wrong dynamic axis) produces.
All gated metrics are scale-free, because random-weight models have tiny logits
(PITFALLS #7) and absolute errors alone would be meaningless across models.
"""

from __future__ import annotations

from typing import Mapping

from harness.config import HIGHER_IS_BETTER, Check, Precision, Tolerance

#: metric -> threshold, per precision. ``top1_agreement`` and ``kl`` apply to logits only.
DEFAULT_TOLERANCES: dict[Precision, dict[str, float]] = {
    Precision.FP32: {"norm_max_abs": 1e-4, "cosine": 0.99999, "top1_agreement": 1.0, "kl": 1e-6},
    Precision.FP16: {"norm_max_abs": 1e-2, "cosine": 0.9999, "top1_agreement": 0.98, "kl": 1e-3},
    Precision.INT8: {"norm_max_abs": 0.15, "cosine": 0.99, "top1_agreement": 0.90, "kl": 0.02},
}
LOGITS_ONLY = frozenset({"top1_agreement", "topk_agreement", "kl", "kl_max"})


def tolerance_for(precision: Precision, *, is_logits: bool,
                  overrides: Mapping[str, Mapping[str, float]] | None = None) -> Tolerance:
    """Checks for one output: defaults for ``precision`` merged with the model's overrides."""
    values = dict(DEFAULT_TOLERANCES[precision])
    if overrides:
        values.update(overrides.get(precision.value, {}))
    checks = tuple(
        Check(metric, float(threshold), metric in HIGHER_IS_BETTER)
        for metric, threshold in values.items()
        if is_logits or metric not in LOGITS_ONLY
    )
    return Tolerance(checks)
