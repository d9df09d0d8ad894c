"""Greedy and beam search over a stepper: the same loop for PyTorch and ONNX runners.

Both follow transformers' ``generate()`` step for step (``_sample`` without sampling and
the vectorised ``_beam_search``), including how finished rows are padded, the stopping
rules, length penalty and the early-stopping heuristic, and they use torch ops on CPU
tensors for the choices (argmax, log-softmax, top-k) so rounding and tie-breaking are
the same too. Only the logits come from the runner. Each returns, per input row, the
generated tokens up to and including the first EOS (no padding).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from harness.families.steppers import Start
from harness.generation.processors import process
from harness.generation.settings import GenerationSettings

if TYPE_CHECKING:  # pragma: no cover
    import torch

_NEG = -1.0e9  # generate()'s "impossible" score


def _logits(start: Start, history: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.from_numpy(np.ascontiguousarray(start.stepper.step(history.numpy()), dtype=np.float32))


def _trim(row: list[int], eos: set[int]) -> list[int]:
    for i, token in enumerate(row):
        if token in eos:
            return row[: i + 1]
    return row


def greedy(start: Start, settings: GenerationSettings) -> list[list[int]]:
    """Pick the best-scoring token each step until every row hit EOS or the length limit."""
    import torch

    history = torch.from_numpy(start.prompt)
    ignore = None if start.ignore_before is None else torch.from_numpy(start.ignore_before)
    max_length = history.shape[1] + settings.max_new_tokens
    eos = torch.tensor(settings.eos_token_ids or [-1])
    unfinished = torch.ones(history.shape[0], dtype=torch.bool)
    fill = settings.fill_token_id
    while True:
        scores = process(history, _logits(start, history), settings, max_length, ignore)
        tokens = torch.argmax(scores, dim=-1)
        tokens = torch.where(unfinished, tokens, torch.full_like(tokens, fill))
        history = torch.cat([history, tokens[:, None]], dim=-1)
        unfinished &= ~torch.isin(tokens, eos)
        if history.shape[1] >= max_length or not bool(unfinished.any()):
            break
    prompt_len = start.prompt.shape[1]
    return [_trim(row[prompt_len:].tolist(), set(settings.eos_token_ids)) for row in history]


def _gather(tensor: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``tensor[b, index[b, j], ...]`` for every batch item ``b`` (generate()'s _gather_beams)."""
    import torch

    while index.dim() < tensor.dim():
        index = index.unsqueeze(-1)
    return torch.take_along_dim(tensor, index, dim=1)


def beam_search(start: Start, settings: GenerationSettings) -> list[list[int]]:
    """Beam search as ``generate(num_beams=K, do_sample=False)``; the best beam per input.

    ``start`` holds ``batch * K`` rows (each input repeated K times, consecutively).
    """
    import torch

    k = settings.num_beams
    flat_prompt = torch.from_numpy(start.prompt)
    batch, prompt_len = flat_prompt.shape[0] // k, flat_prompt.shape[1]
    max_length = prompt_len + settings.max_new_tokens
    ignore = None if start.ignore_before is None else torch.from_numpy(start.ignore_before)
    eos = torch.tensor(settings.eos_token_ids or [-1])
    keep = max(2, 1 + len(settings.eos_token_ids)) * k
    top_k_mask = torch.cat([torch.ones(k, dtype=torch.bool), torch.zeros(keep - k, dtype=torch.bool)])

    running = torch.full((batch, k, max_length), settings.fill_token_id, dtype=torch.int64)
    running[:, :, :prompt_len] = flat_prompt.view(batch, k, prompt_len)
    sequences = running.clone()
    lengths = torch.zeros((batch, k), dtype=torch.int64)  # generated length of each finished hypothesis
    running_scores = torch.zeros((batch, k), dtype=torch.float32)
    running_scores[:, 1:] = _NEG
    beam_scores = torch.full((batch, k), _NEG, dtype=torch.float32)
    finished = torch.zeros((batch, k), dtype=torch.bool)
    improvable = torch.ones((batch, 1), dtype=torch.bool)
    cur_len = prompt_len
    batch_offset = torch.arange(batch).view(-1, 1) * k

    while True:
        flat = running[:, :, :cur_len].reshape(batch * k, cur_len)
        log_probs = torch.nn.functional.log_softmax(_logits(start, flat), dim=-1)
        log_probs = process(flat, log_probs, settings, max_length, ignore)
        vocab = log_probs.shape[-1]
        log_probs = (log_probs.view(batch, k, vocab) + running_scores[:, :, None]).reshape(batch, -1)

        # top-K continuations over all beams (K = keep, so enough stay open if some end)
        top_scores, top_index = torch.topk(log_probs, k=keep)
        source_beam = top_index // vocab
        top_sequences = _gather(running, source_beam)
        top_sequences[:, :, cur_len] = top_index % vocab
        hits = torch.isin(top_sequences[:, :, cur_len], eos) | (cur_len + 1 >= max_length)

        # the best K unfinished continue
        open_scores = top_scores + hits.to(torch.float32) * _NEG
        next_index = torch.topk(open_scores, k=k)[1]
        running = _gather(top_sequences, next_index)
        running_scores = _gather(open_scores, next_index)
        parent = _gather(source_beam, next_index) + batch_offset

        # finished continuations among the top K compete for the K best hypotheses
        just_finished = hits & top_k_mask[None, :]
        scored = top_scores / ((cur_len + 1 - prompt_len) ** settings.length_penalty)
        full = torch.all(finished, dim=-1, keepdim=True) & (settings.early_stopping is True)
        scored = scored + full.to(torch.float32) * _NEG
        scored = scored + (~improvable).to(torch.float32) * _NEG
        scored = scored + (~just_finished) * _NEG
        merged = torch.topk(torch.cat([beam_scores, scored], dim=1), k=k)[1]
        sequences = _gather(torch.cat([sequences, top_sequences], dim=1), merged)
        beam_scores = _gather(torch.cat([beam_scores, scored], dim=1), merged)
        new_lengths = torch.full((batch, keep), cur_len + 1 - prompt_len, dtype=torch.int64)
        lengths = _gather(torch.cat([lengths, new_lengths], dim=1), merged)
        finished = _gather(torch.cat([finished, just_finished], dim=1), merged)

        start.stepper.reorder(parent.reshape(-1).numpy())
        if ignore is not None:
            ignore = ignore[parent.reshape(-1)]
        cur_len += 1

        # can an open beam still beat the worst finished one? (generate()'s heuristic)
        if settings.early_stopping == "never" and settings.length_penalty > 0.0:
            best_length = max_length - prompt_len
        else:
            best_length = cur_len - prompt_len
        best_open = running_scores[:, :1] / (best_length ** settings.length_penalty)
        worst_done = torch.where(finished, torch.min(beam_scores, dim=1, keepdim=True)[0], -1.0e9)
        improvable = improvable & torch.any(best_open > worst_done, dim=-1, keepdim=True)
        open_beam = not (bool(torch.all(finished)) and settings.early_stopping is True)
        if not (bool(torch.any(improvable)) and open_beam and not bool(torch.all(hits))):
            break

    eos_set = set(settings.eos_token_ids)
    return [_trim(sequences[b, 0, prompt_len: prompt_len + int(lengths[b, 0])].tolist(), eos_set)
            for b in range(batch)]


def search(start: Start, settings: GenerationSettings) -> list[list[int]]:
    return greedy(start, settings) if settings.num_beams == 1 else beam_search(start, settings)
