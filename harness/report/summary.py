"""``summary.md``: what a release engineer reads first. Renders records; computes nothing new."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Iterable

from harness.core.interrupts import MARKER, Interruption, write_marker
from harness.core.markdown import table
from harness.report.checks import format_checks, reason_line
from harness.report.coverage import markdown as coverage_markdown
from harness.report.durations import markdown as durations_markdown
from harness.report.highlights import highlights
from harness.report.memory import markdown as memory_markdown
from harness.report.perf_table import COLUMNS, model_tables, shown_columns
from harness.report.text import printable
from harness.results import VERDICTS, Record, Verdict
from harness.results.record import FAILING, RecordLike, judged_nothing, run_green
from harness.results.runheader import RunHeader
from harness.results.sections import Generation, Judged

SUMMARY_FILE = "summary.md"
#: verdict order in counts: the ones that need attention first
ORDER: tuple[Verdict, ...] = ("pass", "fail", "error", "not-run", "skip")
assert set(ORDER) == set(VERDICTS)
#: not-run case ids listed in an interrupted run's summary (the rest are counted)
NOT_RUN_LISTED = 50
#: the order of the "Needs attention" section
ATTENTION: tuple[Verdict, ...] = ("fail", "error", "not-run")
assert set(ATTENTION) == FAILING  # the verdicts that fail a run (results.record), in reading order


def attention(records: Iterable[Record]) -> list[Record]:
    """The cases a reader must look at, failures first, then errors, then cases that did not run."""
    return sorted((r for r in records if r.verdict in ATTENTION),
                  key=lambda r: (ATTENTION.index(r.verdict), r.suite or "", r.id))


def attention_lines(records: Iterable[Record], interruption: Interruption | None = None) -> list[str]:
    """One Markdown line per case that needs attention: verdict, case id, then the failing metric
    with its value and threshold (``reason_line``)."""
    lines = [f"- **{r.verdict}** {md_code(r.id)}: {md_cell(reason_line(r)[:300])}" for r in attention(records)]
    if interruption is not None:
        stopped = interruption.not_run
        lines += [f"- **not-run** {md_code(nodeid.split('::')[-1])}: stopped by {md_cell(interruption.signal)}"
                  for nodeid in stopped[:NOT_RUN_LISTED]]
        if len(stopped) > NOT_RUN_LISTED:
            lines.append(f"- … and {len(stopped) - NOT_RUN_LISTED} more not run")
    return lines


def status_line(records: list[Record], interruption: Interruption | None = None) -> str:
    """The first thing read: PASSED, FAILED or INTERRUPTED (never PASSED for a run cut short)."""
    counts = Counter(r.verdict for r in records)
    tally = ", ".join(f"{counts.get(v, 0)} {v}" for v in ORDER)
    if interruption is not None and not interruption.expected and not records:
        return f"INTERRUPTED by {interruption.signal} — stopped before the cases were collected; 0 finished"
    if interruption is not None:
        failed = " (FAILED among them)" if any(r.failed for r in records) else ""
        return (f"INTERRUPTED by {interruption.signal} — {len(interruption.not_run)} case(s) not run; "
                f"{len(records)} finished{failed}: {tally}")
    if judged_nothing(r.verdict for r in records):
        return f"FAILED — nothing was judged: all {len(records)} cases skipped ({tally})"
    status = "PASSED" if run_green(r.verdict for r in records) else "FAILED"
    return f"{status} — {len(records)} cases: {tally}"


def _headline(recs: list[Record], interruption: Interruption | None, problem: str | None) -> str:
    """The bold status line; a run cut short by ``problem`` (a full disk) says STOPPED and why."""
    head, sep, rest = ("STOPPED", " — ", md_cell(problem)) if problem else \
        status_line(recs, interruption).partition(" — ")
    return f"**{head}**{sep}{rest}"


def header_line(header: RunHeader) -> str:
    """The run's header as one Markdown line: when (UTC), host, machine, fingerprint, versions."""
    return " · ".join(f"**{label}** {md_code(value) if label == 'fingerprint' else md_cell(value)}"
                      for label, value in header.parts())


