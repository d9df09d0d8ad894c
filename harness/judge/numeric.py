"""Numeric parity of one variant against the PyTorch FP32 reference.

Every graph of the model runs on every corpus batch (padded, mixed lengths); valid
positions of each output are gathered across batches and compared in one go, so a metric
is over the whole corpus, and the worst element is reported in corpus coordinates
(global batch row, position, index). Used by the suites and by ``harness check``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.core import Check, Precision, Tolerance, Variant
from harness.core.phases import phase
from harness.families import family_for
from harness.families.shaped_feeds import max_positions, shapeable, shaped_feeds
from harness.judge.tolerances import scope_tolerance, tolerance_for
from harness.metrics.numeric import Location, compare_arrays
from harness.metrics.registry import METRICS
from harness.results.checks import CheckResult, GateFailure, raise_failures
from harness.results.record import MetricKey
from harness.runners import backends
from harness.runners.base import GraphRef
from harness.runners.trt_profile import TensorRTSettings

if TYPE_CHECKING:  # pragma: no cover
    from harness.families import Family, GraphSpec
    from harness.families.base import DerivedOutput
    from harness.judge.workspace import Workspace
    from harness.results.coverage import Coverage
    from harness.runners.base import GraphRunner
    from harness.zoo.loading import LoadedModel

#: one parity batch: feeds, reference outputs, valid-position masks (None: every position)
Batch = tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray], Mapping[str, "np.ndarray | None"]]


__all__ = ["CheckResult", "Failure", "GateFailure", "OutputResult", "ParityResult", "SideOutputs"]


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
class SideOutputs:
    """What the side-output stages wrote, by graph: read by the record stage."""

    dumps: dict[str, str] = field(default_factory=dict)  # graph -> .npz of its worst failing batch
    bundles: dict[str, str] = field(default_factory=dict)  # graph -> its repro bundle directory
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)  # graph -> profiling summary


@dataclass
class ParityResult:
    variant: str
    outputs: list[OutputResult] = field(default_factory=list)
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    #: every shape tried: {"graph", "probe" ("corpus" or what the probe varies), "shapes": input -> dims}
    shapes: list[dict[str, Any]] = field(default_factory=list)
    replayed: list[str] = field(default_factory=list)  # graphs whose outputs came from the output cache
    #: what was gated of the head's outputs (``harness.judge.coverage``); None: not accounted
    coverage: Coverage | None = None
    #: what the side-output stages wrote (failing-batch dumps, repro bundles, profiling summaries)
    side: SideOutputs = field(default_factory=SideOutputs)

    @property
    def failures(self) -> list[Failure]:
        return [f for o in self.outputs for f in o.failures()]

    def coverage_problem(self) -> str | None:
        return self.coverage.problem() if self.coverage is not None else None

    @property
    def passed(self) -> bool:
        return not self.failures and self.coverage_problem() is None

    def metrics(self) -> dict[str, float]:
        return {str(MetricKey(k, o.graph, o.output)): v for o in self.outputs for k, v in o.metrics.items()}

    def thresholds(self) -> dict[str, dict[str, Any]]:
        return {str(MetricKey(c.metric, o.graph, o.output)): {"threshold": c.threshold, "op": c.symbol}
                for o in self.outputs if o.tolerance for c in o.tolerance.checks if c.metric in o.metrics}

    def worst(self) -> dict[str, str]:
        return {f"{o.graph}.{o.output}": o.worst.describe(o.axis_names) for o in self.outputs if o.worst}

    def assert_ok(self) -> None:
        problem = self.coverage_problem()
        raise_failures(self.variant, [f.message() for f in self.failures] + ([problem] if problem else []))


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
                     output_map: Mapping[str, str] | None = None,
                     probes: Sequence[tuple[str, Batch]] = (),
                     shapes: list[dict[str, Any]] | None = None) -> list[OutputResult]:
    """Compare ``runner`` on (feeds, reference outputs, masks) batches, then on the shape
    ``probes`` (labelled batches of other shapes, judged with the same metrics); ``output_map``
    maps reference output names to the runner's (for foreign artifacts). Every shape tried is
    appended to ``shapes``; a probe the runner cannot run is a gated ``<graph>/shapes`` failure
    (``shape_failures``) naming the probe, its shapes and the runtime's first error line."""
    output_map = dict(output_map or {n: n for n in graph.output_names})
    collectors = {name: _Collector() for name in output_map}
    # outputs a deployment derives from these (a QA head's answer span), over the corpus rows; one
    # whose inputs the runner does not return is left out, and coverage counts it missing
    derived: dict[str, tuple[DerivedOutput, list[np.ndarray], list[np.ndarray]]] = {
        d.name: (d, [], []) for d in graph.derived if all(n in output_map for n in d.needs)}
    offset = 0
    labelled = [("corpus", b) for b in batches] + list(probes)
    broken: list[str] = []
    for label, (feeds, ref, masks) in labelled:
        if shapes is not None:
            shapes.append({"graph": graph.name, "probe": label, "shapes": {k: list(v.shape) for k, v in feeds.items()}})
        try:
            with phase("variant"):
                got = runner.run(feeds)
        except Exception as exc:
            if label == "corpus":
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if len(first) > 260:  # ORT's line: the node first, the reason ("Shape mismatch ...") last
                first = f"{first[:110]} ... {first[-150:]}"
            broken.append(f"{label} ({describe_shapes(feeds)}): {first}")
            continue
        with phase("metrics"):
            for name, theirs in output_map.items():
                collectors[name].add(ref[name], got[theirs], masks.get(name), offset)
            if label == "corpus":
                for d, refs, gots in derived.values():
                    refs.append(d.rows(feeds, ref))
                    gots.append(d.rows(feeds, {n: got[output_map[n]] for n in d.needs}))
        offset += next(iter(feeds.values())).shape[0]
    with phase("metrics"):
        results = _results(graph, collectors, precision, overrides)
        results += [_derived_result(graph, d, refs, gots, precision, overrides) for d, refs, gots in derived.values()]
    if probes:  # shape coverage: every probe must run (its numbers are judged with the corpus's above)
        coverage = OutputResult(graph.name, "shapes", {"shape_failures": float(len(broken))}, None, (),
                                Tolerance((lint_gate("shape_failures"),)), len(probes))
        coverage.where = "; ".join(broken) or "n/a"
        results.append(coverage)
    return results


