"""The docs' metric tables, rendered from the registry and kept in place between markers.

A docs page marks a generated region ``<!-- metrics:NAME -->`` ... ``<!-- /metrics:NAME -->``
(on their own lines for a table, inline for a list of names); ``scripts/render_metric_docs.py``
rewrites every region and ``--check`` fails when one is stale, as does ``tests/test_metric_registry.py``.
So a metric added, renamed or re-thresholded in ``harness.metrics.registry`` cannot leave a
page describing the old one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from harness.core import Precision
from harness.core.markdown import table
from harness.metrics.registry import METRICS, TOLERANCE_SCOPES, MetricSpec, Scope, tensor_metric_names
from harness.settings.relations import docs_table

_MARK = re.compile(r"<!-- metrics:(?P<name>[a-z0-9-]+) -->(?P<body>.*?)<!-- /metrics:(?P=name) -->", re.DOTALL)


def number(value: float) -> str:
    """``0.99999``, ``1e-06`` -> ``1e-6``: short and exact enough to read a threshold."""
    text = f"{value:g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    return "\n".join(table(header, rows))


def _names(specs: Iterable[MetricSpec]) -> str:
    return ", ".join(f"`{s.name}`" for s in specs)


def _defaults(spec: MetricSpec) -> str:
    if spec.thresholds is None:
        return spec.role
    return ", ".join(f"{p.value} {spec.symbol} {number(v)}" for p, v in spec.thresholds.items())


def numeric_table() -> str:
    """docs/tolerances.md: every metric of one output's comparison, plus the artifact lint."""
    rows = [(f"`{s.name}`", s.direction.value, s.outputs.value if s.outputs else "artifact", s.unit, s.description)
            for s in METRICS.of(Scope.NUMERIC, Scope.ARTIFACT_LINT)]
    return _table(("metric", "direction", "outputs", "unit", "definition"), rows)


def defaults_table(*scopes: Scope) -> str:
    """One row per precision, one column per metric gated by default somewhere."""
    gated = [s for s in METRICS.of(*scopes) if s.thresholds is not None]
    header = ["precision"] + [f"{s.name} {'≥' if s.higher_is_better else '≤'}" + (" (logits)" if s.logits_only else "")
                              for s in gated]
    rows = [[p.value] + [number(v) if (v := s.threshold(p)) is not None else "–" for s in gated] for p in Precision]
    return _table(header, rows)


def generation_table() -> str:
    """docs/generation.md: what generation parity records (``refs``: corpora with references only)."""
    rows = [(f"`{s.name}`", s.direction.value, s.unit, s.role + (", refs" if s.needs_references else ""),
             s.description) for s in METRICS.of(Scope.GENERATION)]
    return _table(("metric", "direction", "unit", "role", "meaning"), rows)


def generation_defaults_table() -> str:
    rows = [(p.value, ", ".join(f"`{n} {METRICS[n].symbol} {number(v)}`"
                                for n, v in METRICS.defaults(p, Scope.GENERATION).items()) or "–")
            for p in Precision]
    return _table(("precision", "default gates"), rows)


def embedding_table() -> str:
    rows = [(f"`{s.name}`", s.direction.value, _defaults(s), s.description) for s in METRICS.of(Scope.EMBEDDING)]
    return _table(("metric", "direction", "default gates", "definition"), rows)


def span_table() -> str:
    """docs/tolerances.md: what an extractive-QA head's answer span is judged on."""
    rows = [(f"`{s.name}`", s.direction.value, _defaults(s), s.description) for s in METRICS.of(Scope.SPAN)]
    return _table(("metric", "direction", "default gates", "definition"), rows)


def text_table() -> str:
    rows = [(f"`{s.name}`", s.direction.value, s.unit, s.description) for s in METRICS.of(Scope.TEXT)]
    return _table(("metric", "direction", "unit", "definition"), rows)


def budgets_table() -> str:
    """docs/performance.md: every budget, what it limits and where its number is read."""
    rows = []
    for s in METRICS.of(Scope.PERF_BUDGET):
        reading = s.reading.describe() if s.reading is not None else ""
        rows.append((f"`{s.name}`", s.unit, s.description, reading, f"`{s.measured_by}`"))
    return _table(("budget", "unit", "limits", "read from the record's `perf`", "checked by"), rows)


def perf_gate_table() -> str:
    """docs/perf-gate.md: the perf gate's default policy of every budget that declares one (the
    gate's ``DEFAULT_POLICIES`` are derived from the same declarations)."""
    rows = []
    for s in METRICS.of(Scope.PERF_BUDGET):
        p = s.perf_gate
        if p is None or s.reading is None:
            continue
        floor = f" and +{number(p.min_abs / s.reading.divisor)} {s.unit}" if p.min_abs else ""
        sampled = p.kind == "latency"  # alpha and max CV judge samples; a scalar has effect thresholds only
        rows.append((f"`{p.name}`", f"`{s.name}`", p.kind, f"+{p.min_effect:.0%}{floor}", p.gating,
                     number(p.alpha) if sampled else "–", f"{p.max_cv:.0%}" if sampled else "–"))
    return _table(("gate metric", "budget", "kind", "threshold", "gating", "alpha", "max CV"), rows)


