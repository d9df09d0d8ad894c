"""Where rich tables go: the command line, or pytest's terminal reporter.

CI logs and pipes are not terminals, and rich then squeezes every table into 80 columns,
folding the reasons people need to read. Every table in the harness goes through here so
they all get the same width rules.
"""

from __future__ import annotations

import io
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

#: width used when stdout is not a terminal and COLUMNS is not set
PIPE_WIDTH = 160


def cli_console() -> Console:
    """A rich Console for a CLI command's stdout (rich imported lazily: `harness --help` stays fast)."""
    from rich.console import Console

    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    return Console(width=None if wide else PIPE_WIDTH, highlight=False)


def reporter_console(terminalreporter: Any, *, min_width: int = PIPE_WIDTH) -> tuple[Console, io.StringIO]:
    """A Console writing into a buffer for pytest's terminal summary (at least ``min_width``
    wide, colours when pytest has them); write ``buffer.getvalue()`` to the reporter after."""
    from rich.console import Console

    buffer = io.StringIO()
    width = getattr(getattr(terminalreporter, "_tw", None), "fullwidth", min_width)
    console = Console(file=buffer, width=max(min_width, width),
                      force_terminal=bool(getattr(terminalreporter, "hasmarkup", False)))
    return console, buffer
