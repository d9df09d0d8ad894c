"""Which reference graph each artifact file is judged against.

A *job* is one (file, reference graph, mode). Most files make one job; a merged decoder
(``decoder_model_merged.onnx``) makes two -- its uncached branch judged against the
``decoder`` graph and its cached branch against ``decoder_with_past`` -- and a decoder-only
step graph with a cache is judged on the prompt (empty cache) and on a later step. Which
modes a file makes, and how each is fed, is the family's to say
(``Family.artifact_role`` / ``check_modes`` / ``check_feeds``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from harness.check.io_match import role
from harness.check.layout import ArtifactFile
from harness.families import Family, GraphSpec

if TYPE_CHECKING:  # pragma: no cover
    from harness.zoo.loading import LoadedModel


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


def plan_jobs(artifacts: Sequence[ArtifactFile], family: Family, model: LoadedModel) -> list[Job]:
    graphs = {g.name: g for g in family.graphs(model)}
    jobs: list[Job] = []
    for art in artifacts:
        file_role = family.artifact_role(art.role, [i.name for i in art.inputs])
        takes_cache = any(role(i.name).kv is not None for i in art.inputs)
        jobs += [Job(art, graphs[m.graph], m.mode, m.key) for m in family.check_modes(file_role, takes_cache)]
    seen: dict[str, int] = {}
    for job in jobs:  # two files judged against the same graph: tell them apart by file name
        seen[job.key] = seen.get(job.key, 0) + 1
    return [Job(job.artifact, job.graph, job.mode, f"{job.key}@{job.artifact.path.stem}") if seen[job.key] > 1
            else job for job in jobs]


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
