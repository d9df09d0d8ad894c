"""Which reference graph each artifact file is judged against, and the real feeds for it.

A *job* is one (file, reference graph, mode). Most files make one job; a merged decoder
(``decoder_model_merged.onnx``) makes two -- its uncached branch judged against the
``decoder`` graph and its cached branch against ``decoder_with_past`` -- and a decoder-only
step graph with a cache is judged on the prompt (empty cache) and on a later step. Feeds
are the families' own (tokenized corpus batches, padded, mixed lengths; decoder inputs
built from the FP32 reference's encoder states and caches), so each graph is judged alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from harness.check.io_match import role
from harness.check.layout import ArtifactFile, role_of
from harness.families import Family, GraphSpec
from harness.families.base import to_torch, tokenize
from harness.families.causal_lm import _left_pad, position_ids

#: seq2seq modes -> the reference graph they are judged against
_SEQ2SEQ_MODES = {"encoder": ("encoder",), "decoder": ("decoder",), "decoder_with_past": ("decoder_with_past",),
                  "merged": ("decoder", "decoder_with_past")}


@dataclass(frozen=True)
class Job:
    artifact: ArtifactFile
    graph: GraphSpec  # the reference graph
    mode: str  # model | encoder | decoder | decoder_with_past | prefill | step
    key: str  # how the job is named in metric keys and the account

    @property
    def label(self) -> str:
        plain = self.mode in ("model", self.artifact.role)
        return self.artifact.path.name if plain else f"{self.artifact.path.name} [{self.mode}]"


def plan_jobs(artifacts: Sequence[ArtifactFile], family: Family, model) -> list[Job]:
    graphs = {g.name: g for g in family.graphs(model)}
    jobs: list[Job] = []
    for art in artifacts:
        role_name = role_of(art, family.name)
        if family.name == "encoder":
            jobs.append(Job(art, graphs["model"], "model", "model"))
        elif family.name == "seq2seq":
            if role_name == "model":  # pragma: no cover - role_of always settles seq2seq files
                role_name = "encoder"
            for mode in _SEQ2SEQ_MODES[role_name]:
                key = f"merged_{mode}" if role_name == "merged" else mode
                jobs.append(Job(art, graphs[mode], mode, key))
        else:
            cached = any(role(i.name).kv is not None for i in art.inputs)  # takes a KV cache
            modes = ("step",) if role_name == "decoder_with_past" else ("prefill", "step") if cached else ("prefill",)
            for mode in modes:
                jobs.append(Job(art, graphs["model"], mode, f"{role_name}_{mode}"))
    seen: dict[str, int] = {}
    out = []
    for job in jobs:  # two files judged against the same graph: tell them apart by file name
        seen[job.key] = seen.get(job.key, 0) + 1
    for job in jobs:
        out.append(Job(job.artifact, job.graph, job.mode, f"{job.key}@{job.artifact.path.stem}")
                   if seen[job.key] > 1 else job)
    return out


def job_feeds(job: Job, family: Family, model, texts: Sequence[str]) -> dict[str, np.ndarray]:
    if job.mode == "prefill":
        return prefill_feeds(family, model, texts)
    return family.feeds(model, job.graph, texts)


def prefill_feeds(family: Family, model, texts: Sequence[str]) -> dict[str, np.ndarray]:
    """Decoder-only prompt: left-padded ids, mask, positions, and an empty cache."""
    enc = tokenize(model, texts)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    if getattr(model.tokenizer, "padding_side", "right") != "left":
        ids, mask = _left_pad(ids, mask, int(model.tokenizer.pad_token_id or 0))
    return {"input_ids": ids, "attention_mask": mask, "position_ids": position_ids(mask),
            **family.empty_past(model, ids.shape[0])}  # type: ignore[attr-defined]


def reference_outputs(job: Job, family: Family, model, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """PyTorch FP32 outputs of the reference graph on ``feeds``; the model must be in eval mode."""
    assert not any(m.training for m in model.model.modules()), "reference model left training mode"
    module = family.module(model, job.graph)
    with torch.inference_mode():
        outs = module(*to_torch(feeds, job.graph.input_names))
    return {n: o.float().numpy() for n, o in zip(job.graph.output_names, outs)}


def fit_sequence(feeds: dict[str, np.ndarray], length: int, pad_id: int) -> dict[str, np.ndarray]:
    """Pad (or cut) every (batch, sequence) input to an artifact's static sequence length.

    Padding is masked out, so the reference and the artifact see the same real tokens."""
    out = {}
    for name, value in feeds.items():
        if value.ndim != 2:
            out[name] = value
            continue
        if value.shape[1] >= length:
            out[name] = value[:, :length]
            continue
        fill = pad_id if name == "input_ids" else 0
        pad = np.full((value.shape[0], length - value.shape[1]), fill, dtype=value.dtype)
        out[name] = np.concatenate([value, pad], axis=1)
    return out
