"""One metric declaration: the perf gate's policies, every ``Check`` and the direction rule come
from the metric registry, and nothing in ``harness/`` spells them a second time.

Before issue 22 the gate kept its own table (``DEFAULT_POLICIES``: ``p50``, ``peak_rss_bytes``,
advisory flags) beside the registry's budgets (``p50_ms``, ``peak_rss_mb``); 7 ``Check(...)``s were
built outside the registry (3 relying on the default direction) and the direction comparison was
written 10 times. The AST walks below fail on a new copy; the other tests prove the derived
behaviour is the declared one.
"""

from __future__ import annotations

import ast
import functools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.core import Check, UsageError
from harness.core.direction import Direction
from harness.gate.compare import DEFAULT_POLICIES, compare_runs, parse_threshold
from harness.metrics.registry import METRICS, Scope, gate, metric, perf_policies
from harness.metrics.spec import MetricPolicy, MetricSpec, PerfReading
from harness.repro.bundle import checks_from, checks_json

ROOT = Path(__file__).resolve().parents[1]
#: the one factory (``MetricSpec.check``) and the one direction comparison (``Direction.worse``)
FACTORY = ROOT / "harness" / "metrics" / "spec.py"
DIRECTION = ROOT / "harness" / "core" / "direction.py"
ORDERING = (ast.Lt, ast.Gt, ast.LtE, ast.GtE)


def _sources() -> list[Path]:
    return sorted((ROOT / "harness").rglob("*.py")) + sorted((ROOT / "scripts").rglob("*.py"))


def _ordering(node: ast.AST) -> bool:
    return isinstance(node, ast.Compare) and any(isinstance(op, ORDERING) for op in node.ops)


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _check_calls(path: Path) -> list[int]:
    tree = _tree(path)
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Name) and n.func.id == "Check") or
        (isinstance(n.func, ast.Attribute) and n.func.attr == "Check"))]


def _direction_spellings(path: Path) -> list[str]:
    """``a < b if higher else a > b`` and ``(a < b) == higher``: a direction applied by hand."""
    tree = _tree(path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.IfExp) and _ordering(node.body) and _ordering(node.orelse):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Compare) and any(_ordering(x) for x in (node.left, *node.comparators)):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_every_check_is_built_by_its_declaration() -> None:
    outside = {str(p.relative_to(ROOT)): lines for p in _sources() if p != FACTORY and (lines := _check_calls(p))}
    assert outside == {}, f"Check(...) built outside MetricSpec.check (use metric(name).check): {outside}"
    assert len(_check_calls(FACTORY)) == 1


def test_the_direction_comparison_is_written_once() -> None:
    outside = {str(p.relative_to(ROOT)): found for p in _sources()
               if p != DIRECTION and (found := _direction_spellings(p))}
    assert outside == {}, f"a direction applied by hand (use Direction.worse / holds): {outside}"
    assert len(_direction_spellings(DIRECTION)) == 1


def test_the_detectors_find_what_they_forbid(tmp_path: Path) -> None:
    """Negative control: the walks above would see the spellings they replaced."""
    sample = tmp_path / "old.py"
    sample.write_text("def f(a, b, hib, op):\n"
                      "    c = Check('tied_axes', 0.0)\n"
                      "    x = a >= b if hib else a <= b\n"
                      "    y = (a < b) == hib\n"
                      "    return c, x, y\n", encoding="utf-8")
    assert _check_calls(sample) == [2]
    assert [line.split(":")[0] for line in _direction_spellings(sample)] == ["3", "4"]


@pytest.mark.parametrize("direction", list(Direction))
def test_direction_rule(direction: Direction) -> None:
    good, bad = (2.0, 1.0) if direction is Direction.HIGHER else (1.0, 2.0)
    assert direction.worse(bad, good) and not direction.worse(good, bad) and not direction.worse(good, good)
    assert direction.holds(good, bad) and direction.holds(good, good) and not direction.holds(bad, good)
    assert not direction.holds(math.nan, good) and not direction.worse(math.nan, good)
    assert Direction.from_op(direction.symbol) is direction is Direction.of(direction.higher_is_better)
    check = Check("m", good, direction.higher_is_better)
    assert check.passes(good) and not check.passes(bad) and not check.passes(math.nan)


def test_the_gates_policies_are_the_registrys() -> None:
    """Every default policy is declared on a budget; nothing else declares one."""
    assert DEFAULT_POLICIES == perf_policies()
    declared = [s for s in METRICS if s.perf_gate is not None]
    assert {s.perf_gate.name for s in declared if s.perf_gate} == set(DEFAULT_POLICIES)
    assert all(s.scope is Scope.PERF_BUDGET for s in declared)
    assert METRICS["p50_ms"].perf_gate == MetricPolicy("p50", "latency", min_effect=0.05)
    assert METRICS["peak_rss_mb"].perf_gate == MetricPolicy("peak_rss_bytes", "memory", min_effect=0.05,
                                                            min_abs=32 * 2 ** 20)
    assert METRICS["p99_ms"].perf_gate is not None and METRICS["p99_ms"].perf_gate.gate_when_precise


