"""What ``harness check`` prints: the files, how their I/O met the reference's, and the
numbers per output. Renders an outcome; computes nothing new."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.check.io_match import role
from harness.check.judge import CheckOutcome
from harness.check.perf import describe
from harness.judge.generation import GenerationResult
from harness.metrics.registry import METRICS, Scope
from harness.report.terminal import STYLE
from harness.report.text import printable

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import JustifyMethod

#: metrics shown per output, in this order (gated ones always, the others when computed)
COLUMNS = ("training_mode_ops", "norm_max_abs", "cosine", "top1_agreement", "kl", "embedding_cosine",
           "embedding_cosine_min", *METRICS.names(Scope.SPAN), "max_abs", "mean_abs", "rel_l2")
INFO = frozenset({"max_abs", "mean_abs", "rel_l2", "span_token_f1"})  # shown whenever computed
_GEN = tuple(s.name for s in METRICS.of(Scope.GENERATION) if s.headline)  # declared headline metrics


def print_outcome(outcome: CheckOutcome, console: Console) -> None:
    spec = outcome.spec
    console.print(f"[bold]harness check[/] {escape(spec.name)} ({spec.family}) at {outcome.variant.precision.value} "
                  f"on {outcome.variant.provider.short}; precision {escape(outcome.precision_note)}")
    _print_artifacts(outcome, console)
    _print_matching(outcome, console)
    console.print(metrics_table(outcome))
    for result in outcome.jobs:
        for out in result.outputs:
            if out.worst is not None and out.failures():
                console.print(f"  worst element of {escape(out.graph)}.{escape(out.output)}: "
                              f"{escape(out.worst.describe(out.axis_names))}")
    for result in outcome.jobs:
        if result.error:
            console.print(f"[red]error[/] {_safe(result.error)}")
    if outcome.perf:
        _print_perf(outcome.perf, console)
    if outcome.generation is not None:
        console.print(generation_table(outcome.generation))
    for note in outcome.notes:
        console.print(f"note: {escape(note)}")
    _print_verdicts(outcome, console)


def _print_artifacts(outcome: CheckOutcome, console: Console) -> None:
    files = Table(title="artifacts", title_justify="left")
    for col in ("file", "role", "precision", "opset", "producer", "MB", "sha256"):
        files.add_column(col)
    for a in outcome.artifacts:
        files.add_row(escape(str(a.path)), a.role, a.precision, str(a.opsets.get("", "?")), escape(a.producer or "?"),
                      f"{a.bytes / 1e6:.2f}", a.sha256[:12])
    console.print(files)


def _print_matching(outcome: CheckOutcome, console: Console) -> None:
    """How each artifact's inputs and outputs were matched to the reference graph's."""
    for result in outcome.jobs:
        if result.match is None:
            continue
        table = Table(title=f"I/O matching: {escape(result.job.label)} -> reference graph '{result.job.graph.name}'",
                      title_justify="left")
        for col in ("", "reference", "artifact", "matched by", "detail"):
            table.add_column(col, overflow="fold")
        for row in compact_account(result.match.account()):
            table.add_row(row["side"], escape(row["reference"] or "-"), escape(row["artifact"] or "-"),
                          escape(row["how"]), escape(row["detail"]))
        console.print(table)
        if result.protocol is not None:
            console.print(f"  protocol: {escape('; '.join(result.protocol.describe()))}")
        for note in result.notes:
            console.print(f"  note: {escape(note)}")


def _print_perf(perf: Any, console: Console) -> None:
    console.print("[bold]performance[/] (harness check --perf)")
    for line in describe(perf):  # a served model: the load sweep, one line per concurrency level
        console.print(f"  {escape(line)}")


def _print_verdicts(outcome: CheckOutcome, console: Console) -> None:
    for record in outcome.records:
        verdict = record.verdict
        lines = record.reason.splitlines() if record.reason else []
        console.print(f"[{STYLE.get(verdict, '')}]{verdict.upper()}[/] {escape(record.id)}"
                      + (f": {_safe(lines[0])}" if lines else ""))
        for line in lines[1:8]:
            console.print(f"  {_safe(line.strip())}")


def compact_account(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """KV-cache tensors matched name for name collapse into one line per side; every
    other pairing (and any cache tensor matched another way) stays explicit."""
    out: list[dict[str, Any]] = []
    folded: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        same = row["reference"] and row["reference"] == row["artifact"] and row["how"] == "name"
        if same and role(row["reference"]).kv is not None:
            folded.setdefault(row["side"], []).append(row)
            continue
        out.append(row)
    for side, group in folded.items():
        if len(group) == 1:
            out.append(group[0])
            continue
        names = f"{group[0]['reference']} .. {group[-1]['reference']}"
        out.append({"side": side, "reference": f"{len(group)} cache tensors", "artifact": names, "how": "name",
                    "detail": group[0]["detail"]})
    return out


def metrics_table(outcome: CheckOutcome) -> Table:
    """One row per (output, metric): gated metrics with their threshold, then the errors
    that explain them (max/mean absolute, relative L2), so a failure shows its size."""
    table = Table(title="numeric parity vs PyTorch FP32", title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("graph.output", "left"), ("n", "right"), ("metric", "left"), ("value", "right"), ("gate", "left"), ("", "left"))
    for col, justify in columns:
        table.add_column(col, justify=justify, overflow="fold")
    for result in outcome.jobs:
        ungated = [o for o in result.outputs if o.tolerance is None]
        for out in result.outputs:
            if out.tolerance is None:
                continue
            checks = {c.metric: c for c in out.tolerance.checks}
            names = [m for m in COLUMNS if m in out.metrics and (m in checks or m in INFO)]
            names += [m for m in checks if m in out.metrics and m not in names]
            for i, metric in enumerate(names):
                value, check = out.metrics[metric], checks.get(metric)
                if check is None:
                    gate, mark = "", ""
                else:
                    ok = check.passes(value)
                    gate, mark = f"{check.symbol} {check.threshold:g}", "[green]ok[/]" if ok else "[bold red]FAIL[/]"
                table.add_row(escape(f"{out.graph}.{out.output}") if i == 0 else "", str(out.n_compared) if i == 0
                              else "", metric, _fmt(value), gate, mark)
        if ungated:  # KV-cache outputs: reported in the record, summarised here
            worst = max(ungated, key=lambda o: o.metrics.get("max_abs", 0.0))
            table.add_row(escape(f"{result.job.key}.<{len(ungated)} cache outputs>"),
                          str(sum(o.n_compared for o in ungated)), "max_abs (worst)",
                          _fmt(worst.metrics.get("max_abs", math.nan)), f"not gated ({escape(worst.output)})", "")
    return table


def generation_table(result: GenerationResult) -> Table:
    checks = {c.metric: c for c in result.checks}
    table = Table(title=f"generation parity vs PyTorch FP32 decode ({int(result.metrics.get('gen_sentences', 0))} "
                        "sentences)", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("gate")
    for name in dict.fromkeys(_GEN + tuple(checks)):
        if name not in result.metrics:
            continue
        value = result.metrics[name]
        check = checks.get(name)
        gate = "" if check is None else f"{check.symbol} {check.threshold:g}" + ("" if check.passes(value) else " ✗")
        table.add_row(name, _fmt(value), gate)
    table.caption = _safe(result.first_divergence())  # decoded model text: may hold ESC and friends
    return table


def _safe(text: object) -> str:
    """Text a model or a corpus produced, for the terminal: Rich markup escaped and control
    characters shown as ``\\xNN`` (a decoded ESC sequence must not drive the terminal)."""
    return escape(printable(text))


def _fmt(value: float) -> str:
    if value != value or math.isinf(value):
        return str(value)
    if 0.99 <= value < 1.0:  # similarities: show how far from 1 they are
        return f"{value:.7f}"
    return f"{value:.4g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"