def perf_lines(records: list[Record], run_dir: Path | None = None) -> list[str]:
    """``## Performance per model``: each model's variant table (``harness.report.perf_table``),
    regressions first; nothing when the run has no perf records."""
    if not any(r.perf for r in records):
        return []
    lines = ["## Performance per model", ""]
    for model in model_tables(records, run_dir):
        shown = shown_columns(model)
        lines += [f"### {md_cell(model.model)}", ""]
        lines += table([COLUMNS[i] for i in shown],
                       [[md_code(c) if i == 0 else md_cell(c) for i, c in ((i, row.cells()[i]) for i in shown)]
                        for row in model.rows], align="ll" + "r" * (len(shown) - 2))
        if model.reference is None:
            lines.append(f"\nNo speedup: the run timed no PyTorch FP32 variant of {md_cell(model.model)}.")
        lines.append("")
    return lines


def render_summary(records: Iterable[RecordLike], title: str = "Model deployment gate", *,
                   interruption: Interruption | None = None, problem: str | None = None,
                   run_dir: Path | None = None) -> str:
    """``problem``: what stopped the run short of its results (a full disk), said first, in
    place of the status a finished run has; ``run_dir``: where the baseline gate's verdicts are
    read from (``perf-compare.json``), for the perf tables' change against the baseline."""
    recs = [Record.coerce(r) for r in records]
    lines = [f"# {title}", "", _headline(recs, interruption, problem), ""]
    if interruption is not None:
        lines.append(f"The run was stopped (exit {interruption.exit_code}). The {len(recs)} finished case(s) below "
                     "are kept in results.jsonl; the ones not run are listed under *Not run*. A rerun into the same "
                     "directory runs every selected case again, and each case's newest record supersedes the older "
                     "one (docs/reliability.md).")
        lines.append("")
    if recs:
        lines += [header_line(RunHeader.of(recs)), ""]
    needs = attention_lines(recs, interruption)
    if needs:
        lines += [f"## Needs attention ({len(needs)})", "", *needs, ""]
    lines += perf_lines(recs, run_dir)
    lines += ["## All cases", ""]
    lines += table(["case", "verdict", "worst checks", "reason"],
                   [(md_code(r.id), r.verdict, md_cell(format_checks(r)), md_cell(reason_line(r)[:160]))
                    for r in sorted(recs, key=lambda r: (r.suite or "", r.id))])
    lit = [(r, h) for r in sorted(recs, key=lambda r: (r.suite or "", r.id)) if any((h := highlights(r)).values())]
    if lit:
        lines += ["", "## Performance and runtime settings", ""]
        lines += table(["case", "latency", "generation", "runtime settings", "profile"],
                       [(md_code(r.id), md_cell(h["latency"]), md_cell(h["generation"]), md_cell(h["runtime"]),
                         md_cell(h["profile"]))
                        for r, h in lit])
    failed = [r for r in recs if r.failed]
    if failed:
        lines += ["", "## Failures", ""]
        for r in failed:
            lines.append(f"### {md_code(r.id)} ({r.verdict})")
            lines.append("")
            lines += _block(r.reason.strip())
            for output, where in Judged.of(r).worst.items():
                lines.append(f"- worst element of {md_code(output)}: {md_cell(where)}")
            lines.append("")
    if interruption is not None and interruption.not_run:
        lines += ["", "## Not run", ""]
        lines += [f"- `{md_cell(nodeid.split('::')[-1])}`" for nodeid in interruption.not_run[:NOT_RUN_LISTED]]
        if len(interruption.not_run) > NOT_RUN_LISTED:
            lines.append(f"- … and {len(interruption.not_run) - NOT_RUN_LISTED} more")
        lines.append("")

    lines += coverage_markdown(recs)

    lines += durations_markdown(recs)

    lines += memory_markdown(recs)
    pairs = [r for r in recs if Generation.of(r).worst_pairs]
    if pairs:
        lines += ["", "## Worst sentences per generation case", ""]
        for r in pairs:
            lines.append(f"### {md_code(r.id)}")
            lines.append("")
            lines += table(["#", "source", "reference", "PyTorch", "variant", "edit"],
                           [(md_cell(p.get("index", "")), md_cell(p.get("source")), md_cell(p.get("reference")),
                             md_cell(p.get("pytorch")), md_cell(p.get("variant")),
                             f"{p.get('edit_distance')} ({p.get('norm_edit_distance', 0):.2f})")
                            for p in Generation.of(r).worst_pairs])
            lines.append("")
    return "\n".join(lines) + "\n"