def test_gate_and_budget_read_the_same_number() -> None:
    """A record carrying each scalar a budget reads: the gate compares exactly that key, of the
    declared kind, and the budget reads the same value (over its divisor)."""
    scalars = [s for s in METRICS.of(Scope.PERF_BUDGET) if s.perf_gate is not None and s.perf_gate.kind != "latency"]
    assert scalars
    perf: dict[str, Any] = {}
    for i, spec in enumerate(scalars):
        assert spec.reading is not None
        node = perf
        *parents, leaf = spec.reading.paths[0]
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = 1000.0 * (i + 1) * 2 ** 20
    env = {"fingerprint": "f", "threads": {"intra_op": 1}}

    def record(payload: dict[str, Any]) -> dict[str, Any]:
        return {"schema": "harness.result/1", "id": "test_cold_start_memory[m-fp32-ort_cpu]",
                "variant": "m-fp32-ort_cpu", "verdict": "pass", "env": env, "perf": payload}

    rows = {r.metric: r for r in compare_runs([record(perf)], [record(perf)]).rows}
    for spec in scalars:
        assert spec.perf_gate is not None and spec.reading is not None
        row = rows[spec.perf_gate.name]
        assert row.kind == spec.perf_gate.kind and row.advisory == spec.perf_gate.advisory
        assert spec.reading.read(perf) == pytest.approx(row.base / spec.reading.divisor)


def test_latency_policies_judge_every_latency_series() -> None:
    rng = np.random.default_rng(0)
    samples = (1.0 + 0.01 * rng.standard_normal(60)).tolist()  # few: every row INCONCLUSIVE, still a row
    rec = {"schema": "harness.result/1", "id": "test_latency[m-fp32-ort_cpu]", "variant": "m-fp32-ort_cpu",
           "verdict": "pass", "env": {"fingerprint": "f"},
           "perf": {"latency_ms[bs=8]": {"samples": samples}}}  # not the entry series the budgets read
    metrics = [r.metric for r in compare_runs([rec], [rec]).rows]
    assert metrics == [f"latency_ms[bs=8].{p.name}" for p in DEFAULT_POLICIES.values() if p.kind == "latency"]


@pytest.mark.parametrize(("budget", "gate_name"), [("p50_ms", "p50"), ("peak_rss_mb", "peak_rss_bytes"),
                                                   ("load_ms", "cold_start_ms.load")])
def test_a_threshold_override_takes_either_name(budget: str, gate_name: str) -> None:
    by_budget, by_gate = parse_threshold(f"{budget}=12%"), parse_threshold(f"{gate_name}=12%")
    assert by_budget == by_gate and by_budget.name == gate_name and by_budget.min_effect == pytest.approx(0.12)
    assert by_budget.kind == DEFAULT_POLICIES[gate_name].kind


def test_a_budget_without_a_gate_name_is_refused() -> None:
    with pytest.raises(UsageError, match="valid: p50 \\(p50_ms\\)"):
        parse_threshold("cold_start_ms=10%")  # a sum of two numbers: budgeted, not compared


def test_a_policy_must_name_what_its_budget_reads() -> None:
    reading = PerfReading((("peak_rss_bytes",),), divisor=2.0 ** 20)
    with pytest.raises(ValueError, match="the gate reads it as 'peak_rss_bytes'"):
        MetricSpec("x_mb", Direction.LOWER, Scope.PERF_BUDGET, "x", "MiB", reading=reading,
                   perf_gate=MetricPolicy("artifact_bytes", "memory", min_effect=0.05))
    with pytest.raises(ValueError, match="latency policy judges a latency summary"):
        MetricSpec("x_mb", Direction.LOWER, Scope.PERF_BUDGET, "x", "MiB", reading=reading,
                   perf_gate=MetricPolicy("p50", "latency", min_effect=0.05))
    with pytest.raises(ValueError, match="one recorded number"):
        MetricSpec("y", Direction.LOWER, Scope.TEXT, "y", perf_gate=MetricPolicy("p50", "latency", 0.05))


def test_qualified_checks_keep_the_declared_direction() -> None:
    check = gate("cached_decoding.logits.cosine", 0.999)
    assert check == Check("cached_decoding.logits.cosine", 0.999, True)
    assert metric("kl").check(0.1, within="cached_decoding.logits") == Check("cached_decoding.logits.kl", 0.1, False)
    with pytest.raises(UsageError, match="did you mean 'cosine'"):
        gate("cached_decoding.logits.cosin", 0.9)


def test_bundle_checks_round_trip_and_a_flipped_direction_is_refused() -> None:
    checks = (metric("cosine").check(0.99), gate("cached_decoding.presents.cosine", 0.98), metric("max_abs").check(1.0))
    rows = checks_json(checks)
    assert checks_from(rows) == checks
    rows[2]["higher_is_better"] = True  # an edited manifest: max_abs as a floor would pass every error
    with pytest.raises(ValueError, match="max_abs: recorded as higher is better, declared lower"):
        checks_from(rows)
    with pytest.raises(ValueError, match="unknown metric 'no_such'"):
        checks_from([{"metric": "no_such", "threshold": 1.0, "higher_is_better": False}])
