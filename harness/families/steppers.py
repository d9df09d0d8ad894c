"""One decoding step over exported graphs, for any runner (PyTorch or ONNX Runtime).

A *stepper* hides how the next-token logits are computed: the search loops hand it the
whole token history and get the last position's logits back, whether it re-runs the
full decoder (uncached) or feeds one token with the cached keys/values (cached). The
graph I/O is the families' contract (optimum naming), so a stepper over ORT and one over
the PyTorch wrappers do exactly the same sequence of graph calls.

The steppers are the families' (``Family.starter`` returns one): they speak a family's graph
I/O, and the search loops above (``harness.generation``) see only ``Starter`` / ``Stepper``.
A runner is only a type here (anything with ``run(feeds) -> outputs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Protocol

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from harness.families.causal_lm import CausalLMFamily
    from harness.runners.base import GraphRunner
    from harness.zoo.loading import LoadedModel


def position_ids(mask: np.ndarray) -> np.ndarray:
    """A left-padded decoder-only batch's positions, from its mask (pad positions get 1, as
    transformers' ``generate`` feeds them): the family's parity feeds and its stepper agree."""
    pos = np.cumsum(mask, axis=1) - 1
    return np.where(mask == 0, 1, pos).astype(np.int64)


class Stepper(Protocol):
    def step(self, history: np.ndarray) -> np.ndarray:
        """Logits (rows, vocab) of the position after ``history`` (rows, length)."""

    def reorder(self, rows: np.ndarray) -> None:
        """Keep only ``rows`` (in that order) of the cached state: beam search's reshuffle."""


class Starter(Protocol):
    """Starts the decode of one batch of prompts (a family's ``starter``)."""

    def start(self, input_ids: np.ndarray, attention_mask: np.ndarray, expand: int, use_cache: bool) -> "Start":
        """The prompt and a stepper for ``expand`` rows per input (beams)."""


@dataclass
class Start:
    """What a search needs for one batch: the fixed prompt, a stepper, and the per-row
    number of leading pad positions the repetition penalty must skip (None: none)."""

    prompt: np.ndarray
    stepper: Stepper
    ignore_before: np.ndarray | None = None


def as_past(outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``present.*`` outputs renamed to the ``past_key_values.*`` inputs of the next step."""
    return {name.replace("present", "past_key_values", 1): value
            for name, value in outputs.items() if name.startswith("present")}


class Seq2SeqStepper:
    """Encoder once, then ``decoder`` (first / every step) and ``decoder_with_past``."""

    def __init__(self, runners: Mapping[str, GraphRunner], states: np.ndarray, mask: np.ndarray,
                 use_cache: bool) -> None:
        self.runners, self.states, self.mask, self.use_cache = runners, states, mask, use_cache
        self.past: dict[str, np.ndarray] | None = None
        self.calls = 0

    def step(self, history: np.ndarray) -> np.ndarray:
        self.calls += 1
        if self.past is None or not self.use_cache:
            out = self.runners["decoder"].run({"input_ids": history, "encoder_hidden_states": self.states,
                                               "encoder_attention_mask": self.mask})
            if self.use_cache:
                self.past = as_past(out)
            return out["logits"][:, -1]
        out = self.runners["decoder_with_past"].run({"input_ids": history[:, -1:],
                                                     "encoder_attention_mask": self.mask, **self.past})
        self.past.update(as_past(out))  # self-attention grows; cross-attention stays from step one
        return out["logits"][:, -1]

    def kept_positions(self, name: str, length: int) -> np.ndarray:
        """[rows, length]: the cross-attention cache is read where the source mask keeps positions;
        the self-attention cache (the target so far) everywhere."""
        if ".encoder." in name and length == self.mask.shape[1]:
            return self.mask.astype(bool)
        return np.ones((self.mask.shape[0], length), bool)

    def reorder(self, rows: np.ndarray) -> None:
        self.states, self.mask = self.states[rows], self.mask[rows]
        if self.past is not None:
            self.past = {k: v[rows] for k, v in self.past.items()}


class CausalLMStepper:
    """Decoder-only: prefill with an empty past, then one token per step with past, or
    (uncached) the whole sequence every step. Left padding, ``position_ids`` from the mask."""

    def __init__(self, runner: GraphRunner, prompt_mask: np.ndarray,
                 empty_past: Callable[[int], dict[str, np.ndarray]], use_cache: bool) -> None:
        self.runner, self.prompt_mask, self.empty_past, self.use_cache = runner, prompt_mask, empty_past, use_cache
        self.past: dict[str, np.ndarray] | None = None
        self.calls = 0

    def step(self, history: np.ndarray) -> np.ndarray:
        self.calls += 1
        rows, new = history.shape[0], history.shape[1] - self.prompt_mask.shape[1]
        mask = np.concatenate([self.prompt_mask, np.ones((rows, new), dtype=self.prompt_mask.dtype)], axis=1)
        pos = position_ids(mask)
        if self.past is None or not self.use_cache:
            feeds = {"input_ids": history, "attention_mask": mask, "position_ids": pos, **self.empty_past(rows)}
        else:
            feeds = {"input_ids": history[:, -1:], "attention_mask": mask, "position_ids": pos[:, -1:], **self.past}
        out = self.runner.run(feeds)
        if self.use_cache:
            self.past = as_past(out)
        return out["logits"][:, -1]

    def kept_positions(self, name: str, length: int) -> np.ndarray:
        """[rows, length]: the cache positions a query reads (the prompt's pads are never read)."""
        rows, prompt = self.prompt_mask.shape
        if length < prompt:
            return np.ones((rows, length), bool)
        return np.concatenate([self.prompt_mask.astype(bool), np.ones((rows, length - prompt), bool)], axis=1)

    def reorder(self, rows: np.ndarray) -> None:
        self.prompt_mask = self.prompt_mask[rows]
        if self.past is not None:
            self.past = {k: v[rows] for k, v in self.past.items()}


class Seq2SeqModel:
    """Starts seq2seq batches: runs the encoder once, repeats rows for beams."""

    def __init__(self, runners: Mapping[str, GraphRunner], decoder_start_token_id: int) -> None:
        self.runners, self.start_id = runners, decoder_start_token_id

    def start(self, input_ids: np.ndarray, attention_mask: np.ndarray, expand: int, use_cache: bool) -> Start:
        states = self.runners["encoder"].run({"input_ids": input_ids, "attention_mask": attention_mask})
        states_ = np.repeat(states["last_hidden_state"], expand, axis=0)
        mask = np.repeat(attention_mask, expand, axis=0)
        prompt = np.full((mask.shape[0], 1), self.start_id, dtype=np.int64)
        return Start(prompt, Seq2SeqStepper(self.runners, states_, mask, use_cache))


class CausalLMModel:
    """Starts decoder-only batches from a left-padded prompt."""

    def __init__(self, runner: GraphRunner, family: CausalLMFamily, model: LoadedModel) -> None:
        self.runner, self.family, self.model = runner, family, model

    def start(self, input_ids: np.ndarray, attention_mask: np.ndarray, expand: int, use_cache: bool) -> Start:
        prompt = np.repeat(input_ids, expand, axis=0)
        mask = np.repeat(attention_mask, expand, axis=0)
        # generate() leaves a row's left padding out of the repetition penalty
        ignore = (mask != 0).argmax(axis=1)
        stepper = CausalLMStepper(self.runner, mask, lambda rows: self.family.empty_past(self.model, rows), use_cache)
        return Start(prompt, stepper, ignore)
