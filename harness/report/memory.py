"""What a run needs of the machine: the peak resident memory of each case.

Rendered from the records' ``memory`` only (``harness.core.rss``): the run's peak (the highest
case), then the heaviest cases with their peak and what they left resident when they ended
(``end - start``: a case that keeps growing the process is holding something). ``summary.md``
has the section whenever the records carry memory; the terminal prints it beside the
durations (``harness run --durations N``).
"""

from __future__ import annotations

from typing import Iterable

from harness.core.markdown import table
from harness.results.record import Record
from harness.results.sections import Memory

SUMMARY_CASES = 5


def peak_bytes(record: Record) -> int | None:
    """The case's peak RSS in bytes (None: not recorded, e.g. an older record or a skip)."""
    value = Memory.of(record).peak_rss_bytes
    return value if value is not None and value > 0 else None


def growth_bytes(record: Record) -> int | None:
    """Resident bytes the case added to the process by its end (negative: it freed more)."""
    return Memory.of(record).growth_bytes


def heaviest(records: Iterable[Record], n: int) -> list[Record]:
    """The ``n`` cases with the highest peak RSS (all when ``n`` is 0), heaviest first."""
    ranked = sorted((r for r in records if peak_bytes(r) is not None), key=lambda r: peak_bytes(r) or 0,
                    reverse=True)
    return ranked if n == 0 else ranked[:n]


def gb(nbytes: int | None) -> str:
    if nbytes is None:
        return "–"
    return f"{nbytes / 1e9:.2f} GB" if abs(nbytes) >= 1e8 else f"{nbytes / 1e6:.0f} MB"


def _signed(nbytes: int | None) -> str:
    if nbytes is None:
        return "–"
    text = gb(abs(nbytes))
    return text if text == "0 MB" else ("+" if nbytes >= 0 else "-") + text


def markdown(records: Iterable[Record], n: int = SUMMARY_CASES) -> list[str]:
    """The ``## Memory`` section of summary.md (empty when no record carries memory)."""
    shown = heaviest(records, n)
    if not shown:
        return []
    top = shown[0]
    lines = ["", "## Memory", "",
             f"Peak resident memory of a case: **{gb(peak_bytes(top))}** ({top.id.replace('|', chr(92) + '|')}). "
             "`peak` is the case's own high-water mark; `left` is what it added to the process by its end.", "",
             ]
    lines += table(["rank", "peak RSS", "left", "case"],
                   [(rank, gb(peak_bytes(r)), _signed(growth_bytes(r)), r.id) for rank, r in enumerate(shown, 1)])
    return lines


def terminal_lines(records: Iterable[Record], n: int) -> list[str]:
    """Beside ``--durations N``: the N heaviest cases (0: all) by peak RSS."""
    shown = heaviest(records, n)
    if not shown:
        return ["no case recorded its memory"]
    lines = [f"heaviest {len(shown)} case(s) by peak RSS (left: added to the process by the case's end):"]
    lines += [f"  {gb(peak_bytes(r)):>9}  left {_signed(growth_bytes(r)):>9}  {r.id}" for r in shown]
    return lines