def _results(graph: "GraphSpec", collectors: Mapping[str, "_Collector"], precision: Precision,
             overrides: Mapping[str, Mapping[str, float]] | None) -> list[OutputResult]:
    results = []
    for name, col in collectors.items():
        is_logits = name in graph.logits_outputs
        metrics, worst, n = col.compare(is_logits)
        tol = tolerance_for(precision, is_logits=is_logits, overrides=overrides) if graph.is_gated(name) else None
        results.append(OutputResult(graph.name, name, metrics, worst, axis_names(col.ndim, is_logits), tol, n))
    return results


def _derived_result(graph: "GraphSpec", derived: "DerivedOutput", refs: Sequence[np.ndarray],
                    gots: Sequence[np.ndarray], precision: Precision,
                    overrides: Mapping[str, Mapping[str, float]] | None) -> OutputResult:
    """A derived output's rows (the reference's and the variant's, corpus order) judged as one
    more gated output of ``graph``, with the metrics of its scope."""
    ref, got = np.concatenate(refs), np.concatenate(gots)
    metrics, n, where = derived.score(ref, got)
    result = OutputResult(graph.name, derived.name, metrics, None, ("batch",),
                          scope_tolerance(derived.scope, precision, overrides), n)
    result.where = where
    return result


def lint_gate(name: str, precision: Precision = Precision.FP32,
               overrides: Mapping[str, Mapping[str, float]] | None = None) -> Check:
    """An artifact lint count's gate: as declared (the same threshold at every precision: 0),
    or the user's threshold for it at ``precision`` (``--tolerance tied_axes=1``)."""
    given = (overrides or {}).get(precision.value, {}).get(name)
    if given is not None:
        return METRICS[name].check(float(given))
    check = METRICS[name].default_check(Precision.FP32)
    assert check is not None, f"{name} declares a default threshold"
    return check


