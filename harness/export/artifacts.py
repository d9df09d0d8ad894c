"""The artifact chain for one graph: FP32 export, then FP16 / INT8 / INT4 derived from it.

Each step is a cache entry keyed by its inputs; FP16/INT8 keys include the FP32 key, so a
new export invalidates everything derived from it and nothing else.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core import Precision
from harness.export.cache import ArtifactCache, CacheEntry
from harness.export.fp16 import convert_fp16, fp16_settings
from harness.export.int4 import int4_settings, quantize_int4
from harness.export.int8 import int8_settings, int8_static_settings, quantize_int8, quantize_int8_static
from harness.export.onnx_export import export_graph

if TYPE_CHECKING:  # pragma: no cover
    from harness.families.base import Family, GraphSpec
    from harness.zoo.loading import LoadedModel

#: Bump when the export code changes what it writes for the same inputs.
EXPORT_RECIPE = 4


@dataclass(frozen=True)
class ExportSettings:
    opset: int = 17
    exporter: str = "torchscript"
    fp16_op_block_list: tuple[str, ...] = ()
    int8_per_channel: bool = False
    int8_reduce_range: bool = False
    #: static INT8: calibration method and the calibration sentences (disjoint from the judged ones)
    int8_calibration: str = "minmax"
    calibration_texts: tuple[str, ...] = ()
    calibration_batch_size: int = 8
    #: ``--external-data``: auto (by size) / always / never (``harness.export.external``)
    external_data: str = "auto"
    #: node names kept in FP32 by the FP16 conversion / left unquantised by INT8
    #: (``harness bisect --suggest`` finds them); part of the keys only when non-empty
    fp16_node_block_list: tuple[str, ...] = ()
    int8_nodes_to_exclude: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"opset": self.opset, "exporter": self.exporter,
                               "fp16_op_block_list": list(self.fp16_op_block_list),
                               "int8_per_channel": self.int8_per_channel, "int8_reduce_range": self.int8_reduce_range}
        if self.fp16_node_block_list:
            out["fp16_node_block_list"] = list(self.fp16_node_block_list)
        if self.int8_nodes_to_exclude:
            out["int8_nodes_to_exclude"] = list(self.int8_nodes_to_exclude)
        return out

    def external_part(self) -> dict[str, Any]:
        """The cache-key part of ``--external-data``: empty for ``auto`` (so the keys of every
        artifact built before the option existed still match), the mode otherwise (a forced
        artifact and an unforced one never share an entry)."""
        return {} if self.external_data == "auto" else {"external_data": self.external_data}

    def calibration_digest(self) -> str:
        """sha256 of the calibration sentences (part of a static INT8 artifact's cache key)."""
        return hashlib.sha256("\n".join(self.calibration_texts).encode()).hexdigest()


def export_versions() -> dict[str, str]:
    import onnx
    import torch
    import transformers

    return {"torch": torch.__version__, "onnx": onnx.__version__, "transformers": transformers.__version__}


def onnx_artifact(model: "LoadedModel", family: "Family", graph: "GraphSpec", precision: Precision,
                  settings: ExportSettings, cache: ArtifactCache) -> CacheEntry:
    fp32 = cache.get_or_build(
        f"{model.name}-{graph.name}{'-' + graph.variant_tag if graph.variant_tag else ''}-fp32",
        {"kind": "onnx", "weights": model.weights_sha256, "graph": graph.key(), "opset": settings.opset,
         "exporter": settings.exporter, "versions": export_versions(), "recipe": EXPORT_RECIPE,
         **settings.external_part()},
        lambda tmp: export_graph(family.module(model, graph), graph, family.export_example(model, graph), tmp,
                                 opset=settings.opset, exporter=settings.exporter,
                                 external_data=settings.external_data),
    )
    if precision is Precision.FP32:
        return fp32
    src: Path = fp32.path()
    label = fp32.directory.name.rsplit("-", 2)[0]
    mode, ext = settings.external_data, settings.external_part()
    if precision is Precision.FP16:
        s = fp16_settings(settings.fp16_op_block_list, settings.fp16_node_block_list)
        return cache.get_or_build(f"{label}-fp16", {"kind": "fp16", "source": fp32.key, "settings": s, **ext},
                                  lambda tmp: convert_fp16(src, tmp, settings.fp16_op_block_list, mode,
                                                           settings.fp16_node_block_list))
    if precision is Precision.INT4:
        s4 = int4_settings()
        return cache.get_or_build(f"{label}-int4", {"kind": "int4", "source": fp32.key, "settings": s4, **ext},
                                  lambda tmp: quantize_int4(src, tmp, s4, mode))
    q: dict[str, Any] = {"per_channel": settings.int8_per_channel, "reduce_range": settings.int8_reduce_range}
    if settings.int8_nodes_to_exclude:  # only when set: the keys of every artifact built before stay the same
        q["nodes_to_exclude"] = sorted(set(settings.int8_nodes_to_exclude))
    if precision is Precision.INT8_STATIC:
        q["calibration"] = settings.int8_calibration
        texts, size = settings.calibration_texts, settings.calibration_batch_size

        def calibrate(tmp: Path) -> Path:
            batches = [family.feeds(model, graph, list(texts[i: i + size])) for i in range(0, len(texts), size)]
            return quantize_int8_static(src, tmp, batches, q, mode)

        return cache.get_or_build(f"{label}-int8-static",
                                  {"kind": "int8-static", "source": fp32.key, "settings": int8_static_settings(q),
                                   "calibration": settings.calibration_digest(), **ext}, calibrate)
    return cache.get_or_build(f"{label}-int8", {"kind": "int8", "source": fp32.key, "settings": int8_settings(q), **ext},
                              lambda tmp: quantize_int8(src, tmp, q, mode))
