"""The files a variant serves: the harness's own exports (content-addressed cache), by graph.

``harness export-triton`` and the serving tests hand a server exactly what a run judged:
the ONNX Runtime backend's artifacts for the variant (FP32 export, FP16 conversion, INT8
quantisation), found in or built into the cache the run uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core import Variant
from harness.runners.base import GraphRef

if TYPE_CHECKING:  # pragma: no cover
    from harness.families import Family, GraphSpec
    from harness.judge.workspace import Workspace
    from harness.zoo.loading import LoadedModel


@dataclass(frozen=True)
class GraphFile:
    graph: "GraphSpec"
    path: Path  # model.onnx (external data beside it, if any)
    files: tuple[Path, ...]  # every file of the artifact (model.onnx, model.onnx.data)


def variant_files(ws: "Workspace", variant: Variant) -> tuple["LoadedModel", "Family", list[GraphFile]]:
    """Every graph's artifact of ``variant`` (an ONNX-running provider), built if not cached."""
    model = ws.model(variant.model)
    family = ws.family(model)
    backend = ws.backend(variant, model)
    out = []
    for graph in family.graphs(model):
        found = backend.artifacts(GraphRef(model, family, graph, variant))
        paths = [Path(str(v["path"])) for v in found.values()]
        main = next(p for p in paths if p.suffix == ".onnx")
        out.append(GraphFile(graph, main, tuple(paths)))
    return model, family, out
