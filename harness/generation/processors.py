"""Score processors applied before each token choice, written to match ``generate()``.

Same order and arithmetic as transformers' processors (repetition penalty, forced EOS,
suppressed tokens), on float32 torch tensors, so that a loop over any runner makes the
same choice ``generate()`` makes from the same logits. Greedy applies them to raw
logits, beam search to log-probabilities, again as ``generate()`` does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.generation.settings import GenerationSettings

if TYPE_CHECKING:  # pragma: no cover
    import torch


def repetition_penalty(history: torch.Tensor, scores: torch.Tensor, penalty: float,
                       ignore_before: torch.Tensor | None = None) -> torch.Tensor:
    """Divide positive / multiply negative scores of every token already in the row.

    ``ignore_before[row]`` skips a row's leading positions (the left padding of a
    decoder-only prompt, which ``generate()`` leaves unpenalised).
    """
    import torch

    if penalty == 1.0:
        return scores
    vocab = scores.shape[-1]
    ids = history.clamp(max=vocab)
    if ignore_before is not None:
        positions = torch.arange(history.shape[1])
        ids = ids.masked_fill(positions[None, :] < ignore_before[:, None], vocab)
    padded = torch.nn.functional.pad(scores, (0, 1))
    picked = torch.gather(padded, 1, ids)
    picked = torch.where(picked < 0, picked * penalty, picked / penalty)
    return padded.scatter(1, ids, picked)[..., :vocab]


def forced_eos(scores: torch.Tensor, cur_len: int, max_length: int, eos: int | list[int] | None) -> torch.Tensor:
    """On the last allowed position only EOS may be chosen."""
    import torch

    if eos is None or cur_len != max_length - 1:
        return scores
    out = torch.full_like(scores, -math.inf)
    out[:, eos] = 0
    return out


def suppress(scores: torch.Tensor, tokens: tuple[int, ...]) -> torch.Tensor:
    if not tokens:
        return scores
    out = scores.clone()
    out[:, list(tokens)] = -math.inf
    return out


def process(history: torch.Tensor, scores: torch.Tensor, settings: GenerationSettings, max_length: int,
            ignore_before: torch.Tensor | None) -> torch.Tensor:
    """All processors, in ``generate()``'s order."""
    scores = repetition_penalty(history, scores, settings.repetition_penalty, ignore_before)
    scores = forced_eos(scores, history.shape[1], max_length, settings.forced_eos_token_id)
    return suppress(scores, settings.suppress_tokens)
