"""Renderers for a bisect result: ``bisect.json`` (machine), ``bisect.md`` and a rich table (people)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.core.markdown import table
from harness.debug.bisect import BisectResult, ModuleRow, TensorResult
from harness.report.console import cli_console
from harness.report.html.plots import error_along_graph, module_growth
from harness.report.html.templating import markup, render


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _row(t: TensorResult) -> list[str]:
    return [str(t.order), t.node, t.op_type, t.tensor, _fmt(t.metrics.get("norm_max_abs", float("nan"))),
            _fmt(t.metrics.get("cosine", float("nan"))), "DIVERGES" if t.diverges else "ok", _module(t)]


def _module(t: TensorResult) -> str:
    return f"{t.module} ({t.module_class})" if t.module and t.module_class else t.module or "?"


_HEADER = ["#", "node", "op", "tensor", "norm_max_abs", "cosine", "verdict", "PyTorch module"]
_MODULE_HEADER = ["module", "class", "nodes", "tensors", "divergent", "output error", "growth", "max error",
                  "max |FP32|"]


def _module_row(r: ModuleRow) -> list[str]:
    return [r.module + (" ◀ first divergent" if r.first_divergent else ""), r.module_class or "",
            f"{r.first_order}-{r.last_order}", str(r.tensors), str(r.divergent), _fmt(r.output_error),
            f"x{r.growth:.3g}" if r.growth is not None else "", _fmt(r.max_error), _fmt(r.ref_max)]


def headline(result: BisectResult) -> str:
    first = result.first_divergent
    if first is None:
        worst = result.top(1)
        tail = f"; worst tensor {worst[0].tensor} norm_max_abs {_fmt(worst[0].error)}" if worst else ""
        return f"no node exceeds the tolerance ({len(result.tensors)} tensors compared{tail})"
    return (f"first divergent node: {first.node} ({first.op_type}) -> {first.tensor}: {'; '.join(first.failed)}"
            + (f" [candidate producer {first.candidate_node} ({first.candidate_op})]"
               if first.candidate_node != first.node else "")
            + (f"; PyTorch module: {_module(first)}" if first.module else "")
            + _overflow_line(result))


def _overflow_line(result: BisectResult) -> str:
    over = result.first_overflow
    if over is None or over is result.first_divergent:
        return ""
    return (f"\nfirst FP16 overflow: {over.node} ({over.op_type}): |FP32| up to {over.ref_max:.3g} > 65504, "
            f"norm_max_abs {_fmt(over.error)}" + (f"; PyTorch module: {_module(over)}" if over.module else ""))


def write_json(result: BisectResult, path: Path, meta: dict[str, Any], top: int) -> None:
    path.write_text(json.dumps({**meta, **result.as_dict(top)}, indent=2, default=str) + "\n")


def write_markdown(result: BisectResult, path: Path, meta: dict[str, Any], top: int) -> None:
    def tensors(rows: list[TensorResult]) -> list[str]:
        return table(_HEADER, [_row(t) for t in rows])

    rule = ", ".join(f"{c.metric} {c.symbol} {c.threshold:g}" for c in result.tolerance.checks)
    lines = [f"# bisect: {meta.get('model', '?')} / {meta.get('graph', '?')} / {meta.get('precision', '?')}", "",
             f"**{headline(result)}**", "", f"Rule: every activation must satisfy {rule}.",
             f"Compared {len(result.tensors)} tensors; {len(result.unmatched)} candidate tensors without an FP32 "
             f"counterpart, {len(result.missing)} FP32 tensors missing from the candidate, "
             f"{len(result.skipped)} skipped.", ""]
    path_rows = result.path()
    if path_rows:
        steps = [f"{t.op_type} {_fmt(t.error)}{' (' + g + ')' if g else ''}" for t, g in zip(path_rows, growth(path_rows))]
        lines += ["## Error growth into the first divergent tensor", "", " -> ".join(steps), ""] + tensors(path_rows) + [""]
    lines += [f"## Top {top} tensors by norm_max_abs", ""] + tensors(result.top(top)) + [""]
    if result.modules is not None:
        m = result.modules
        lines += ["## Error growth by PyTorch module", "",
                  f"Node -> module from {m.source} ({len(m.nodes)} of {m.total} nodes mapped"
                  f"{', checked against the model' + chr(39) + 's named_modules()' if m.validated else ', not validated'}). "
                  "Modules in topological order of their first tensor; *output error* is the norm_max_abs of the "
                  "module's last tensor, *growth* its ratio to the previous row's.", ""]
        for level, title in (("layer", "Per layer"), ("module", "Per module")):
            rows = result.module_table(level)
            lines += [f"### {title}", "", *table(_MODULE_HEADER, [_module_row(r) for r in rows]), ""]
    path.write_text("\n".join(lines))


def write_html(result: BisectResult, path: Path, meta: dict[str, Any]) -> None:
    """``bisect.html``: the error along the graph and per layer as inline SVG (matplotlib, the
    HTML report's plotting), the first divergent tensor marked, and the module table."""
    threshold = next((c.threshold for c in result.tolerance.checks if c.metric == "norm_max_abs"), None)
    first = result.first_divergent
    points = [(t.order, t.error, t.diverges) for t in result.tensors]
    layers = result.module_table("layer")
    bands = [(r.first_order, r.last_order, r.module) for r in layers]
    title = f"{meta.get('model', '?')} / {meta.get('graph', '?')} / {meta.get('precision', '?')}"
    over = result.first_overflow
    plot = error_along_graph(points, bands, threshold,
                             (first.order, _module(first) if first.module else first.node) if first else None,
                             f"{title}: error of every activation",
                             (over.order, _module(over) if over.module else over.node) if over else None)
    bars = module_growth([(r.module, r.output_error, r.first_divergent) for r in layers], threshold,
                         f"{title}: output error per layer")
    page = render("bisect.html.j2", title=title, headline=headline(result).split("\n"), plot=markup(plot),
                  bars=markup(bars), header=_MODULE_HEADER,
                  rows=[_module_row(r) for r in result.module_table("module")])
    path.write_text(page, encoding="utf-8")


def growth(rows: list[TensorResult]) -> list[str]:
    """Error of each path step relative to the step before: where the jump happens."""
    out, before = [], None
    for t in rows:
        out.append("" if before is None or not before else f"x{t.error / before:.3g}")
        before = t.error
    return out


def print_tables(result: BisectResult, top: int) -> None:
    """Terminal view; the tensor name is left to bisect.md/json (it mostly repeats the node name)."""
    from rich.markup import escape
    from rich.table import Table


    console = cli_console()
    path = result.path()
    for title, rows, extra in (("error growth along the path", path, growth(path)),
                               (f"top {top} tensors", result.top(top), None)):
        if not rows:
            continue
        table = Table(title=title)
        for h in ["#", "node", "op", "norm_max_abs", "cosine"] + (["growth"] if extra else []) + ["verdict", "module"]:
            table.add_column(h, overflow="fold")
        for i, t in enumerate(rows):
            cells = [escape(c) for c in _row(t)]
            del cells[3]
            if extra:
                cells.insert(5, extra[i])
            if t.diverges:
                cells[-2] = "[red]DIVERGES[/red]"
            table.add_row(*cells)
        console.print(table)
    if result.modules is not None and result.modules.nodes:
        table = Table(title="error growth per layer (topological order)")
        for h in _MODULE_HEADER:
            table.add_column(h, overflow="fold")
        for r in result.module_table("layer"):
            cells = [escape(c) for c in _module_row(r)]
            if r.first_divergent:
                cells[0] = f"[red]{cells[0]}[/red]"
            table.add_row(*cells)
        console.print(table)
    console.print(escape(headline(result)), highlight=False)
