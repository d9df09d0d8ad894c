"""Renderers for a bisect result: ``bisect.json`` (machine), ``bisect.md`` and a rich table (people)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.debug.bisect import BisectResult, TensorResult


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _row(t: TensorResult) -> list[str]:
    return [str(t.order), t.node, t.op_type, t.tensor, _fmt(t.metrics.get("norm_max_abs", float("nan"))),
            _fmt(t.metrics.get("cosine", float("nan"))), "DIVERGES" if t.diverges else "ok"]


_HEADER = ["#", "node", "op", "tensor", "norm_max_abs", "cosine", "verdict"]


def headline(result: BisectResult) -> str:
    first = result.first_divergent
    if first is None:
        worst = result.top(1)
        tail = f"; worst tensor {worst[0].tensor} norm_max_abs {_fmt(worst[0].error)}" if worst else ""
        return f"no node exceeds the tolerance ({len(result.tensors)} tensors compared{tail})"
    return (f"first divergent node: {first.node} ({first.op_type}) -> {first.tensor}: {'; '.join(first.failed)}"
            + (f" [candidate producer {first.candidate_node} ({first.candidate_op})]"
               if first.candidate_node != first.node else ""))


def write_json(result: BisectResult, path: Path, meta: dict[str, Any], top: int) -> None:
    path.write_text(json.dumps({**meta, **result.as_dict(top)}, indent=2, default=str) + "\n")


def write_markdown(result: BisectResult, path: Path, meta: dict[str, Any], top: int) -> None:
    def table(rows: list[TensorResult]) -> list[str]:
        lines = ["| " + " | ".join(_HEADER) + " |", "|" + "---|" * len(_HEADER)]
        return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in _row(t)) + " |" for t in rows]

    rule = ", ".join(f"{c.metric} {c.symbol} {c.threshold:g}" for c in result.tolerance.checks)
    lines = [f"# bisect: {meta.get('model', '?')} / {meta.get('graph', '?')} / {meta.get('precision', '?')}", "",
             f"**{headline(result)}**", "", f"Rule: every activation must satisfy {rule}.",
             f"Compared {len(result.tensors)} tensors; {len(result.unmatched)} candidate tensors without an FP32 "
             f"counterpart, {len(result.missing)} FP32 tensors missing from the candidate, "
             f"{len(result.skipped)} skipped.", ""]
    path_rows = result.path()
    if path_rows:
        steps = [f"{t.op_type} {_fmt(t.error)}{' (' + g + ')' if g else ''}" for t, g in zip(path_rows, growth(path_rows))]
        lines += ["## Error growth into the first divergent tensor", "", " -> ".join(steps), ""] + table(path_rows) + [""]
    lines += [f"## Top {top} tensors by norm_max_abs", ""] + table(result.top(top)) + [""]
    path.write_text("\n".join(lines))


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

    from harness.report.console import cli_console

    console = cli_console()
    path = result.path()
    for title, rows, extra in (("error growth along the path", path, growth(path)),
                               (f"top {top} tensors", result.top(top), None)):
        if not rows:
            continue
        table = Table(title=title)
        for h in ["#", "node", "op", "norm_max_abs", "cosine"] + (["growth"] if extra else []) + ["verdict"]:
            table.add_column(h, overflow="fold")
        for i, t in enumerate(rows):
            cells = [escape(c) for c in _row(t)]
            del cells[3]
            if extra:
                cells.insert(5, extra[i])
            if t.diverges:
                cells[-1] = "[red]DIVERGES[/red]"
            table.add_row(*cells)
        console.print(table)
    console.print(escape(headline(result)), highlight=False)
