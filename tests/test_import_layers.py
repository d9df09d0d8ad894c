"""The layers of docs/architecture.md, held by the import graph.

Every ``import harness...`` of every module counts -- at import time or inside a function (a
lazy import is still a dependency; only ``if TYPE_CHECKING:`` blocks, which never run, are left
out). A module belongs to the longest prefix in ``LAYERS`` (its *unit*); an import may go to the
same layer or down, never up, and no set of units may import each other in a circle (units of one
layer included). There is no allow-list: an upward edge is fixed by moving code to the layer that
owns it, by inverting the dependency, or by changing ``LAYERS`` with its reason written beside it
and in docs/architecture.md (the counts before and after are there too).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "harness"

#: lowest first; a unit is a module prefix (the longest one that matches wins)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("harness", "harness.core"),
    ("harness.metrics", "harness.data"),
    # the kinds of model (detection from config.json, graphs, feeds, limits, pooling) below the
    # catalogue of concrete models: a ModelSpec names its family, loading a model builds its
    # family's HF class and a directory's family is detected by the family registry
    ("harness.families",),
    ("harness.zoo",),
    ("harness.export",),
    ("harness.runners",),
    ("harness.generation",),
    ("harness.settings",),
    # the record format and its readers (record, store, sections, checks, history): what every
    # layer above writes or reads
    ("harness.results",),
    # input shapes and ONNX Runtime profiles: measurement helpers the judge uses too (they import
    # nothing of the harness above families)
    ("harness.perf.feeds", "harness.perf.profiling"),
    ("harness.judge",),
    ("harness.perf",),
    ("harness.repro",),
    # a case's stages in order (compare, then the side outputs: dumps, repro bundles, profiles):
    # above the comparisons of judge/ and the bundle writers of repro/ it runs
    ("harness.judge.pipeline",),
    ("harness.results.collector",),  # composes a case's record from the judge's run state
    ("harness.gate",),
    ("harness.report",),
    ("harness.compare", "harness.shard", "harness.debug", "harness.check", "harness.cacheadmin", "harness.scaffold"),
    # the case engine: a case job's stages in order over any artifact source (check's matching and
    # feeding, the judge's comparisons and side outputs), one composer for its records
    ("harness.engine",),
    ("harness.serving",),  # a served endpoint: a source of the engine
    ("harness.suites",),
    # the pytest entry point (it names the feature plugins by file, importing none) ...
    ("harness.plugin",),
    # ... then the feature plugins, which read the entry point's run state
    ("harness.plugins",),
    ("harness.testing", "harness.cli",
     "harness.metrics.tables"),  # metrics.tables renders the docs of every declaration (metrics, options)
)

def _layer_of() -> dict[str, int]:
    return {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def unit(module: str, ranks: dict[str, int]) -> str:
    """The unit of ``module``: ``<package>:init`` names a package's ``__init__`` alone."""
    if f"{module}:init" in ranks:
        return f"{module}:init"
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in ranks:
            return prefix
    raise AssertionError(f"{module}: in no layer of LAYERS (add its package)")


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every harness module ``path`` imports, lazily or not (``TYPE_CHECKING`` blocks aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and _type_checking(block)
               for n in ast.walk(block)}
    me = module_name(path).split(".")
    package = me if path.name == "__init__.py" else me[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("harness"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            if base.startswith("harness"):
                # `from harness.x import y` may name a submodule y
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    sub = ROOT.joinpath(*candidate.split("."))
                    out.add(candidate if sub.with_suffix(".py").is_file() or sub.is_dir() else base)
    return out


@cache
def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def upward_edges(edges: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    ranks = _layer_of()
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, targets in edges.items():
        a = unit(module, ranks)
        for target in targets:
            b = unit(target, ranks)
            if ranks[b] > ranks[a]:
                out[(a, b)].append(f"{module} -> {target}")
    return dict(out)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of more than one layer unit (Tarjan), each a circle of imports."""
    ranks = _layer_of()
    g: dict[str, set[str]] = defaultdict(set)
    for module, targets in edges.items():
        for target in targets:
            a, b = unit(module, ranks), unit(target, ranks)
            if a != b:
                g[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_every_module_is_in_a_layer():
    ranks = _layer_of()
    for module in graph():
        unit(module, ranks)


def _listed(up: dict[tuple[str, str], list[str]]) -> str:
    return "\n".join(f"  {a} -> {b}: {'; '.join(sorted(sites))}" for (a, b), sites in sorted(up.items()))


def test_no_upward_import():
    up = upward_edges(graph())
    assert not up, "imports that go up a layer (docs/architecture.md):\n" + _listed(up)


def test_no_import_circle():
    assert cycles(graph()) == []


def test_the_checks_find_an_upward_edge_and_a_circle():
    """Negative controls for the two checks, on made-up graphs: an import from core into runners
    goes up; two units of one layer (check, compare) importing each other are a circle, not an
    upward edge; a circle inside one unit is the unit's own business."""
    assert upward_edges({"harness.core.types": {"harness.runners.base", "harness.core.errors"}}) == {
        ("harness.core", "harness.runners"): ["harness.core.types -> harness.runners.base"]}
    same_layer = {"harness.check.judge": {"harness.compare.diff"}, "harness.compare.diff": {"harness.check.report"}}
    assert upward_edges(same_layer) == {}
    assert cycles(same_layer) == [["harness.check", "harness.compare"]]
    assert cycles({"harness.check.judge": {"harness.check.report"}, "harness.check.report": {"harness.check.judge"},
                   "harness.compare.diff": {"harness.check.judge"}}) == []


def test_the_walker_sees_lazy_imports_and_ignores_type_checking(tmp_path):
    """A negative control for the walker itself."""
    found = imports(PACKAGE / "runners" / "torch_runner.py")
    assert "harness.zoo.loading" in found  # inside TorchBackend.child_load(): lazy, still counted
    assert "harness.families.base" not in found  # under `if TYPE_CHECKING:` only
