"""Numeric parity of one variant against the PyTorch FP32 reference.

Every graph of the model runs on every corpus batch (padded, mixed lengths); valid
positions of each output are gathered across batches and compared in one go, so a metric
is over the whole corpus, and the worst element is reported in corpus coordinates
(global batch row, position, index). Used by the suites and by ``harness check``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.core import Precision, Tolerance, Variant
from harness.core.phases import phase
from harness.judge.tolerances import tolerance_for
from harness.metrics.numeric import Location, compare_arrays
from harness.results.checks import CheckResult, GateFailure, raise_failures
from harness.results.record import MetricKey

if TYPE_CHECKING:  # pragma: no cover
    from harness.families import Family, GraphSpec
    from harness.judge.workspace import Workspace
    from harness.runners.base import GraphRunner

#: one parity batch: feeds, reference outputs, valid-position masks (None: every position)
Batch = tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray], Mapping[str, "np.ndarray | None"]]


__all__ = ["CheckResult", "Failure", "GateFailure", "OutputResult", "ParityResult", "numeric_parity"]


@dataclass(frozen=True)
class Failure:
    """A failed check of one graph output: which graph and output (for callers that group by them),
    and its ``CheckResult`` (the one message format)."""

    graph: str
    output: str
    metric: str
    value: float
    threshold: float
    op: str
    where: str

    @property
    def outcome(self) -> CheckResult:
        return CheckResult(self.metric, self.value, self.op, self.threshold, f"{self.graph}/{self.output}", self.where)

    def message(self) -> str:
        return self.outcome.message()


@dataclass
class OutputResult:
    graph: str
    output: str
    metrics: dict[str, float]
    worst: Location | None
    axis_names: tuple[str, ...]
    tolerance: Tolerance | None  # None: reported, not gated
    n_compared: int

    where: str = ""

    def failures(self) -> list[Failure]:
        if self.tolerance is None:
            return []
        where = self.worst.describe(self.axis_names) if self.worst else (self.where or "n/a")
        return [Failure(self.graph, self.output, c.metric, self.metrics[c.metric], c.threshold, c.symbol, where)
                for c in self.tolerance.checks
                if c.metric in self.metrics and not c.passes(self.metrics[c.metric])]


@dataclass
class ParityResult:
    variant: str
    outputs: list[OutputResult] = field(default_factory=list)
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    dumps: dict[str, str] = field(default_factory=dict)  # graph -> .npz of its worst failing batch
    replayed: list[str] = field(default_factory=list)  # graphs whose outputs came from the output cache

    @property
    def failures(self) -> list[Failure]:
        return [f for o in self.outputs for f in o.failures()]

    @property
    def passed(self) -> bool:
        return not self.failures

    def metrics(self) -> dict[str, float]:
        return {str(MetricKey(k, o.graph, o.output)): v for o in self.outputs for k, v in o.metrics.items()}

    def thresholds(self) -> dict[str, dict[str, Any]]:
        return {str(MetricKey(c.metric, o.graph, o.output)): {"threshold": c.threshold, "op": c.symbol}
                for o in self.outputs if o.tolerance for c in o.tolerance.checks if c.metric in o.metrics}

    def worst(self) -> dict[str, str]:
        return {f"{o.graph}.{o.output}": o.worst.describe(o.axis_names) for o in self.outputs if o.worst}

    def assert_ok(self) -> None:
        raise_failures(self.variant, [f.message() for f in self.failures])


def axis_names(ndim: int, is_logits: bool) -> tuple[str, ...]:
    if ndim == 2:
        return ("batch", "index")
    if ndim == 3:
        return ("batch", "position", "index")
    if ndim == 4:
        return ("batch", "head", "position", "index")
    return tuple(["batch"] + [f"dim{i}" for i in range(1, ndim)])


class _Collector:
    """Valid rows of one output across batches, with their corpus coordinates."""

    def __init__(self) -> None:
        self.ref: list[np.ndarray] = []
        self.got: list[np.ndarray] = []
        self.coords: list[np.ndarray] = []
        self.ndim = 0

    def add(self, ref: np.ndarray, got: np.ndarray, mask: np.ndarray | None, row_offset: int) -> None:
        if ref.shape != got.shape:
            raise ValueError(f"shape mismatch: reference {ref.shape} vs variant {got.shape}")
        self.ndim = ref.ndim
        if mask is None:  # every row over all but the last axis, so batches of any length stack
            mask = np.ones(ref.shape[:-1] if ref.ndim >= 2 else ref.shape, dtype=bool)
        coords = np.argwhere(mask)
        coords[:, 0] += row_offset
        self.ref.append(ref[mask])
        self.got.append(got[mask])
        self.coords.append(coords)

    def compare(self, is_logits: bool) -> tuple[dict[str, float], Location | None, int]:
        ref, got = np.concatenate(self.ref), np.concatenate(self.got)
        coords = np.concatenate(self.coords)
        result = compare_arrays(ref, got, is_logits=is_logits)
        worst = result.worst
        if worst is not None:
            row = worst.index[0]
            worst = Location(tuple(int(c) for c in coords[row]) + tuple(worst.index[1:]), worst.ref, worst.got,
                             worst.abs_err)
        return result.metrics, worst, result.n_compared


def run_graph_parity(runner: "GraphRunner", graph: "GraphSpec", batches: Sequence[Batch],
                     precision: Precision, overrides: Mapping[str, Mapping[str, float]] | None = None,
                     output_map: Mapping[str, str] | None = None) -> list[OutputResult]:
    """Compare ``runner`` on (feeds, reference outputs, masks) batches; ``output_map``
    maps reference output names to the runner's (for foreign artifacts)."""
    output_map = dict(output_map or {n: n for n in graph.output_names})
    collectors = {name: _Collector() for name in output_map}
    offset = 0
    for feeds, ref, masks in batches:
        with phase("variant"):
            got = runner.run(feeds)
        with phase("metrics"):
            for name, theirs in output_map.items():
                collectors[name].add(ref[name], got[theirs], masks.get(name), offset)
        offset += next(iter(feeds.values())).shape[0]
    with phase("metrics"):
        return _results(graph, collectors, precision, overrides)