def tolerance_list() -> str:
    """docs/config.md: every name a tolerance may use, by scope."""
    lines = [f"- {scope.value}: {_names(METRICS.of(scope))}" for scope in TOLERANCE_SCOPES]
    return "\n".join(lines)


def margins_table() -> str:
    """docs/accuracy-gate.md: every metric's accuracy-gate margin."""
    rows = []
    for spec in METRICS:
        m = spec.margin
        if m is None:
            continue
        floors = " / ".join(number(m.floor_at(p)) for p in ("fp32", "fp16", "int8"))
        ideal = "" if m.ideal is None else number(m.ideal)
        flags = ", ".join(([f"exact at {', '.join(p.value for p in m.exact)}"] if m.exact else [])
                          + (["advisory"] if m.advisory else []))
        rows.append((f"`{spec.name}`", spec.direction.value, ideal or "–", f"{m.rel:.0%}", floors, flags or "–"))
    return _table(("metric", "better", "ideal", "rel", "floor fp32 / fp16 / int8", "notes"), rows)


#: block name -> (renderer, inline). Inline blocks sit inside a sentence; the others are tables.
BLOCKS: dict[str, tuple[Callable[[], str], bool]] = {
    "numeric": (numeric_table, False),
    "numeric-defaults": (lambda: defaults_table(Scope.NUMERIC), False),
    "embedding": (embedding_table, False),
    "span": (span_table, False),
    "text": (text_table, False),
    "generation": (generation_table, False),
    "generation-defaults": (generation_defaults_table, False),
    "budgets": (budgets_table, False),
    "budget-names": (lambda: _names(METRICS.of(Scope.PERF_BUDGET)), True),
    "perf-gate": (perf_gate_table, False),
    "tolerance-names": (tolerance_list, False),
    "tensor-names": (lambda: ", ".join(f"`{n}`" for n in tensor_metric_names()), True),
    # the option table's docs (docs/options.md), rendered by the same machinery
    "options-run": (lambda: _options_table("run"), False),
    "options-perf": (lambda: _options_table("perf"), False),
    "options-gate": (lambda: _options_table("gate"), False),
    "options-gen": (lambda: _options_table("gen"), False),
    "options-config": (lambda: _config_table(), False),
    "options-relations": (lambda: _relations_table(), False),
    "options-commands": (lambda: _command_docs(), False),
    "options-renamed": (lambda: _renamed_table(), False),
    "margins": (margins_table, False),
    # every runtime setting, from the backends' own settings sections (docs/runtime.md)
    "runtime-settings": (lambda: _runtime_table(), False),
}


def _runtime_table() -> str:
    from harness.settings.runtime import docs_table

    return docs_table()


def _relations_table() -> str:
    return docs_table()


def _command_docs() -> str:
    from harness.settings.commands import command_docs

    return command_docs()


def _renamed_table() -> str:
    from harness.settings.commands import renamed_table

    return renamed_table()


def _config_table() -> str:
    from harness.settings.options import config_docs_table

    return config_docs_table()


def _options_table(group: str) -> str:
    from harness.settings.options import Group, docs_table

    return docs_table(Group(group))


def render_block(name: str) -> str:
    """The text between the markers of block ``name``."""
    if name not in BLOCKS:
        raise KeyError(f"unknown generated block 'metrics:{name}'; known: {', '.join(BLOCKS)}")
    render, inline = BLOCKS[name]
    return render() if inline else f"\n{render()}\n"


def render_text(text: str) -> str:
    """``text`` with every marked block re-rendered."""
    return _MARK.sub(lambda m: f"<!-- metrics:{m['name']} -->{render_block(m['name'])}<!-- /metrics:{m['name']} -->",
                     text)


def blocks_in(text: str) -> list[str]:
    return [m["name"] for m in _MARK.finditer(text)]


def doc_files(root: Path) -> list[Path]:
    """The pages that may hold generated blocks."""
    return sorted((root / "docs").glob("*.md")) + [p for p in (root / "README.md",) if p.is_file()]


def generated_sources() -> dict[str, Callable[[], str]]:
    """Python modules generated from a declaration: path under the checkout -> renderer."""
    from harness.settings.options import settings_source

    return {"harness/core/values.py": settings_source}


def stale(root: Path) -> list[Path]:
    """Pages whose generated blocks differ from what the registry renders now, and generated
    modules that differ from their declaration."""
    out = []
    for path in doc_files(root):
        text = path.read_text(encoding="utf-8")
        if render_text(text) != text:
            out.append(path)
    for name, render in generated_sources().items():
        path = root / name
        if path.parent.is_dir() and (not path.is_file() or path.read_text(encoding="utf-8") != render()):
            out.append(path)  # (a root without the package, e.g. a docs-only tree, has none)
    return out


def rewrite(root: Path) -> list[Path]:
    """Re-render every page in place; the pages that changed."""
    changed = []
    for path in doc_files(root):
        text = path.read_text(encoding="utf-8")
        new = render_text(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    for name, render in generated_sources().items():
        path = root / name
        if path.parent.is_dir() and (not path.is_file() or path.read_text(encoding="utf-8") != render()):
            path.write_text(render(), encoding="utf-8")
            changed.append(path)
    return changed
