"""``harness bisect --suggest``: the smallest set of nodes to keep in FP32 that makes the case pass.

FP16: onnxconverter-common's ``node_block_list`` (the option ``fp16_node_block_list``); INT8:
onnxruntime's ``nodes_to_exclude`` (``int8_nodes_to_exclude``). Every trial is a real fix:
the variant is rebuilt by the harness's own artifact builder (the node list is part of the
artifact's cache key) and re-judged by ``harness.case.pipeline.numeric_parity`` on the run's
corpus with the thresholds ``harness run`` applies (the model's own tolerances, a
``harness.toml`` in the working directory, plus ``--target`` overrides), so a suggestion that
passes here passes there.

The search (bounded by ``max_rebuilds``, each step reported):

1. **candidates** from the bisect of one batch, most suspicious first. FP16: nodes whose FP32
   value leaves FP16's range (an overflow: kept FP32 together with the consumers its huge
   value flows into, up to the node that brings it back in range), then the first divergent
   node, the error path into it, the worst tensors. INT8: the nodes the quantiser replaced,
   by the error each *adds* over its worst input (where quantisation error is born), the first
   divergent one first.
2. **grow**: judge the first 1, 2, 4, 8, ... candidates until the case passes;
3. **prune**: drop each node of the passing set in turn (last added first) and keep the drop
   when the case still passes -- a 1-minimal set within the budget (``_prune`` says why not ddmin).

When nothing passes within the budget the best set tried (fewest failing checks, then the
smallest worst-metric miss) is reported with its improvement, and the exit code says so.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from harness.core import Precision, Variant
from harness.debug.bisect import BisectResult, TensorResult
from harness.runners import parse_provider
from harness.settings.resolve import build_options, merge_tolerances

if TYPE_CHECKING:  # pragma: no cover
    from harness.judge.numeric import ParityResult

#: the option (and ModelSpec / ExportSettings field) that applies a fix, per precision
FIX_OPTION = {Precision.FP16: "fp16_node_block_list", Precision.INT8: "int8_nodes_to_exclude",
              Precision.INT8_STATIC: "int8_nodes_to_exclude"}
#: ONNX ops onnxruntime's quantisers replace (QLinear / Integer kernels, quantised weights)
QUANTISABLE = frozenset({"MatMul", "Gemm", "Gather", "Conv", "Attention", "EmbedLayerNormalization", "LSTM"})
MAX_CANDIDATES = 48


@dataclass
class Trial:
    """One rebuilt-and-judged variant."""

    step: str  # "before", "grow", "prune"
    nodes: tuple[str, ...]
    passed: bool
    failures: list[str]
    metrics: dict[str, float]
    seconds: float = 0.0
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)  # gated metric -> {threshold, op}

    @property
    def score(self) -> tuple[int, float]:
        """Lower is better: failing checks, then how far the worst one misses (relative); a set
        that could not be built or run is worst of all."""
        if any(f.startswith("error:") for f in self.failures):
            return (1 << 30, math.inf)
        return (len(self.failures), _miss(self.failures))

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "nodes": list(self.nodes), "passed": self.passed, "failures": self.failures,
                "metrics": self.metrics, "seconds": round(self.seconds, 2)}


def _miss(failures: Sequence[str]) -> float:
    """A crude size of the worst miss, from the failure lines' numbers (inf when NaN/inf)."""
    worst = 0.0
    for line in failures:
        numbers = re.findall(r"(-?(?:inf|nan|\d[\d.e+-]*))", line.lower())
        if len(numbers) < 2:
            continue
        try:
            value, threshold = float(numbers[0]), float(numbers[1])
        except ValueError:
            continue
        gap = abs(value - threshold) / max(abs(threshold), 1e-12)
        worst = max(worst, gap if math.isfinite(gap) else math.inf)
    return worst


@dataclass
class Suggestion:
    precision: Precision
    option: str
    candidates: list[str]
    before: Trial
    trials: list[Trial] = field(default_factory=list)
    best: Trial | None = None  # the passing set after pruning, else the best set tried
    budget: int = 0
    #: every node of ``best`` was tried without and was needed (the prune finished within the budget)
    minimal: bool = False

    @property
    def fixed(self) -> bool:
        return self.best is not None and self.best.passed

    @property
    def rebuilds(self) -> int:
        return len(self.trials)

    def as_dict(self) -> dict[str, Any]:
        return {"schema": "harness.suggest/1", "precision": self.precision.value, "option": self.option,
                "fixed": self.fixed, "minimal": self.minimal, "budget": self.budget, "rebuilds": self.rebuilds,
                "candidates": self.candidates, "before": self.before.as_dict(),
                "after": self.best.as_dict() if self.best else None, "trials": [t.as_dict() for t in self.trials]}