def _results(graph: "GraphSpec", collectors: Mapping[str, "_Collector"], precision: Precision,
             overrides: Mapping[str, Mapping[str, float]] | None) -> list[OutputResult]:
    results = []
    for name, col in collectors.items():
        is_logits = name in graph.logits_outputs
        metrics, worst, n = col.compare(is_logits)
        tol = tolerance_for(precision, is_logits=is_logits, overrides=overrides) if graph.is_gated(name) else None
        results.append(OutputResult(graph.name, name, metrics, worst, axis_names(col.ndim, is_logits), tol, n))
    return results


def lint_result(graph_name: str, path: str) -> OutputResult:
    """The artifact's static checks as a gated pseudo-output (``<graph>/artifact``)."""
    from harness.core import Check
    from harness.export.lint import training_mode_nodes

    nodes = training_mode_nodes(path)
    where = ", ".join(nodes[:5]) + (" ..." if len(nodes) > 5 else "") if nodes else "n/a"
    result = OutputResult(graph_name, "artifact", {"training_mode_ops": float(len(nodes))}, None, (),
                          Tolerance((Check("training_mode_ops", 0.0),)), 1)
    result.where = where
    return result


def dump_failing_batch(runner: "GraphRunner", graph: "GraphSpec", outputs: Sequence[OutputResult],
                       batches: Sequence[Batch], directory: Path) -> Path | None:
    """Save the inputs, reference and variant outputs of the batch holding the worst failing
    element, so the regression reproduces from files (``np.load``) without the corpus or model."""
    worst = next((o.worst for o in outputs if o.failures() and o.worst is not None), None)
    if worst is None:
        return None
    row = worst.index[0]
    offset = 0
    for number, (feeds, ref, _) in enumerate(batches):
        size = next(iter(feeds.values())).shape[0]
        if row < offset + size:
            got = runner.run(feeds)
            arrays = {f"input.{k}": v for k, v in feeds.items()}
            arrays.update({f"reference.{k}": v for k, v in ref.items()})
            arrays.update({f"variant.{k}": v for k, v in got.items()})
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"{graph.name}-batch{number}.npz"
            np.savez_compressed(path, **arrays)  # type: ignore[arg-type]  # mypy matches **arrays to allow_pickle: bool
            return path
        offset += size
    return None


def numeric_parity(ws: "Workspace", variant: Variant, family: "Family | None" = None,
                   dump_dir: Path | None = None) -> ParityResult:
    """Judge every graph of ``variant``; with ``dump_dir``, a failing graph's worst batch is
    saved there (inputs, reference and variant outputs) for reproduction."""
    model = ws.model(variant.model)
    family = family or ws.family(model)
    backend = ws.backend(variant, model)
    result = ParityResult(variant.id)
    for graph in family.graphs(model):
        batches = ws.parity_batches(model, family, graph)
        start = time.perf_counter()
        runner = ws.variant_runner(backend, model, family, graph, variant, [b[0] for b in batches])
        result.seconds[f"{graph.name}.load"] = time.perf_counter() - start
        result.artifacts.update(backend.artifacts(model, family, graph, variant))
        if getattr(runner, "replayed", False):
            result.replayed.append(graph.name)
        path = getattr(runner, "path", None)  # a runner of a file graph: lint the file
        if path:
            result.outputs.append(lint_result(graph.name, path))
        start = time.perf_counter()
        try:
            judged = run_graph_parity(runner, graph, batches, variant.precision, model.spec.tolerances)
            result.outputs += judged
            if dump_dir is not None:
                dumped = dump_failing_batch(runner, graph, judged, batches, dump_dir)
                if dumped is not None:
                    result.dumps[graph.name] = str(dumped)
        finally:
            runner.close()
        result.seconds[f"{graph.name}.run"] = time.perf_counter() - start
    return result
