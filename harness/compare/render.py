"""A ``RunComparison`` as a terminal table, Markdown (a PR comment or job summary) and HTML."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from harness.compare.diff import MetricDelta, RunComparison, VerdictChange
from harness.core.markdown import table
from harness.gate.causes import difference_lines
from harness.gate.compare import fmt_change, fmt_ci, fmt_p, fmt_value, gating_first
from harness.report.html.page import CSS
from harness.report.html.templating import markup, render
from harness.report.summary import header_line, md_cell, md_code
from harness.report.text import printable
from harness.report.units import metric_text

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

#: accuracy rows shown (worst first); the rest are counted
MAX_ROWS = 200


def _num(value: float, key: str = "") -> str:
    """A compared value of metric ``key`` (6 digits: a small move must show)."""
    return metric_text(key, value, digits=6)


def _pct(value: float) -> str:
    return "" if math.isnan(value) else f"{value:+.2%}"


def _v(verdict: str | None) -> str:
    return verdict or "—"


def _setting(v: VerdictChange) -> str:
    """The runtime-settings column: what changed between the paired cases (A's id when it differs)."""
    parts = [v.settings] if v.settings else []
    if v.case_a:
        parts.append(f"A: {v.case_a}")
    return "; ".join(parts)


def _accuracy_cells(d: MetricDelta) -> list[str]:
    return [d.case, d.key, _num(d.before, d.key), _num(d.after, d.key), _num(d.delta, d.key), _pct(d.relative),
            d.change]


def _perf_cells(cmp: RunComparison) -> list[list[str]]:
    if cmp.perf is None:
        return []
    return [[r.variant, r.metric, fmt_value(r.base, r.kind), fmt_value(r.cand, r.kind), fmt_change(r.ratio),
             fmt_ci(r.ci_lo, r.ci_hi), fmt_p(r.p_value), r.verdict.value + (" (advisory)" if r.advisory else ""),
             r.reason] for r in gating_first(cmp.perf.rows)]


def _no_moves(cmp: RunComparison) -> str:
    """No accuracy number moved: say over how many paired cases (none paired is not "identical")."""
    if not cmp.paired:
        return "nothing compared: no case of A pairs with a case of B"
    if cmp.identical:
        return (f"none: every metric of the {cmp.paired} paired case(s) is identical, and no tolerance, setting, "
                "version or environment differs")
    return (f"no metric value of the {cmp.paired} paired case(s) moved; what differs is listed under "
            "\"differences between the runs\"" + (" (the verdict changes follow from it)" if cmp.verdicts else ""))


def _differences(cmp: RunComparison) -> list[str]:
    """The differences between the runs, one line each; the first thing every output shows."""
    return difference_lines(cmp.differences)


ACCURACY_HEADER = ["case", "metric", "A", "B", "delta", "relative", "change"]
PERF_HEADER = ["variant", "metric", "A", "B", "change", "95% CI", "p", "verdict", "reason"]


def to_markdown(cmp: RunComparison) -> str:
    lines = [f"# Compare {md_code(cmp.name_a)} → {md_code(cmp.name_b)}", ""]
    lines += [f"- {name}: {header_line(header)}" for name, header in zip("AB", cmp.headers)]
    lines += ["", f"**{md_cell(cmp.headline())}**", ""]
    lines += ["## Differences between the runs", ""] + [f"- {md_cell(d)}" for d in _differences(cmp)] + [""]
    lines += ["## Verdict changes", ""]
    if cmp.verdicts:
        lines += table(["case", "A", "B", "runtime settings", "reason (B)"],
                       [[md_code(v.case), _v(v.before), f"**{_v(v.after)}**" if v.worse else _v(v.after),
                         md_cell(_setting(v)), md_cell(v.reason[:160])] for v in cmp.verdicts])
    else:
        lines.append(f"none ({cmp.unchanged_cases} case(s) with the same verdict)")
    lines += ["", "## Accuracy metrics that moved", ""]
    if cmp.accuracy:
        cells = [_accuracy_cells(d) for d in cmp.accuracy[:MAX_ROWS]]
        lines += table(ACCURACY_HEADER, [[md_code(c[0]), md_code(c[1]), *(md_cell(x) for x in c[2:])] for c in cells],
                       align="llrrrrl")
        if len(cmp.accuracy) > MAX_ROWS:
            lines.append(f"\n… and {len(cmp.accuracy) - MAX_ROWS} more (all in the HTML/JSON output)")
    else:
        lines.append(_no_moves(cmp))
    if cmp.accuracy_gate is not None:
        lines += ["", "## Accuracy gate (B against A's margins)", "", cmp.accuracy_gate.to_markdown().rstrip()]
    lines += ["", "## Performance (statistical gate)", ""]
    rows = _perf_cells(cmp)
    if rows:
        lines += table(PERF_HEADER, [[md_cell(c) for c in row] for row in rows], align="llrrrlrll")
    else:
        lines.append("no performance measurements on both sides (run both with `--perf`)")
    return "\n".join(lines) + "\n"


def render_terminal(cmp: RunComparison, console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    console.print(Text(f"compare {cmp.name_a} -> {cmp.name_b}", style="bold"))
    console.print(Text("differences between the runs:", style="bold"))
    for d in _differences(cmp):
        console.print(Text(f"  {printable(d)}", style="yellow" if cmp.differences else ""))
    table = Table(title="verdict changes")
    for column in ("case", "A", "B", "runtime settings", "reason (B)"):
        table.add_column(column)
    for v in cmp.verdicts:
        style = "bold red" if v.worse else ""
        table.add_row(Text(printable(v.case)), Text(_v(v.before)), Text(_v(v.after), style=style),
                      Text(printable(_setting(v))), Text(printable(v.reason[:120])))
    if cmp.verdicts:
        console.print(table)
    else:
        console.print(f"no verdict changes ({cmp.unchanged_cases} case(s) with the same verdict)")
    if cmp.accuracy:
        acc = Table(title=f"accuracy metrics that moved ({len(cmp.accuracy)})")
        for column in ACCURACY_HEADER:
            acc.add_column(column, justify="right" if column in ("A", "B", "delta", "relative") else "left")
        for delta in cmp.accuracy[:40]:
            colour = {"worse": "red", "better": "green"}.get(delta.change, "")
            acc.add_row(*(Text(printable(c)) for c in _accuracy_cells(delta)[:-1]), Text(delta.change, style=colour))
        console.print(acc)
        if len(cmp.accuracy) > 40:
            console.print(f"... and {len(cmp.accuracy) - 40} more (--markdown / --html for all)")
    else:
        console.print("accuracy: " + _no_moves(cmp))
    if cmp.accuracy_gate is not None:
        cmp.accuracy_gate.render_table(console)
    if cmp.perf is not None and cmp.perf.rows:
        cmp.perf.render_table(console)
    else:
        console.print("perf: no performance measurements on both sides")
    failed = cmp.regressed or cmp.compared.failed
    console.print(Text(cmp.headline(), style="bold red" if failed else "bold green"))


def _table(header: list[str], rows: list[list[str]], classes: list[str]) -> dict[str, Any] | None:
    """A table for ``compare.html.j2``: its header and (printable cells, row class) per row."""
    if not rows:
        return None
    return {"header": header, "rows": [([printable(c) for c in row], cls) for row, cls in zip(rows, classes)]}


def to_html(cmp: RunComparison) -> str:
    """The page of ``harness compare --html`` (``templates/compare.html.j2``, autoescape on)."""
    gate = None
    if cmp.accuracy_gate is not None:
        judged = cmp.accuracy_gate.shown()
        gate_rows = [[r.variant, r.key, _num(r.base, r.key), _num(r.cand, r.key), _num(r.delta, r.key),
                      _num(r.allowed, r.key),
                      r.verdict.value + (" (advisory)" if r.advisory else ""), r.reason] for r in judged]
        gate = {"headline": cmp.accuracy_gate.headline(),
                "table": _table(["variant", "metric", "A", "B", "delta", "margin", "verdict", "reason"], gate_rows,
                                ["bad" if r.gating_regression else "" for r in judged])}
    rows = _perf_cells(cmp)
    return render("compare.html.j2", title=f"compare {cmp.name_a} → {cmp.name_b}", css=markup(CSS),
                  headers=[(name, header.parts()) for name, header in zip((cmp.name_a, cmp.name_b), cmp.headers)],
                  state="failed" if cmp.regressed or cmp.compared.failed else "passed", headline=cmp.headline(),
                  differences=[printable(d) for d in _differences(cmp)],
                  verdicts=_table(["case", "A", "B", "runtime settings", "reason (B)"],
                                  [[v.case, _v(v.before), _v(v.after), _setting(v), v.reason[:200]] for v in cmp.verdicts],
                                  ["bad" if v.worse else "" for v in cmp.verdicts]),
                  unchanged=cmp.unchanged_cases, no_moves=_no_moves(cmp),
                  accuracy=_table(ACCURACY_HEADER, [_accuracy_cells(d) for d in cmp.accuracy],
                                  ["bad" if d.change == "worse" else "" for d in cmp.accuracy]),
                  gate=gate, perf=_table(PERF_HEADER, rows, ["bad" if "REGRESSION" in r[7] else "" for r in rows]))