def md_cell(text: object) -> str:
    """One table cell of text from a corpus, a model or a record: control characters escaped, HTML
    inert (a ``<`` that could open a tag and an ``&`` that could start an entity written as entities:
    a corpus line ``<img src=x onerror=...>`` must not become markup in a rendered summary, while
    ``max_abs 0.5 <= 0.01`` still reads as it did), Markdown punctuation and pipes backslash-escaped."""
    cleaned = str(text if text is not None else "").replace("\n", " ")
    cleaned = _TAG_START.sub("&lt;", _ENTITY.sub("&amp;", cleaned))  # `<=` and `a & b` stay as they read
    cleaned = _MD_SPECIAL.sub(r"\\\g<0>", cleaned).replace("](", "]\\(")  # no emphasis, code, cells or links
    return printable(cleaned)


#: what could open an HTML tag, comment or declaration, and what could be read as an entity
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY = re.compile(r"&(?=#?\w+;)")
#: Markdown punctuation to backslash-escape; an underscore inside a word (``max_abs``) emphasises nothing
_MD_SPECIAL = re.compile(r"[\\`*|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md_code(text: object) -> str:
    """Inline code for an id or a name (it may come from a config's model name): a fence longer
    than any run of backticks inside it, control characters escaped."""
    cleaned = printable(str(text if text is not None else "").replace("\n", " "))
    fence = "`" * (max((len(run) for run in re.findall("`+", cleaned)), default=0) + 1)
    pad = " " if cleaned.startswith("`") or cleaned.endswith("`") else ""
    return f"{fence}{pad}{cleaned}{pad}{fence}"


def _block(text: str) -> list[str]:
    """A fenced block for a failure reason (text a model or a corpus may have put in): the fence
    is longer than any backtick run inside, so the block cannot be closed early."""
    cleaned = printable(text, keep_newlines=True)
    fence = "`" * max(3, max((len(run) for run in re.findall("`+", cleaned)), default=0) + 1)
    return [fence, cleaned, fence]


def write_summary(out_dir: Path, records: Iterable[RecordLike], *,
                  interruption: Interruption | None = None, problem: str | None = None) -> Path:
    path = Path(out_dir) / SUMMARY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_summary(records, interruption=interruption, problem=problem, run_dir=Path(out_dir)),
                    encoding="utf-8")
    return path


def write_interrupted_run(out_dir: Path, signum: int, started: float) -> bool:
    """A run stopped by ``signum`` before its pytest session wrote its own summary (start-up,
    option checks, model intake, pytest's configuration): ``interrupted.json`` and a
    ``summary.md`` that says so (0 cases run), so the run directory tells what happened as a
    run stopped mid-case does. Nothing is written when the session already did (a marker
    written since ``started``). True when this wrote them."""
    marker = Path(out_dir) / MARKER
    try:
        if marker.stat().st_mtime >= started:
            return False
    except OSError:
        pass
    stopped = Interruption(int(signum))
    write_marker(Path(out_dir), stopped)
    write_summary(Path(out_dir), [], interruption=stopped)
    return True


def write_note_summary(out_dir: Path, status: str, note: str, title: str = "Model deployment gate") -> Path:
    """``summary.md`` of a run directory that judges nothing by design (an empty shard of a split
    run): its bold status and why, where a run's summary has its cases."""
    path = Path(out_dir) / SUMMARY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {title}\n\n**{status}** — {note}\n", encoding="utf-8")
    return path
