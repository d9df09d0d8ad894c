"""Find the first node where a reduced-precision ONNX graph stops computing what FP32 computes.

Both graphs are copied with every intermediate float activation promoted to a graph output,
run once on the same feeds with ONNX Runtime optimisations off (so tensor names survive),
and each tensor present in both is compared with ``compare_arrays``. FP16 (onnxconverter-
common) and INT8 (``quantize_dynamic``) artifacts are derived from the FP32 graph and keep
its tensor names, so pairing is by name; candidate tensors that the conversion inserted
(casts, quantized copies, scales) have no FP32 counterpart and are listed as unmatched.
Only activations are compared — tensors that do not depend on a graph input (weights,
constants, folded shape arithmetic) are skipped: their rounding is not a computation.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from harness.core import Precision, Tolerance
from harness.debug.modules import layer_of, module_map
from harness.metrics.numeric import compare_arrays
from harness.metrics.registry import METRICS, Scope, tensor_metric_names
from harness.results.checks import CheckResult
from harness.runners.ort_runner import OrtGraphRunner

if TYPE_CHECKING:  # pragma: no cover
    import onnx

    from harness.debug.modules import ModuleMap

#: metrics compare_arrays reports for a float tensor; the ones a --tolerance may name (from the registry)
TENSOR_METRICS = tensor_metric_names()

#: per-tensor thresholds: the output gate of docs/tolerances.md applied to every activation,
#: so the first flagged tensor is the first place the graph would already fail the gate.
DEFAULT_BISECT_TOLERANCES: dict[Precision, dict[str, float]] = {
    p: {m: t for m, t in METRICS.defaults(p, Scope.NUMERIC).items() if m in TENSOR_METRICS} for p in Precision
}

#: |values| beyond FP16's largest finite value are mask constants (``finfo(float32).min`` fills of
#: attention masks). The FP16 conversion clamps them (onnxconverter-common: to -1e4, its
#: ``max_finite_val``), which changes nothing downstream — softmax gives 0 either way — but
#: reads as a 100 % error. Such an element agrees when the candidate has the same sign and
#: magnitude >= MASK_FLOOR; agreeing ones are left out of the metrics.
SATURATION = 65504.0
MASK_FLOOR = 5e3  # half the clamp: attention scores are added to the mask before softmax
#: |values| this large are mask fills (``finfo(float32).min``, -1e9, -inf), not computed activations: an
#: activation that overflows FP16 is a computed value between 65504 and this (T5-style FFNs: 1e5-1e6).
#: Only elements beyond it get the mask rule above; a computed 3e5 that FP16 turns into inf diverges.
MASK_FILL = 1e8

_FLOAT_TYPES = (1, 10, 11, 16)  # onnx.TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16


def bisect_tolerance(precision: Precision, overrides: Mapping[str, float] | None = None) -> Tolerance:
    """The default per-tensor rule for ``precision`` with ``overrides`` (metric -> threshold) merged in."""
    values = dict(DEFAULT_BISECT_TOLERANCES[precision])
    values.update(overrides or {})
    return as_tolerance(values)


def as_tolerance(values: Mapping[str, float] | Tolerance) -> Tolerance:
    if isinstance(values, Tolerance):
        return values
    unknown = [m for m in values if m not in TENSOR_METRICS]
    if unknown:
        raise ValueError(f"unknown tensor metric(s) {unknown}; valid: {', '.join(TENSOR_METRICS)}")
    return Tolerance(tuple(METRICS[m].check(v) for m, v in values.items()))


@dataclass(frozen=True)
class TensorResult:
    """One activation compared: where it comes from (in FP32 topological order) and how far off it is."""

    tensor: str
    node: str
    op_type: str
    order: int  # index of the producing node in the FP32 graph
    candidate_node: str  # the candidate graph's producer (INT8 renames MatMuls into Mul/Cast chains)
    candidate_op: str
    shape: tuple[int, ...]
    metrics: dict[str, float]
    failed: tuple[str, ...]  # "metric=value (must be op threshold)" per failing check
    inputs: tuple[str, ...]  # the producing node's inputs that were compared too
    #: largest finite |FP32 value| below MASK_FILL (> 65504: the tensor overflows FP16)
    ref_max: float = 0.0
    #: the PyTorch module the producing node came from (``harness.debug.modules``), "" unknown
    module: str = ""
    module_class: str = ""

    @property
    def diverges(self) -> bool:
        return bool(self.failed)

    @property
    def overflows_fp16(self) -> bool:
        return self.ref_max > SATURATION

    @property
    def error(self) -> float:
        return self.metrics.get("norm_max_abs", float("nan"))

    def as_dict(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "node": self.node, "op_type": self.op_type, "order": self.order,
                "candidate_node": self.candidate_node, "candidate_op": self.candidate_op,
                "shape": list(self.shape), "metrics": self.metrics, "failed": list(self.failed),
                "module": self.module, "module_class": self.module_class, "ref_max": self.ref_max}


@dataclass
class BisectResult:
    tolerance: Tolerance
    tensors: list[TensorResult] = field(default_factory=list)  # FP32 topological order
    unmatched: list[str] = field(default_factory=list)  # candidate activations with no FP32 tensor
    missing: list[str] = field(default_factory=list)  # FP32 activations the candidate lacks
    skipped: list[str] = field(default_factory=list)  # "name: why" (shape mismatch, untyped)
    modules: "ModuleMap | None" = None  # node -> PyTorch module, when known

    @property
    def first_divergent(self) -> TensorResult | None:
        return next((t for t in self.tensors if t.diverges), None)

    @property
    def first_overflow(self) -> TensorResult | None:
        """The first divergent tensor whose FP32 values leave FP16's range (|x| > 65504): where an
        FP16 graph turns into inf/NaN, which may come after a first, milder divergence."""
        return next((t for t in self.tensors if t.diverges and t.overflows_fp16), None)

    def by_name(self) -> dict[str, TensorResult]:
        return {t.tensor: t for t in self.tensors}

    def top(self, n: int = 10) -> list[TensorResult]:
        """The ``n`` tensors with the largest normalised max error (NaN/inf first)."""
        def key(t: TensorResult) -> float:
            e = t.error
            return float("inf") if e != e else e
        return sorted(self.tensors, key=key, reverse=True)[:n]

    def path(self, tensor: str | None = None) -> list[TensorResult]:
        """Error growth into ``tensor`` (default: the first divergent one): walk back from it
        through the worst compared input of each producer, returned input-first."""
        table = self.by_name()
        start = tensor or (self.first_divergent.tensor if self.first_divergent else None)
        chain: list[TensorResult] = []
        seen: set[str] = set()
        while start in table and start not in seen:
            current = table[start]
            seen.add(start)
            chain.append(current)
            feeding = [table[i] for i in current.inputs if i in table]
            start = max(feeding, key=lambda t: -1.0 if t.error != t.error else t.error).tensor if feeding else None
        return chain[::-1]

    def module_table(self, level: str = "module") -> list["ModuleRow"]:
        """Error aggregated by PyTorch module (``level`` "module": the module each node came
        from; "layer": its layer, :func:`harness.debug.modules.layer_of`), in topological order
        of each module's first tensor; ``growth`` is a module's output error over the previous
        module's, so the row where error jumps stands out."""
        groups: dict[str, list[TensorResult]] = {}
        for t in self.tensors:
            key = t.module if level == "module" else layer_of(t.module)
            groups.setdefault(key if t.module else "(unmapped)", []).append(t)
        first = self.first_divergent
        rows: list[ModuleRow] = []
        before: float | None = None
        for name, members in sorted(groups.items(), key=lambda kv: min(t.order for t in kv[1])):
            last = max(members, key=lambda t: t.order)
            worst = max(members, key=_error_key)
            growth = last.error / before if before and math.isfinite(before) and last.error == last.error else None
            classes = {t.module_class for t in members if t.module == name and t.module_class}
            rows.append(ModuleRow(name, classes.pop() if len(classes) == 1 else "", min(t.order for t in members),
                                  last.order, len(members), sum(t.diverges for t in members), worst.error,
                                  worst.tensor, last.error, last.tensor, growth,
                                  first is not None and any(t is first for t in members),
                                  max(t.ref_max for t in members)))
            before = last.error
        return rows

    def as_dict(self, top: int = 10) -> dict[str, Any]:
        first = self.first_divergent
        return {"schema": "harness.bisect/1", "tolerance": self.tolerance.as_dict(),
                "modules": self.modules.as_dict() if self.modules is not None else None,
                "module_table": [r.as_dict() for r in self.module_table("module")],
                "layer_table": [r.as_dict() for r in self.module_table("layer")],
                "first_divergent": first.as_dict() if first else None,
                "first_overflow": self.first_overflow.as_dict() if self.first_overflow else None,
                "path": [t.as_dict() for t in self.path()] if first else [],
                "top": [t.as_dict() for t in self.top(top)],
                "counts": {"compared": len(self.tensors), "divergent": sum(t.diverges for t in self.tensors),
                           "unmatched": len(self.unmatched), "missing": len(self.missing),
                           "skipped": len(self.skipped)},
                "tensors": [t.as_dict() for t in self.tensors], "unmatched": self.unmatched,
                "missing": self.missing, "skipped": self.skipped}