# -- candidates ----------------------------------------------------------------------------------------
def _dedupe(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(n for n in names if n))


def fp16_candidates(result: BisectResult) -> list[str]:
    """Overflowing nodes and the consumers their out-of-range values reach, in topological
    order; then the first divergent node, the path into it (nearest first) and the worst."""
    table = result.by_name()
    overflow: list[TensorResult] = []
    for t in result.tensors:  # topological order
        if not t.diverges:
            continue
        fed = any(table[i].overflows_fp16 and table[i].diverges for i in t.inputs if i in table)
        if t.overflows_fp16 or fed:
            overflow.append(t)
    first = result.first_divergent
    path = list(reversed(result.path()))
    worst = [t for t in result.top(MAX_CANDIDATES) if t.diverges]
    return _dedupe([t.node for t in overflow] + ([first.node] if first else []) + [t.node for t in path]
                   + [t.node for t in worst])[:MAX_CANDIDATES]


def int8_candidates(result: BisectResult) -> list[str]:
    """Nodes the quantiser replaced (another producer in the INT8 graph, or a quantisable op),
    ranked by the error they add over their worst compared input; the first divergent one first."""
    table = result.by_name()

    def added(t: TensorResult) -> float:
        inputs = [table[i].error for i in t.inputs if i in table and table[i].error == table[i].error]
        e = t.error if t.error == t.error else math.inf
        return e - max(inputs, default=0.0)

    quantised = [t for t in result.tensors if t.candidate_node != t.node or t.op_type in QUANTISABLE]
    ranked = sorted(quantised, key=added, reverse=True)
    first = result.first_divergent
    lead = [first.node] if first is not None and first in quantised else []
    return _dedupe(lead + [t.node for t in ranked if added(t) > 0])[:MAX_CANDIDATES]


def candidates_for(precision: Precision, result: BisectResult) -> list[str]:
    return fp16_candidates(result) if precision is Precision.FP16 else int8_candidates(result)


# -- the search ------------------------------------------------------------------------------------------
def search(precision: Precision, candidates: Sequence[str], judge: Callable[[tuple[str, ...], str], Trial],
           max_rebuilds: int, report: Callable[[Trial, int], None] | None = None) -> Suggestion:
    """Grow a prefix of ``candidates`` (1, 2, 4, ...) until ``judge`` passes, then prune it to a
    1-minimal set; at most ``max_rebuilds`` judged rebuilds after the baseline."""
    before = judge((), "before")
    out = Suggestion(precision, FIX_OPTION[precision], list(candidates), before, budget=max_rebuilds)
    if report:
        report(before, 0)
    if before.passed:
        out.best = before
        return out

    def attempt(nodes: tuple[str, ...], step: str) -> Trial:
        trial = judge(nodes, step)
        out.trials.append(trial)
        if report:
            report(trial, len(out.trials))
        return trial

    best: Trial | None = None
    found: list[str] | None = None
    k = 1
    while candidates and out.rebuilds < max_rebuilds:
        trial = attempt(tuple(candidates[:k]), "grow")
        if best is None or trial.score < best.score:
            best = trial
        if trial.passed:
            found = list(candidates[:k])
            break
        if k >= len(candidates):
            break
        k = min(2 * k, len(candidates))
    if found is not None:
        best, out.minimal = _prune(found, out.trials[-1], attempt, lambda: out.rebuilds < max_rebuilds)
    out.best = best
    return out