def _absent_lengths(graph: "GraphSpec", input_map: Mapping[str, str] | None) -> set[str]:
    """Axis names only the inputs a file does not take carry (a cacheless file's past length):
    those lengths are zero for it, so ``past_sequence + sequence`` is ``sequence``."""
    if input_map is None:
        return set()
    taken = {str(a) for n in graph.input_names if n in input_map for a in graph.dynamic_axes.get(n, {}).values()}
    missing = {str(a) for n in graph.input_names if n not in input_map for a in graph.dynamic_axes.get(n, {}).values()}
    return missing - taken


def _without(axis: str, absent: set[str]) -> str:
    parts = [p.strip() for p in axis.split("+")]
    kept = [p for p in parts if p not in absent]
    return " + ".join(kept) if kept else axis


def lint_result(graph_name: str, path: str, graph: "GraphSpec | None" = None,
                input_map: Mapping[str, str] | None = None, precision: Precision = Precision.FP32,
                overrides: Mapping[str, Mapping[str, float]] | None = None) -> OutputResult:
    """The artifact's static checks as a gated pseudo-output (``<graph>/artifact``): training-mode
    ops, and -- given the reference ``graph`` -- dynamic axes the file ties although the graph
    declares them as different lengths (``input_map``: reference input -> the file's name; a
    length only untaken inputs carry is zero, so a cacheless decoder's one ``seq_len`` for ids and
    mask is right). ``overrides``: the user's thresholds, by precision."""
    import onnx

    from harness.export.lint import tied_axes, training_mode_nodes

    proto = onnx.load(str(path), load_external_data=False)
    nodes = training_mode_nodes(proto)
    where = ", ".join(nodes[:5]) + (" ..." if len(nodes) > 5 else "") if nodes else ""
    metrics = {"training_mode_ops": float(len(nodes))}
    checks = [lint_gate("training_mode_ops", precision, overrides)]
    if graph is not None:
        absent = _absent_lengths(graph, input_map)
        declared = {n: {i: _without(str(a), absent) for i, a in graph.dynamic_axes.get(n, {}).items()}
                    for n in graph.input_names}
        tied = tied_axes(proto, declared, dict(input_map or {}))
        metrics["tied_axes"] = float(len(tied))
        checks.append(lint_gate("tied_axes", precision, overrides))
        if tied:
            where = "; ".join(filter(None, [where, "one dynamic axis for different lengths: " + "; ".join(tied)]))
    result = OutputResult(graph_name, "artifact", metrics, None, (), Tolerance(tuple(checks)), 1)
    result.where = where or "n/a"
    return result


def probe_batches(ws: "Workspace", model: "LoadedModel", family: "Family", graph: "GraphSpec",
                  base: Mapping[str, np.ndarray], variant: Variant | None = None) -> list[tuple[str, Batch]]:
    """Shape probes, each with its memoised FP32 reference and masks: the family's (target length
    != source length, other past lengths...) derived from one batch's feeds, then a sweep of a
    token-fed graph's declared dynamic range (:func:`sweep_shapes`)."""
    probes = list(family.shape_probes(model, graph, base))
    texts = ws.texts(model)
    for label, batch, seq in sweep_shapes(ws, model, graph, variant):
        try:
            probes.append((label, shaped_feeds(model, family, graph, texts, batch, seq)))
        except ValueError:  # a length the tokenizer cannot fill exactly: not a shape of this model
            continue
    # through the reference cache (one entry for all of a graph's probes): a warm rerun loads no module
    refs = ws.refs.references_for(model, family, graph, [dict(feeds) for _, feeds in probes]) if probes else []
    return [(label, (feeds, ref, family.valid_masks(graph, feeds, ref))) for (label, feeds), ref in zip(probes, refs)]


def family_entry(model: "LoadedModel") -> str:
    """The name of the model's entry graph (the one fed by token ids)."""
    return str(family_for(model.family).graphs(model)[0].name)