def _error_key(t: TensorResult) -> float:
    e = t.error
    return float("inf") if e != e else e


@dataclass(frozen=True)
class ModuleRow:
    """One module (or layer) of the error-growth table."""

    module: str
    module_class: str
    first_order: int
    last_order: int
    tensors: int
    divergent: int
    max_error: float  # the worst norm_max_abs of its tensors
    max_tensor: str
    output_error: float  # norm_max_abs of its last tensor (topological order): what it hands on
    output_tensor: str
    growth: float | None  # output_error / the previous row's output_error
    first_divergent: bool  # holds the first divergent tensor
    ref_max: float  # largest finite |FP32 value| of its tensors (> 65504: overflows FP16)

    def as_dict(self) -> dict[str, Any]:
        return {"module": self.module, "module_class": self.module_class, "first_order": self.first_order,
                "last_order": self.last_order, "tensors": self.tensors, "divergent": self.divergent,
                "max_error": self.max_error, "max_tensor": self.max_tensor, "output_error": self.output_error,
                "output_tensor": self.output_tensor, "growth": self.growth, "first_divergent": self.first_divergent,
                "ref_max": self.ref_max}


@dataclass(frozen=True)
class _Producer:
    node: str
    op_type: str
    order: int
    inputs: tuple[str, ...]