def _prune(found: list[str], passing: Trial, attempt: Callable[[tuple[str, ...], str], Trial],
           budget_left: Callable[[], bool]) -> tuple[Trial, bool]:
    """Drop each node of the passing set in turn, the last-added (least suspicious) first, keeping
    every drop that still passes. One linear pass: at most ``len(found)`` rebuilds, and the
    result is 1-minimal when the fix is monotone (a node needed in a larger set is needed in a
    smaller one). Measured against delta debugging (ddmin on complements) on 16-node sets: ddmin
    took 55 / 17 / 29 rebuilds where 6 / 2 / 11 nodes were needed, this pass 16 each -- chunk
    removals that fail cost as much as single ones. Returns the smallest passing trial and
    whether the pass finished (False when the budget ran out first)."""
    best = passing
    for node in list(reversed(found)):
        if len(found) == 1:
            break
        if not budget_left():
            return best, False
        trial = attempt(tuple(n for n in found if n != node), "prune")
        if trial.passed:
            found.remove(node)
            best = trial
    return best, True


# -- judging a fix through the harness ---------------------------------------------------------------------
def parity_trial(result: "ParityResult", nodes: tuple[str, ...], step: str, seconds: float) -> Trial:
    failures = [f.message() for f in result.failures]
    return Trial(step, nodes, result.passed, failures, dict(result.metrics()), seconds, result.thresholds())


def harness_judge(model_name: str, precision: Precision, provider: str, base_given: Mapping[str, Any],
                  targets: Mapping[str, float]) -> Callable[[tuple[str, ...], str], Trial]:
    """A judge that rebuilds and re-judges ``model_name`` at ``precision`` with extra nodes kept
    FP32, exactly as ``harness run`` would with the suggested ``[models.<name>]`` lines: options
    from ``base_given`` (and a harness.toml found as ``harness run`` finds it), the node list and
    ``targets`` (metric -> threshold) added to the model's own spec in the run's catalog."""
    from harness.case.pipeline import numeric_parity
    from harness.judge.workspace import Workspace

    option = FIX_OPTION[precision]

    def judge(nodes: tuple[str, ...], step: str) -> Trial:
        start = time.perf_counter()
        options = build_options({**base_given, "models": [model_name], "precisions": [precision.value],
                                 "providers": [provider]})
        catalog = options.catalog
        assert catalog is not None  # build_options always makes one
        spec = catalog.resolve(model_name)
        changes: dict[str, Any] = {option: tuple(dict.fromkeys((*getattr(spec, option), *nodes)))}
        if targets:
            changes["tolerances"] = merge_tolerances(spec.tolerances, {precision.value: dict(targets)})
        # under the spec's own name: a local directory (``./my-model``) is judged as the suggested
        # ``[models.my-model] path = "./my-model"`` table makes ``harness run --models my-model`` judge it
        catalog.add(replace(spec, **changes))
        ws = Workspace(replace(options, models=[spec.name]))
        variant = Variant(spec.name, precision, parse_provider(provider))
        try:
            parity = numeric_parity(ws, variant)
        except Exception as exc:  # noqa: BLE001 - a set the converter or runtime cannot take is a failed trial
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return Trial(step, nodes, False, [f"error: {type(exc).__name__}: {first[:300]}"], {},
                         time.perf_counter() - start)
        return parity_trial(parity, nodes, step, time.perf_counter() - start)

    return judge


def toml_snippet(model_name: str, option: str, nodes: Sequence[str], precision: Precision,
                 targets: Mapping[str, float], path: str | None = None, *, verified: bool = False) -> str:
    """The ``harness.toml`` lines that apply the fix (and the tightened targets) to this model.
    The header says "verified" only when ``verified`` (the variant rebuilt with these nodes
    passed, ``Suggestion.fixed``); otherwise it says the set is the best tried and still fails,
    as ``suggest.json``'s ``"fixed": false`` does (the two used to disagree)."""
    what = "kept in FP32 by the FP16 conversion" if option.startswith("fp16") else "left unquantised by INT8"
    header = (f"# nodes {what}: found and verified by `harness bisect --suggest` (the rebuilt variant passed)"
              if verified else
              f"# nodes {what}: NOT verified: the best set `harness bisect --suggest` tried, and the rebuilt "
              "variant still FAILS (suggest.json: \"fixed\": false); a starting point, not a fix")
    lines = [header, f"[models.{model_name}]"]
    if path is not None:
        lines.append(f"path = {json.dumps(path)}")
    lines.append(f"{option} = [")
    lines += [f"  {json.dumps(n)}," for n in nodes]
    lines.append("]")
    if targets:
        lines += ["", f"[models.{model_name}.tolerances.{precision.value}]"]
        lines += [f"{metric} = {value!r}" for metric, value in targets.items()]
    return "\n".join(lines) + "\n"