def sweep_shapes(ws: "Workspace", model: "LoadedModel", graph: "GraphSpec",
                 variant: Variant | None = None) -> list[tuple[str, int, int]]:
    """(label, batch, sequence) across a token-fed graph's dynamic range: batch 1 at the shortest
    sequence the tokenizer can fill (its special tokens + 1) and at a short one, the largest batch
    at the longest sequence (``--trt-max-batch`` or the batch size x ``--trt-max-seq``, capped by the
    model's positions), and a declared TensorRT profile's min / opt / max of ``input_ids``. The
    corpus batches cover the lengths in between."""
    entry = family_entry(model)
    if graph.name != entry or not shapeable(graph) or "input_ids" not in graph.dynamic_axes:
        return []  # the entry graph only: the others are fed by its outputs (the family's probes cover them)
    limit = max_positions(model) or 10**9
    longest = min(ws.options.settings.trt_max_seq, limit)
    widest = ws.options.settings.trt_max_batch or ws.options.settings.batch_size
    try:
        shortest = len(model.tokenizer("")["input_ids"]) + 1
    except Exception:  # noqa: BLE001 - a tokenizer that cannot encode '': the smallest probe is 2
        shortest = 2
    out = [(f"batch 1 x sequence {shortest} (shortest)", 1, shortest), ("batch 1 x sequence 8", 1, 8),
           (f"batch {widest} x sequence {longest} (longest)", widest, longest)]
    if variant is not None:
        declared = ws.runtime_for(variant).of(TensorRTSettings).trt_profile
        rng = declared.get(f"{graph.name}.input_ids") or declared.get("input_ids")
        if rng is not None and len(rng.max) == 2:
            out += [(f"TensorRT profile {what} {dims[0]}x{dims[1]}", dims[0], dims[1])
                    for what, dims in (("min", rng.min), ("opt", rng.opt), ("max", rng.max)) if dims[1] <= limit]
    seen: set[tuple[int, int]] = set()
    unique = []
    for label, batch, seq in out:
        if (batch, seq) not in seen and 1 <= seq <= limit and batch >= 1:
            seen.add((batch, seq))
            unique.append((label, batch, seq))
    return unique


def describe_shapes(feeds: Mapping[str, np.ndarray]) -> str:
    return ", ".join(f"{k} {'x'.join(str(d) for d in v.shape)}" for k, v in feeds.items())


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


#: suffix of the outputs judged against the same file with graph optimisations disabled
UNFUSED_SUFFIX = "_vs_unfused"


def unfused_twin(ws: "Workspace", variant: Variant) -> Variant | None:
    """The same variant with ONNX Runtime's graph optimisations disabled, when the run makes
    ``graph_optimization`` a matrix axis that includes ``disabled`` and this case fuses (its
    level is another one): fused kernels (attention, GELU, LayerNorm, MatMul+Add) are where an
    optimisation level changes numbers, so the fused graph is judged against the unfused one
    as well as against PyTorch -- a fusion bug then names itself instead of hiding inside the
    PyTorch envelope."""
    levels = ws.options.runtime_axes.get("graph_optimization") or []
    if "disabled" not in levels:
        return None

    backend = backends().get(variant.backend)
    if backend is None or "graph_optimization" not in backend.runtime_settings:
        return None
    if ws.runtime_for(variant).value("graph_optimization") == "disabled":
        return None
    axes = tuple((k, v) for k, v in variant.runtime if k != "graph_optimization") + (("graph_optimization", "disabled"),)
    return Variant(variant.model, variant.precision, variant.provider, axes)


def against_unfused(ws: "Workspace", ref: GraphRef, runner: "GraphRunner", twin: Variant,
                    batches: Sequence[Batch]) -> list[OutputResult]:
    """``runner``'s outputs (``ref``'s graph) judged against ``twin``'s (the unfused session of the
    same file) on the corpus batches, with the precision's thresholds: outputs ``<name>_vs_unfused``."""
    model, graph, variant = ref.model, ref.graph, ref.variant
    twin_backend = ws.backend(twin, model)
    twin_runner = ws.refs.variant_runner(twin_backend, GraphRef(model, ref.family, graph, twin), [dict(b[0]) for b in batches])
    try:
        with phase("variant"):
            twin_batches = [(feeds, dict(twin_runner.run(feeds)), masks) for feeds, _, masks in batches]
    finally:
        twin_runner.close()
    judged = run_graph_parity(runner, graph, twin_batches, variant.precision, model.spec.tolerances)
    return [replace(o, output=f"{o.output}{UNFUSED_SUFFIX}") for o in judged]
