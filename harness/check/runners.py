"""Runners over foreign artifacts that speak the reference graphs' I/O contract.

``MappedRunner`` renames feeds and outputs through an ``IOMatch`` and fills in inputs
the harness knows the value of, so parity code and the decoding loops run a foreign file
exactly as they run the harness's own exports. ``PrebuiltBackend`` hands those runners
out by graph name, which is all ``harness.generation`` needs to decode with them.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from harness.check.io_match import IOMatch
from harness.check.layout import TensorInfo
from harness.runners.base import Backend, BackendContext, GraphRunner

Synth = Callable[[Mapping[str, np.ndarray]], np.ndarray]


def has_past(feeds: Mapping[str, np.ndarray]) -> bool:
    """True when the feeds carry a non-empty KV cache (the merged decoder's cached branch)."""
    return any(k.startswith("past_key_values") and v.ndim >= 3 and v.shape[2] > 0 for k, v in feeds.items())


def synthesizers(model, family: str) -> dict[str, tuple[str, Callable[[TensorInfo], Synth]]]:
    """Roles the harness can fill in -> (description, factory(artifact tensor) -> feeds -> array).

    Values are the ones the PyTorch reference uses implicitly (zeros ``token_type_ids``,
    ``arange`` positions) or ones the artifact's active branch never reads (the merged
    decoder's other-branch inputs), so synthesizing them cannot hide an error.
    """
    cfg = model.model.config

    def batch(feeds: Mapping[str, np.ndarray]) -> int:
        return int(feeds["input_ids"].shape[0])

    def token_types(info: TensorInfo) -> Synth:
        return lambda feeds: np.zeros_like(feeds["input_ids"])

    def positions(info: TensorInfo) -> Synth:
        def make(feeds):
            ids = feeds["input_ids"]
            return np.broadcast_to(np.arange(ids.shape[1], dtype=np.int64), ids.shape).copy()
        return make

    def cache_branch(info: TensorInfo) -> Synth:
        return lambda feeds: np.array([has_past(feeds)], dtype=np.bool_)

    def states(info: TensorInfo) -> Synth:
        width = info.shape[-1] if info.shape and isinstance(info.shape[-1], int) else int(cfg.d_model)

        def make(feeds):
            mask = feeds.get("encoder_attention_mask", feeds.get("attention_mask"))
            return np.zeros((batch(feeds), mask.shape[1], width), np.float32)
        return make

    def dummy_past(info: TensorInfo) -> Synth:
        """(batch, heads, 1, head_dim); the artifact's own static dims win over the config's."""
        heads = int(getattr(cfg, "decoder_attention_heads", None) or cfg.num_attention_heads)
        guess = [None, heads, 1, int(cfg.d_model) // heads]
        dims = [d if isinstance(d, int) else g for d, g in zip(info.shape or guess, guess)]
        return lambda feeds: np.zeros([batch(feeds), *dims[1:]], np.float32)

    out: dict[str, tuple[str, Callable[[TensorInfo], Synth]]] = {
        "token_type_ids": ("zeros, as the reference uses when given none", token_types),
        "use_cache_branch": ("true when the feeds carry a KV cache", cache_branch),
    }
    if family == "encoder":
        out["position_ids"] = ("0..length-1 per row, as the reference computes", positions)
    if family == "seq2seq":
        out["encoder_hidden_states"] = ("zeros: the cached branch reads the cross-attention cache instead", states)
        out["past"] = ("zeros of length 1: the uncached branch does not read them", dummy_past)
    return out


class MappedRunner(GraphRunner):
    """An artifact session seen through the reference graph's names."""

    def __init__(self, session: GraphRunner, match: IOMatch, synth: Mapping[str, Synth], label: str) -> None:
        self.session, self.match, self.synth, self.label = session, match, dict(synth), label
        self.input_names = list(match.input_map)
        self.output_names = list(match.output_map)
        self.calls = 0
        #: set to a list to keep every call's outputs (derived metrics such as sentence embeddings)
        self.recorded: list[dict[str, np.ndarray]] | None = None

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise KeyError(f"{self.label}: missing inputs {missing}; got {sorted(feeds)}")
        return self._run(dict(feeds))

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        theirs = {art: feeds[ref] for ref, art in self.match.input_map.items() if ref in feeds}
        for art, make in self.synth.items():
            theirs[art] = make(feeds)
        self.calls += 1
        out = self.session.run(theirs)
        result = {ref: out[art] for ref, art in self.match.output_map.items()}
        if self.recorded is not None:
            self.recorded.append(result)
        return result

    def close(self) -> None:
        """Sessions are shared between jobs and owned by the check; closing is theirs."""


class SplitLMRunner(GraphRunner):
    """optimum's decoder-only pair as one step graph: ``decoder_model.onnx`` for the prompt
    (empty cache), ``decoder_with_past_model.onnx`` for every later token."""

    def __init__(self, prefill: GraphRunner, step: GraphRunner) -> None:
        self.prefill, self.step = prefill, step
        self.input_names = sorted(set(prefill.input_names) | set(step.input_names))
        self.output_names = list(step.output_names)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return (self.step if has_past(feeds) else self.prefill).run(feeds)

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:  # pragma: no cover - run() dispatches
        return self.run(feeds)


class PrebuiltBackend(Backend):
    """A backend whose graphs are already built: runners by graph name, artifacts as found."""

    name = "prebuilt"

    def __init__(self, ctx: BackendContext, runners: Mapping[str, GraphRunner], artifacts: Mapping[str, dict]) -> None:
        super().__init__(ctx)
        self.runners, self._artifacts = dict(runners), dict(artifacts)

    @classmethod
    def unavailable_reason(cls, variant) -> str | None:
        return None

    def load(self, model, family, graph, variant) -> GraphRunner:
        if graph.name not in self.runners:
            raise KeyError(f"no artifact provides the {graph.name!r} graph")
        return self.runners[graph.name]

    def artifacts(self, model, family, graph, variant) -> dict[str, dict]:
        return dict(self._artifacts)
