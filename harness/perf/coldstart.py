"""Cold start in fresh processes: how long until a variant is loaded and has answered once.

Each repetition is a new interpreter (``harness.perf.child``) that imports the backend,
loads every graph of the model and runs each once; the medians over ``repeats`` processes
are recorded (pyperf/asv: variation between processes is real variation, so repeat the
process, not only the call). The same children report peak memory (``harness.perf.memory``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.perf import child as child_module
from harness.runners import backends
from harness.runners.base import GraphRef

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Variant
    from harness.families import Family, GraphSpec
    from harness.judge.workspace import Workspace
    from harness.zoo.loading import LoadedModel

CHILD_SCRIPT = Path(child_module.__file__).resolve()
#: A child that takes longer than this is stuck (a 12x768 torch load takes ~10 s here).
CHILD_TIMEOUT_S = 600.0


class ChildError(RuntimeError):
    """A measurement child failed; the message carries its last stderr line."""


def child_env() -> dict[str, str]:
    """The parent's environment (threads, caches) plus the harness on PYTHONPATH, so the
    child imports the same code even from a source checkout that is not installed."""
    env = dict(os.environ)
    root = str(CHILD_SCRIPT.parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def spawn(args: Sequence[str], timeout: float = CHILD_TIMEOUT_S, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run one child; its JSON result plus ``process_ms`` (spawn to exit, as seen from here).
    ``env`` is added to :func:`child_env` (``scripts/bench_gate_power.py`` runs children in a
    slowed runtime environment)."""
    command = [sys.executable, str(CHILD_SCRIPT), *args]
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env={**child_env(), **(env or {})})
    except subprocess.TimeoutExpired:
        raise ChildError(f"measurement child timed out after {timeout:.0f} s: {' '.join(command)}") from None
    process_ms = (time.perf_counter() - start) * 1000.0
    lines = [line for line in proc.stdout.splitlines() if line.startswith(child_module.MARKER)]
    if proc.returncode != 0 or not lines:
        last = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise ChildError(f"measurement child exited with {proc.returncode}: {last}")
    result: dict[str, Any] = json.loads(lines[-1][len(child_module.MARKER):])
    result["process_ms"] = process_ms
    return result


def write_feeds(path: Path, feeds_by_graph: Mapping[str, Mapping[str, np.ndarray]]) -> Path:
    """Feeds for every graph in one .npz (``GRAPH::INPUT`` keys) the child reads back."""
    arrays = {f"{graph}::{name}": np.ascontiguousarray(value)
              for graph, feeds in feeds_by_graph.items() for name, value in feeds.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        np.savez(fh, **arrays)  # type: ignore[arg-type]
    return path


def unsupported_reason(variant: "Variant") -> str | None:
    """Why the variant's backend cannot be measured in a fresh process (None: it can)."""
    backend = backends().get(variant.backend)
    if backend is None:
        return f"backend {variant.backend!r} not available (no runner module for it)"
    return backend.fresh_process_reason(variant)


def child_args(ws: "Workspace", variant: "Variant", model: "LoadedModel", family: "Family",
               graphs: Sequence["GraphSpec"], feeds_path: Path, calls: int = 5) -> list[str]:
    """The command line that makes a child load exactly what this workspace would load:
    the backend class to import, and its own description of what to load (``child_spec``)."""
    reason = unsupported_reason(variant)
    if reason:
        raise ValueError(reason)
    backend = ws.backend(variant, model)
    spec = backend.child_spec(GraphRef.each(model, family, graphs, variant))
    return ["--loader", type(backend).loader_ref(), "--spec", json.dumps(spec.to_dict(), sort_keys=True),
            "--feeds", str(feeds_path), "--calls", str(calls)]


def fresh_runs(args: Sequence[str], repeats: int) -> list[dict[str, Any]]:
    """``repeats`` children, one after the other (never concurrently: they would share cores)."""
    return [spawn(args) for _ in range(repeats)]


def _median(runs: Sequence[Mapping[str, Any]], key: str) -> float:
    return float(statistics.median(float(r[key]) for r in runs))


def cold_start_fields(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``cold_start_ms`` (medians over processes) and every run's numbers.

    ``load``: sessions created / weights loaded, every graph. ``first_inference``: the first
    call of every graph. ``import``: importing the backend. ``process``: spawn to exit.
    """
    keep = ("import_ms", "load_ms", "load_ms_by_graph", "first_inference_ms", "first_inference_ms_by_graph",
            "ready_ms", "process_ms", "steady_ms", "level_ms", "canary")
    return {
        "cold_start_ms": {"load": _median(runs, "load_ms"), "first_inference": _median(runs, "first_inference_ms"),
                          "import": _median(runs, "import_ms"), "process": _median(runs, "process_ms")},
        "cold_start_runs": [{k: r[k] for k in keep if k in r} for r in runs],
    }
