"""Peak memory of a variant, measured in a fresh child, with the floors beside it.

A peak RSS alone mixes the model with the interpreter and the libraries, so two floors
are measured with the same child script: an empty interpreter (``baseline_rss_bytes``)
and one that has only imported the backend (``imports_rss_bytes``). What the model itself
costs is ``peak_rss_bytes - imports_rss_bytes``. The settings that change memory (ORT
arena and memory-pattern flags, threads) come from the child's live session.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from harness.perf.coldstart import spawn
from harness.perf.loop import SETTLE_CALLS
from harness.runners import backends
from harness.runners.base import GraphRef

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Variant
    from harness.families import Family, GraphSpec
    from harness.judge.workspace import Workspace
    from harness.zoo.loading import LoadedModel

MiB = 1024 * 1024
_FLOORS: dict[str, dict[str, int]] = {}


def floors(backend: str) -> dict[str, int]:
    """Peak RSS of an empty interpreter and of one that imported ``backend`` (once per process)."""
    if backend not in _FLOORS:
        empty = spawn(["--mode", "empty"])
        imports = spawn(["--mode", "imports", "--loader", backends()[backend].loader_ref()])
        _FLOORS[backend] = {"baseline_rss_bytes": int(empty["peak_rss_bytes"]),
                            "imports_rss_bytes": int(imports["peak_rss_bytes"])}
    return dict(_FLOORS[backend])


def memory_fields(runs: Sequence[Mapping[str, Any]], floor: Mapping[str, int]) -> dict[str, Any]:
    """Peak RSS (median over processes), the floors, GPU peak and the memory settings."""
    peak = int(statistics.median(int(r["peak_rss_bytes"]) for r in runs))
    after_load = int(statistics.median(int(r["peak_rss_after_load_bytes"]) for r in runs))
    gpu = [r["gpu_peak_bytes"] for r in runs if r.get("gpu_peak_bytes") is not None]
    return {
        "peak_rss_bytes": peak,
        "baseline_rss_bytes": int(floor["baseline_rss_bytes"]),
        "imports_rss_bytes": int(floor["imports_rss_bytes"]),
        "memory": {
            "model_rss_bytes": peak - int(floor["imports_rss_bytes"]),
            "peak_rss_after_load_bytes": after_load,
            "peak_rss_runs": [int(r["peak_rss_bytes"]) for r in runs],
            "gpu_peak_bytes": int(statistics.median(gpu)) if gpu else None,
            "settings": runs[0].get("settings", {}),
            "method": "ru_maxrss of a fresh child that loaded every graph and ran each "
                      f"{_calls(runs[0])} time(s); median of {len(runs)} process(es)",
        },
    }


def artifact_fields(ws: "Workspace", variant: "Variant", model: "LoadedModel", family: "Family",
                    graphs: Sequence["GraphSpec"]) -> dict[str, Any]:
    """Bytes on disk of what the variant ships, as its backend counts them
    (``Backend.shipped_files``: ONNX files with external data, or PyTorch's weight files)."""
    files = ws.backend(variant, model).shipped_files(GraphRef.each(model, family, graphs, variant))
    return {"artifact_bytes": sum(files.values()), "artifact_files": files}


def _calls(run: Mapping[str, Any]) -> int:
    """How often a child ran each graph: the first inference, then the steady rounds, timed by the
    harness's loop after its settling calls (``harness.perf.loop``)."""
    steady = len(run.get("steady_ms") or [])
    return 1 + steady + (SETTLE_CALLS if steady else 0)
