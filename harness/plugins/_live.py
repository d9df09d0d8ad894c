"""The live progress display on a terminal (``--harness-progress auto`` when stdout is a TTY).

One region at the bottom of the terminal, redrawn a few times a second by rich::

    harness  12/60 cases  ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━  11 PASS  1 FAIL  elapsed 1 min 02 s  ETA 3 min 10 s
      gw0  marian-tiny-int8-ort_cpu generation  variant    12.3 s  (case 14.0 s)
      gw1  bert-tiny-fp32-ort_cpu logits        reference   0.4 s  (case 0.6 s)

pytest's own output (dots, ``-v`` lines, warnings, the summaries) is not lost: while the
display runs, the terminal reporter's file is :class:`AboveDisplay`, which prints every finished
line above the region. The display draws on a duplicate of the terminal's file descriptor,
taken before any test runs: pytest's fd-level capture points fd 1 at a temporary file while a
case runs (serial runs), and a redraw must still reach the screen, never a case's captured
output. Under pytest-xdist the controller draws; the workers only report their phases
(``harness/plugins/progress.py: PhaseFile``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import IO, Any

import pytest
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from harness.plugins.progress import Tally, _seconds, case_label

#: redraws per second (the phase files are read on each)
REFRESH_PER_SECOND = 4
#: running cases listed at most (the rest are counted)
MAX_ROWS = 8
_STYLE = {"PASS": "green", "FAIL": "bold red", "ERROR": "red", "SKIP": "yellow", "NOT-RUN": "bold magenta"}


class AboveDisplay:
    """The terminal reporter's file during the display: whole lines go above the live region.

    A partial line (pytest's dots before the ``[ 50%]`` that ends them) waits for its newline;
    ``flush`` does not print it, or every dot would get a line of its own."""

    def __init__(self, console: Console, original: IO[str]) -> None:
        self.console = console
        self.original = original
        self.buffer = ""

    @property
    def encoding(self) -> str:
        return str(getattr(self.original, "encoding", None) or "utf-8")

    def write(self, text: str) -> int:
        self.buffer += text
        if "\n" in self.buffer:
            lines, _, self.buffer = self.buffer.rpartition("\n")
            self._print(lines)
        return len(text)

    def _print(self, lines: str) -> None:
        # pytest rewrites "collecting ..." in place with carriage returns: keep what each line ends as
        text = "\n".join(line.rsplit("\r", 1)[-1] for line in lines.split("\n"))
        self.console.print(Text.from_ansi(text), soft_wrap=True, highlight=False)

    def drain(self) -> None:
        if self.buffer:
            self._print(self.buffer)
            self.buffer = ""

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.original.fileno()


class LiveDisplay(Tally):
    """Controller side on a terminal: cases done/total, the running cases and their phases,
    elapsed and ETA, redrawn in place."""

    def __init__(self, config: pytest.Config, folder: Path) -> None:
        super().__init__(config, folder)
        self.live: Live | None = None
        self.screen: IO[str] | None = None
        self.writer: Any = None
        self.proxy: AboveDisplay | None = None
        self.final = False

    # -- pytest hooks --------------------------------------------------------------------------------
    @pytest.hookimpl(trylast=True)  # after the terminal reporter wrote the session header
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.start()

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.close()  # before the terminal reporter writes its summaries (a hook wrapper, after this)

    def case_finished(self, nodeid: str, label: str, seconds: float) -> None:
        if self.live is not None:
            self.live.refresh()

    # -- the display ---------------------------------------------------------------------------------
    def start(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        writer = getattr(reporter, "_tw", None)
        original = getattr(writer, "_file", None)
        if writer is None or original is None or self.live is not None:
            return
        try:
            self.screen = os.fdopen(os.dup(original.fileno()), "w", encoding=getattr(original, "encoding", None)
                                    or "utf-8", errors="replace")
        except (OSError, ValueError, AttributeError):  # no real descriptor: leave pytest's output alone
            return
        console = Console(file=self.screen, force_terminal=True)
        self.proxy = AboveDisplay(console, original)
        self.writer = writer
        writer._file = self.proxy
        self.live = Live(_Frame(self), console=console, refresh_per_second=REFRESH_PER_SECOND, transient=False,
                         redirect_stdout=False, redirect_stderr=False)
        self.live.start()

    def close(self) -> None:
        if self.live is None:
            return
        self.final = True  # the last frame keeps the counter line only
        live, self.live = self.live, None
        live.stop()
        if self.writer is not None and self.proxy is not None:
            self.writer._file = self.proxy.original
            self.proxy.drain()
        if self.screen is not None:
            try:
                self.screen.flush()
                self.screen.close()
            except OSError:
                pass
            self.screen = None

    def fit(self) -> None:
        """Size the console from the terminal itself: rich asks fds 0-2, which pytest's capture
        points at files while a case runs (the display then shrank to 80 columns); a resized
        window is followed."""
        if self.live is None or self.screen is None:
            return
        try:
            size = os.get_terminal_size(self.screen.fileno())
        except (OSError, ValueError):
            return
        self.live.console.width, self.live.console.height = size.columns, size.lines

    def header(self) -> RenderableType:
        elapsed = time.monotonic() - self.started
        eta = None if self.final else self.eta_seconds()
        line = Table.grid(padding=(0, 2))
        cells: list[RenderableType] = [
            Text.assemble(("harness ", "bold"), (f"{self.done}/{self.total}", "bold cyan"), " cases") if self.total
            else Text.assemble(("harness ", "bold"), ("collecting", "cyan")),
            ProgressBar(total=float(max(self.total, 1)), completed=float(self.done), width=24),
            Text.assemble(*[(f"{n} {label}  ", _STYLE.get(label, "")) for label, n in sorted(self.labels.items())])
            if self.labels else Text("-"),
            Text(f"elapsed {_seconds(elapsed)}" + (f"  ETA {_seconds(eta)}" if eta is not None else "")),
        ]
        for _ in cells:
            line.add_column(no_wrap=True)
        line.add_row(*cells)
        return line

    def running_rows(self) -> RenderableType:
        table = Table.grid(padding=(0, 2))
        for _ in range(4):
            table.add_column(no_wrap=True, overflow="ellipsis")
        cases = self.in_flight()
        for case in cases[:MAX_ROWS]:
            variant, suite = case_label(case.nodeid)
            # between two phases the phase clock counts "other" (fixtures, pytest, side files)
            phase = Text(f"{case.phase or 'other'} {_seconds(case.in_phase)}" if case.in_phase else "other",
                         style="cyan")
            table.add_row(Text(case.worker or "▶", style="dim"), Text(f"{variant} {suite}"), phase,
                          Text(f"(case {_seconds(case.elapsed)})", style="dim"))
        if len(cases) > MAX_ROWS:
            table.add_row("", Text(f"... and {len(cases) - MAX_ROWS} more", style="dim"), "", "")
        return table


class _Frame:
    """What the display shows now (rich calls ``__rich__`` on every redraw)."""

    def __init__(self, display: LiveDisplay) -> None:
        self.display = display

    def __rich__(self) -> RenderableType:
        self.display.fit()
        if self.display.final:
            return self.display.header()
        return Group(self.display.header(), self.display.running_rows())