@dataclass
class _Instrumented:
    """A graph copy whose outputs are all its float activations."""

    path: Path
    producers: dict[str, _Producer]
    activations: list[str]  # in topological order
    untyped: list[str]


def _activations(graph: onnx.GraphProto) -> tuple[dict[str, _Producer], list[str]]:
    """Producers of every node output, and the outputs that depend on a graph input."""
    initializers = {i.name for i in graph.initializer}
    live = {i.name for i in graph.input if i.name not in initializers}
    producers: dict[str, _Producer] = {}
    order: list[str] = []
    for index, node in enumerate(graph.node):
        name = node.name or f"{node.op_type}_{index}"
        depends = any(i in live for i in node.input if i)
        for out in node.output:
            if not out:
                continue
            producers[out] = _Producer(name, node.op_type, index, tuple(i for i in node.input if i))
            if depends:
                live.add(out)
                order.append(out)
    return producers, order


def instrument(model_path: str | Path, directory: Path) -> _Instrumented:
    """Write a copy of the model to ``directory`` that also outputs every float activation."""
    import onnx
    from onnx import helper, shape_inference
    from onnx.external_data_helper import load_external_data_for_model

    # Shapes are inferred on the graph without its weights (an in-memory ``infer_shapes`` of a
    # model over 2 GB fails: it serialises one protobuf); the weights, external or not, are read
    # in afterwards and the copy is saved with external data.
    model = onnx.load(str(model_path), load_external_data=False)
    producers, activations = _activations(model.graph)
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - inference is a help, not a requirement
        inferred = model
    load_external_data_for_model(model, str(Path(model_path).parent))
    types = {v.name: v.type.tensor_type.elem_type for v in
             list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input)}
    existing = {o.name for o in model.graph.output}
    float_acts, untyped = [], []
    for name in activations:
        elem = types.get(name)
        if elem is None or elem == 0:
            untyped.append(name)
        elif elem in _FLOAT_TYPES:
            float_acts.append(name)
            if name not in existing:
                model.graph.output.append(helper.make_tensor_value_info(name, elem, None))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "instrumented.onnx"
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location="instrumented.onnx.data", size_threshold=1 << 20)
    return _Instrumented(path, producers, float_acts, untyped)


