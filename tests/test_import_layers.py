"""The layers of docs/architecture.md, held by the import graph, folder by folder.

A *unit* is a folder of ``harness/`` (or one of its top-level modules: ``plugin.py``,
``session.py``, ``testing.py``, ``cacheadmin.py``; ``harness`` is the package's own
``__init__``), never a sub-module: a module that belongs to another layer than its folder moves to
that layer's folder, so the folders show the layers. Every ``import harness...`` of every module
counts -- at import time or inside a function (a lazy import is still a dependency; only
``if TYPE_CHECKING:`` blocks, which never run, are left out).

Two checks, no allow-list: every import goes to its own unit, its own layer or down (``LAYERS``,
lowest first), and no two units import each other, directly or round a circle (zero cyclic
package pairs, units of one layer included). An upward edge is fixed by moving code to the folder
of the layer that owns it, by inverting the dependency (the lower layer declares the value,
protocol or registry, the upper one fills it), or by changing ``LAYERS`` with its reason beside it.

A third check holds the imports *inside functions*: each one defers something heavy (a package of
``HEAVY``, or a harness module whose module-level imports bring one the importing module does not
already import), or says on its line, after ``# deferred:``, what else keeps it there (an import
circle, a test's patch, a child process that imports late on purpose). Anything else is an ordinary
module-level import.

docs/architecture.md's layer table is rendered from ``LAYERS`` and each unit's docstring
(its first sentence says the unit's job, declared once in the code); ``python
tests/test_import_layers.py`` rewrites it, this test fails when it is stale.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: the units of each layer, lowest first
LAYERS: tuple[tuple[str, ...], ...] = (
    ("harness", "core"),
    ("metrics", "data"),
    # the kinds of model (detection from config.json, graphs, feeds, limits, pooling) below the
    # catalogue of concrete models: a ModelSpec names its family, loading a model builds its
    # family's HF class and a directory's family is detected by the family registry
    ("families",),
    ("zoo",),
    ("export",),
    ("runners",),
    ("generation",),
    # the option table names the backends' runtime sections, the zoo's models and the families:
    # it sits above the registries it reads
    ("settings",),
    # the record format and its readers: what every layer above writes or reads
    ("results",),
    ("judge",),
    ("perf",),
    ("repro",),
    # a case's stages in order (compare, then the side outputs) and its record: above the
    # comparisons of judge/, the measurements of perf/ and the bundle writers of repro/ it runs
    ("case",),
    ("gate",),
    ("report",),
    ("compare", "shard", "debug", "check", "cacheadmin", "scaffold"),
    # the case engine: a case job's stages over any artifact source (check's matching and
    # feeding, the case's comparisons and side outputs)
    ("engine",),
    ("serving",),  # a served endpoint: a source of the engine
    ("suites",),
    # one pytest session's shared state, below every front end that starts or reads a session
    ("session",),
    # the pytest entry point (it names the feature plugins by file, importing none) ...
    ("plugin",),
    # ... then the feature plugins, which read the session's state (never the entry point's names)
    ("plugins",),
    ("testing", "cli"),
)

HEAVY: frozenset[str] = frozenset({
    # machine learning frameworks, exporters and runtimes
    "torch", "transformers", "tokenizers", "safetensors", "optimum", "onnx", "onnxruntime", "onnxruntime_genai",
    "onnxconverter_common", "onnxscript", "openvino", "tensorrt",
    # the numeric, statistics and plotting stack
    "numpy", "scipy", "pandas", "matplotlib", "ruptures", "sacrebleu", "rapidfuzz",
    # renderers, templates, storage and process probes
    "rich", "jinja2", "markupsafe", "sqlalchemy", "psutil",
    # test tools
    "pytest", "_pytest", "xdist", "playwright",
    # optional extras
    "pynvml", "psycopg", "tritonclient", "grpc", "google",
})
"""Third-party packages (top-level names) a function may import late, so that ``harness --help``,
a replayed report and a plain pytest session import only what they use. Why each kind is heavy:
the frameworks, exporters and runtimes take seconds and hundreds of MB to import (torch alone,
transformers on top of it) and load native libraries a child process measures as its cold start;
the numeric stack (numpy, scipy, pandas, matplotlib, the change-point and text-metric libraries)
costs tens to hundreds of ms and is needed by a few commands only; the renderers, templates, the
SQL store and psutil serve one output or one probe each; the test tools belong to a pytest session,
not to the command line; and the optional extras (NVML, PostgreSQL, the serving clients and their
protobuf) are absent from a base install, so importing them at module level would break every
user without the extra. The standard library and the harness's own modules are never heavy by
themselves: a harness module defers something only through what its module-level imports bring."""


# -- the walker ------------------------------------------------------------------------------------


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit(module: str) -> str:
    """The folder (or top-level module) of ``harness`` that ``module`` sits in."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


