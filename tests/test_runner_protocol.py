"""The runner protocol is explicit (issue 22): every optional capability of a runner or a backend is
declared on ``GraphRunner`` / ``Backend`` with its default, so no module asks an object whether it
has one (``getattr(runner, "replayed", ...)``, ``hasattr(runner, "end_profiling")``). Pure AST."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "harness"
#: a probed object whose name says it is a runner or a backend
WORDS = ("runner", "backend")


def probes(path: Path) -> list[str]:
    """``getattr``/``hasattr`` calls whose object is named like a runner or a backend."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and node.args:
            target = ast.unparse(node.args[0]).lower()
            if any(w in target for w in WORDS) and not target.startswith("harness"):  # a module's attribute: no probe
                out.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_module_probes_a_runner_or_a_backend_for_a_capability():
    found = [p for path in sorted(PACKAGE.rglob("*.py")) for p in probes(path)]
    assert not found, "declare the capability on GraphRunner/Backend instead:\n" + "\n".join(found)


def test_the_probe_finder_sees_a_probe(tmp_path):
    """A negative control: the older spelling is found."""
    src = tmp_path / "probe_control.py"
    src.write_text("def f(runner):\n    return getattr(runner, 'replayed', False) or hasattr(self._backend, 'path')\n")
    assert len(probes(src)) == 2


def test_one_graph_of_one_variant_is_one_value():
    """``Backend.load`` / ``artifacts`` / ``outputs_key`` take one ``GraphRef``: no method is rewritten by
    its signature to take ``(model, family, graph, variant)`` too (negative control: that call fails)."""
    from harness.runners.base import Backend, GraphRef

    class Written(Backend):
        name = "written-now"

        @classmethod
        def unavailable_reason(cls, variant):
            return None

        def load(self, ref):
            return ("now", ref.model, ref.graph)

    ref = GraphRef("m", "f", "g", "v")
    backend = Written(None)
    assert backend.load(ref) == ("now", "m", "g")
    with pytest.raises(TypeError):
        backend.load("m", "f", "g", "v")
    assert [r.graph for r in GraphRef.each("m", "f", ["a", "b"], "v")] == ["a", "b"]


def test_no_backend_module_reads_the_provider_table_while_it_is_imported():
    """``PROVIDERS`` is derived from the registered backends when read; a backend module that reads
    it at its own import time (``from harness.runners import PROVIDERS`` at module level) gets a
    table without itself (its class is not registered yet): a fresh-process cold-start child that
    imports only that module then fails with ``KeyError: 'torch_cpu'``."""
    runners = Path(__file__).resolve().parents[1] / "harness" / "runners"
    readers = []
    for path in sorted(runners.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.module == "harness.runners" and any(
                    alias.name == "PROVIDERS" for alias in node.names):
                readers.append(path.name)
    assert readers == []
    # negative control: the rule sees a module-level read
    planted = ast.parse("from harness.runners import PROVIDERS, register_backend\n").body[0]
    assert isinstance(planted, ast.ImportFrom) and any(a.name == "PROVIDERS" for a in planted.names)