def run_all(path: Path, feeds: Mapping[str, np.ndarray], provider: str = "CPUExecutionProvider",
            threads: int | None = 1) -> dict[str, np.ndarray]:
    """Every output of the instrumented copy (FP32 numpy), graph optimisations off so names survive."""
    runner = OrtGraphRunner(str(path), provider, intra_op_threads=threads, inter_op_threads=1,
                            optimization="disable")
    try:
        wanted = {n: v for n, v in feeds.items() if n in runner.input_names}
        missing = [n for n in runner.input_names if n not in feeds]
        if missing:
            raise ValueError(f"{path.name}: no feed for graph input(s) {missing}")
        return runner.run(wanted)
    finally:
        runner.close()


def _judge(tolerance: Tolerance, metrics: Mapping[str, float]) -> tuple[str, ...]:
    return tuple(f"{c.metric}={CheckResult(c.metric, metrics[c.metric], c.symbol, c.threshold).text().must_be()}"
                 for c in tolerance.checks if c.metric in metrics and not c.passes(metrics[c.metric]))


def _unsaturated(ref: np.ndarray, got: np.ndarray) -> np.ndarray | None:
    """Mask of the elements to compare, or None when no element is a saturated mask constant."""
    with np.errstate(invalid="ignore"):
        huge = np.abs(ref) >= MASK_FILL
        if not huge.any():
            return None
        agree = huge & (np.sign(ref) == np.sign(got)) & (np.abs(got) >= MASK_FLOOR)
    keep: np.ndarray = ~agree
    return keep


def _ref_max(ref: np.ndarray) -> float:
    """Largest finite |value| below MASK_FILL (0.0 for an empty or all-fill tensor)."""
    with np.errstate(invalid="ignore"):
        magnitude = np.abs(ref.astype(np.float64, copy=False))
        usable = magnitude[np.isfinite(magnitude) & (magnitude < MASK_FILL)]
    return float(usable.max()) if usable.size else 0.0


def bisect_graph(fp32_path: str | Path, candidate_path: str | Path, feeds: Mapping[str, np.ndarray],
                 tolerance: Mapping[str, float] | Tolerance, *, provider: str = "CPUExecutionProvider",
                 threads: int | None = 1, modules: "ModuleMap | None" = None) -> BisectResult:
    """Compare every activation of ``candidate_path`` with the same-named one of ``fp32_path``
    on ``feeds``; ``tolerance`` maps metric -> threshold (errors ``<=``, cosine ``>=``).
    Works on any pair of ONNX files whose tensor names correspond, not only harness builds.
    ``modules`` (``harness.debug.modules.module_map`` of the FP32 file) names each FP32 node's
    PyTorch module; without it the scope names / metadata of the file are read, unvalidated."""
    if modules is None:
        modules = module_map(fp32_path)
    tol = as_tolerance(tolerance)
    with tempfile.TemporaryDirectory(prefix="harness-bisect-") as tmp:
        ref_graph = instrument(fp32_path, Path(tmp) / "reference")
        cand_graph = instrument(candidate_path, Path(tmp) / "candidate")
        ref_out = run_all(ref_graph.path, feeds, provider, threads)
        cand_out = run_all(cand_graph.path, feeds, provider, threads)
    result = BisectResult(tol, modules=modules)
    ref_names = set(ref_graph.activations)
    cand_names = set(cand_graph.activations)
    result.unmatched = [n for n in cand_graph.activations if n not in ref_names]
    result.missing = [n for n in ref_graph.activations if n not in cand_names]
    result.skipped = [f"{n}: no inferred type" for n in ref_graph.untyped]
    for name in ref_graph.activations:
        if name not in cand_names:
            continue
        ref, got = ref_out[name], cand_out[name]
        if ref.shape != got.shape:
            result.skipped.append(f"{name}: shape {ref.shape} vs {got.shape}")
            continue
        keep = _unsaturated(ref, got)
        metrics = compare_arrays(ref, got, valid_mask=keep).metrics if keep is not None else \
            compare_arrays(ref, got).metrics
        p, c = ref_graph.producers[name], cand_graph.producers[name]
        where = modules.of(p.node)
        result.tensors.append(TensorResult(
            name, p.node, p.op_type, p.order, c.node, c.op_type, tuple(ref.shape), metrics, _judge(tol, metrics),
            tuple(i for i in p.inputs if i in ref_names), _ref_max(ref),
            (where.path or "(model)") if where else "", where.cls if where else ""))
    return result