@cache
def parsed(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for every check of this file."""
    return ast.parse(path.read_text(encoding="utf-8"))


def imports(path: Path, root: Path) -> set[str]:
    """Every harness module ``path`` imports, lazily or not (``TYPE_CHECKING`` blocks aside)."""
    tree = parsed(path)
    skipped = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and _type_checking(block)
               for n in ast.walk(block)}
    me = module_name(path, root).split(".")
    package = me if path.name == "__init__.py" else me[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "harness")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] == "harness":
                # `from harness.x import y` may name a submodule y
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    sub = root.joinpath(*candidate.split("."))
                    out.add(candidate if sub.with_suffix(".py").is_file() or sub.is_dir() else base)
    return out


def private_imports(path: Path, root: Path) -> list[str]:
    """``from harness.<other unit>... import _name``: a private name read across units."""
    me = unit(module_name(path, root))
    found = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "harness":
            theirs = unit(node.module or "")
            found += [f"{module_name(path, root)}: from {node.module} import {a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__") and theirs != me]
    return found


def module_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the harness modules it imports, for the ``harness`` package under ``root``."""
    return {module_name(p, root): imports(p, root) for p in sorted((root / "harness").rglob("*.py"))}


def unit_edges(modules: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """(unit, unit it imports) -> the module imports behind that edge."""
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, targets in modules.items():
        for target in targets:
            a, b = unit(module), unit(target)
            if a != b:
                out[(a, b)].append(f"{module} -> {target}")
    return {edge: sorted(sites) for edge, sites in out.items()}


@cache
def harness_edges() -> dict[tuple[str, str], list[str]]:
    return unit_edges(module_graph(ROOT))


def units_on_disk(root: Path) -> set[str]:
    return {unit(module_name(p, root)) for p in (root / "harness").rglob("*.py")}


# -- the two checks ---------------------------------------------------------------------------------


def ranks(layers: tuple[tuple[str, ...], ...] = LAYERS) -> dict[str, int]:
    return {u: i for i, layer in enumerate(layers) for u in layer}


def upward_edges(edges: dict[tuple[str, str], list[str]],
                 layers: tuple[tuple[str, ...], ...] = LAYERS) -> dict[tuple[str, str], list[str]]:
    rank = ranks(layers)
    return {(a, b): sites for (a, b), sites in edges.items() if rank[b] > rank[a]}


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """Strongly connected sets of more than one unit (Tarjan): each a circle of imports."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def cyclic_pairs(edges: dict[tuple[str, str], list[str]]) -> int:
    """How many pairs of units reach each other (the pairs inside every circle)."""
    return sum(len(c) * (len(c) - 1) // 2 for c in cycles(edges))


# -- imports inside functions -----------------------------------------------------------------------

DEFERRED = re.compile(r"#\s*deferred:\s*(\S.*)")


def _targets(node: ast.Import | ast.ImportFrom, path: Path, root: Path) -> list[str]:
    """The dotted modules one import statement loads (``from harness.x import y``: ``harness.x.y``
    when y is a module, else ``harness.x``; relative imports resolved against ``path``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    me = module_name(path, root).split(".")
    package = me if path.name == "__init__.py" else me[:-1]
    base = node.module or ""
    if node.level:
        base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
    out = []
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        sub = root.joinpath(*candidate.split("."))
        out.append(candidate if sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file() else base)
    return out


def _import_sites(path: Path) -> tuple[list[ast.Import | ast.ImportFrom], list[ast.Import | ast.ImportFrom]]:
    """(module-level imports, imports inside functions) of one file, ``TYPE_CHECKING`` blocks aside."""
    top: list[ast.Import | ast.ImportFrom] = []
    inner: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                (inner if in_function else top).append(child)
            elif isinstance(child, ast.If) and _type_checking(child):
                continue
            else:
                walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(parsed(path), False)
    return top, inner


def _module_path(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _with_packages(module: str) -> list[str]:
    """``harness.a.b`` and the packages importing it runs first: ``harness``, ``harness.a``."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


@cache
def heavy_closure(module: str, root: Path = ROOT) -> frozenset[str]:
    """The ``HEAVY`` packages that importing ``module`` (a harness module) imports, through the
    module-level imports of every harness module it reaches (and their packages' ``__init__``)."""
    seen: set[str] = set()
    todo = _with_packages(module)
    heavy: set[str] = set()
    while todo:
        current = todo.pop()
        path = _module_path(current, root)
        if current in seen or path is None:
            continue
        seen.add(current)
        for node in _import_sites(path)[0]:
            for target in _targets(node, path, root):
                top = target.split(".")[0]
                if top == "harness":
                    todo += _with_packages(target)
                elif top in HEAVY:
                    heavy.add(top)
    return frozenset(heavy)


def function_imports(path: Path, root: Path = ROOT) -> list[tuple[str, str]]:
    """Each import inside a function of ``path``: (its site and text, why it is there). The reasons:
    ``heavy package``, ``brings a heavy package`` (a harness module whose closure adds one the module
    lacks), ``deferred: <reason>`` from the line, or ``needless`` (it defers nothing)."""
    module = module_name(path, root)
    lines = path.read_text(encoding="utf-8").splitlines()
    mine = heavy_closure(module, root)
    out = []
    for node in _import_sites(path)[1]:
        targets = _targets(node, path, root)
        comment = next((m.group(1).strip() for line in lines[node.lineno - 1:node.end_lineno]
                        if (m := DEFERRED.search(line))), None)
        if any(t.split(".")[0] in HEAVY for t in targets):
            reason = "heavy package"
        elif any(t.split(".")[0] == "harness" and heavy_closure(t, root) - mine for t in targets):
            reason = "brings a heavy package"
        elif comment:
            reason = f"deferred: {comment}"
        else:
            reason = "needless"
        out.append((f"{module}:{node.lineno}: {ast.unparse(node)}", reason))
    return out


def all_function_imports(root: Path = ROOT) -> list[tuple[str, str]]:
    return [site for p in sorted((root / "harness").rglob("*.py")) for site in function_imports(p, root)]


# -- the docs table ---------------------------------------------------------------------------------

_TABLE = re.compile(r"(<!-- layers:table -->\n)(.*?)(<!-- /layers:table -->)", re.S)


def _source_of(name: str, root: Path) -> Path:
    folder = root / "harness" / name
    if name == "harness":
        return root / "harness" / "__init__.py"
    return folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")


def job_of(name: str, root: Path = ROOT) -> str:
    """A unit's job: the first sentence of its docstring (the unit declares it, once)."""
    doc = ast.get_docstring(ast.parse(_source_of(name, root).read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    match = re.match(r"(.+?\.)(\s|$)", paragraph)
    return (match.group(1) if match else paragraph).rstrip(".").replace("``", "`")


def layer_table(root: Path = ROOT) -> str:
    rows = ["| layer | unit | its job (the first sentence of its docstring) |", "|---|---|---|"]
    for number, layer in enumerate(LAYERS, start=1):
        for name in layer:
            shown = "`harness/__init__.py`" if name == "harness" else \
                f"`{name}/`" if (root / "harness" / name).is_dir() else f"`{name}.py`"
            rows.append(f"| {number} | {shown} | {job_of(name, root)} |")
    return "\n".join(rows) + "\n"


def docs_with_table(text: str, table: str) -> str:
    return _TABLE.sub(lambda m: m.group(1) + table + m.group(3), text)


# -- the tests --------------------------------------------------------------------------------------


def _listed(edges: dict[tuple[str, str], list[str]]) -> str:
    return "\n".join(f"  {a} -> {b}: {'; '.join(sites)}" for (a, b), sites in sorted(edges.items()))


def test_every_unit_is_in_exactly_one_layer():
    listed = [u for layer in LAYERS for u in layer]
    assert len(listed) == len(set(listed)), "a unit listed twice in LAYERS"
    on_disk = units_on_disk(ROOT)
    assert sorted(on_disk - set(listed)) == [], "folders in no layer of LAYERS (add them)"
    assert sorted(set(listed) - on_disk) == [], "LAYERS names folders that are gone"


def test_imports_point_only_down():
    up = upward_edges(harness_edges())
    assert not up, "imports that go up a layer (docs/architecture.md):\n" + _listed(up)


def test_zero_cyclic_package_pairs():
    edges = harness_edges()
    circles = cycles(edges)
    inside = {(a, b): s for (a, b), s in edges.items() if any(a in c and b in c for c in circles)}
    assert circles == [], f"{cyclic_pairs(edges)} cyclic package pairs in {circles}:\n" + _listed(inside)


def test_no_unit_reads_another_units_private_names_and_nothing_imports_the_plugin():
    """A name with a leading underscore is its unit's own business; the pytest entry point is
    loaded by pytest alone (the CLI and the feature plugins share harness.session, below both)."""
    assert [line for p in sorted((ROOT / "harness").rglob("*.py")) for line in private_imports(p, ROOT)] == []
    assert sorted(a for (a, b) in harness_edges() if b == "plugin") == []


def test_the_docs_layer_table_is_rendered_from_the_code():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert _TABLE.search(text), "docs/architecture.md has no <!-- layers:table --> block"
    assert docs_with_table(text, layer_table()) == text, \
        "docs/architecture.md's layer table is stale: python tests/test_import_layers.py rewrites it"


def _plant(root: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")


def test_a_planted_upward_import_and_a_planted_circle_are_caught(tmp_path):
    """Negative controls, on a made-up package tree walked like the real one: a lazy import from
    core into runners (inside a function, relative) goes up; check and compare (one layer, the
    way back lazy)
    importing each other are a circle, not an upward edge; an import under ``TYPE_CHECKING``
    counts for neither; a circle inside one folder is that folder's own business."""
    _plant(tmp_path, {
        "harness/__init__.py": "",
        "harness/core/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import harness.cli\n",
        "harness/core/types.py": "def load():\n    from ..runners import base\n    return base\n",
        "harness/runners/__init__.py": "from harness.core import types\n",
        "harness/runners/base.py": "import harness.core.types\n",
        "harness/check/__init__.py": "",
        "harness/check/judge.py": "from harness.compare.diff import moved\nfrom . import report\n",
        "harness/check/report.py": "from harness.check import judge\n",
        "harness/compare/__init__.py": "",
        "harness/compare/diff.py": "moved = 1\ndef back():\n    from harness.check import report\n",
        "harness/cli/__init__.py": "import harness.check.judge\nfrom harness.compare.diff import _private\n",
    })
    assert private_imports(tmp_path / "harness/cli/__init__.py", tmp_path) == [
        "harness.cli: from harness.compare.diff import _private"]
    assert private_imports(tmp_path / "harness/check/judge.py", tmp_path) == []
    edges = unit_edges(module_graph(tmp_path))
    assert upward_edges(edges) == {("core", "runners"): ["harness.core.types -> harness.runners.base"]}
    # runners imports core, so the upward import closes a circle too
    assert cycles(edges) == [["check", "compare"], ["core", "runners"]] and cyclic_pairs(edges) == 2
    assert ("core", "cli") not in edges  # TYPE_CHECKING only
    assert ("check", "check") not in edges  # judge <-> report: inside one unit

    # the same tree with the two edges removed passes both checks
    (tmp_path / "harness/core/types.py").write_text("def load():\n    return None\n", encoding="utf-8")
    (tmp_path / "harness/compare/diff.py").write_text("moved = 1\n", encoding="utf-8")
    parsed.cache_clear()  # the two files changed on disk
    edges = unit_edges(module_graph(tmp_path))
    assert upward_edges(edges) == {} and cycles(edges) == [] and cyclic_pairs(edges) == 0


def test_a_stale_docs_table_is_caught(tmp_path):
    """Negative control for the docs check: a layer table with a row missing is not the rendered one."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    fresh = layer_table()
    stale = fresh.replace(fresh.splitlines()[-1] + "\n", "")
    assert docs_with_table(text, stale) != text
    assert docs_with_table(docs_with_table(text, stale), fresh) == text


def test_imports_inside_functions_defer_something_heavy():
    """An import inside a function defers a ``HEAVY`` package (or a harness module that brings one)
    or says why else it waits (``# deferred: <reason>`` on its line); anything else moves to the
    module's import block."""
    needless = [site for site, reason in all_function_imports() if reason == "needless"]
    assert needless == [], ("imports inside functions that defer nothing heavy: move them to the module's "
                            "import block, or say why they wait with `# deferred: <reason>`:\n  " + "\n  ".join(needless))


def test_a_planted_needless_function_level_import_is_caught(tmp_path):
    """Negative control, on a made-up package: a late stdlib import and a late light harness module
    are reported; a late torch, a late harness module that brings onnxruntime, one with a reason and
    one under ``TYPE_CHECKING`` are not; a module that already imports onnxruntime gains nothing by
    importing the onnxruntime runner late."""
    _plant(tmp_path, {
        "harness/__init__.py": "",
        "harness/core/__init__.py": "import json\n",
        "harness/core/light.py": "from harness.core import json\n",
        "harness/runners/__init__.py": "",
        "harness/runners/ort.py": "import onnxruntime\nfrom . import __name__ as _n\n",
        "harness/cli/__init__.py": (
            "from typing import TYPE_CHECKING\n"
            "def a():\n    import json\n"
            "def b():\n    from harness.core import light\n"
            "def c():\n    import torch\n"
            "def d():\n    from harness.runners import ort\n"
            "def e():\n    from ..core import light  # deferred: a planted reason\n"
            "def f():\n    if TYPE_CHECKING:\n        import json\n"),
        "harness/cli/ortcmd.py": "import onnxruntime\ndef g():\n    from harness.runners.ort import onnxruntime\n",
    })
    found = all_function_imports(tmp_path)
    assert found == [
        ("harness.cli:3: import json", "needless"),
        ("harness.cli:5: from harness.core import light", "needless"),
        ("harness.cli:7: import torch", "heavy package"),
        ("harness.cli:9: from harness.runners import ort", "brings a heavy package"),
        ("harness.cli:11: from ..core import light", "deferred: a planted reason"),
        ("harness.cli.ortcmd:3: from harness.runners.ort import onnxruntime", "needless"),
    ]
    assert heavy_closure("harness.runners.ort", tmp_path) == {"onnxruntime"}
    assert heavy_closure("harness.core.light", tmp_path) == frozenset()


if __name__ == "__main__":  # rewrite docs/architecture.md's layer table and print the unit graph
    ARCHITECTURE.write_text(docs_with_table(ARCHITECTURE.read_text(encoding="utf-8"), layer_table()), encoding="utf-8")
    all_edges = harness_edges()
    for (a, b), sites in sorted(all_edges.items()):
        print(f"{a} -> {b} ({len(sites)})")
    print(f"cyclic package pairs: {cyclic_pairs(all_edges)}; upward edges: {len(upward_edges(all_edges))}",
          file=sys.stderr)
    sites = all_function_imports()
    reasons = Counter("deferred" if r.startswith("deferred:") else r for _, r in sites)
    print(f"imports inside functions: {len(sites)} ("
          + ", ".join(f"{reason}: {n}" for reason, n in sorted(reasons.items())) + ")", file=sys.stderr)
    for site, reason in sites:
        if reason.startswith("deferred:") or reason == "needless":
            print(f"  {site}  [{reason}]", file=sys.stderr)
