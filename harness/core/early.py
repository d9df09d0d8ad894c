"""Signals that arrive before the harness can act on them are kept, not fatal.

Python leaves SIGTERM and SIGHUP at their defaults until someone installs a handler, and the
pytest plugin used to install its handlers only once pytest had configured itself: a CI
timeout or a closed terminal in the first seconds (imports, option checks, model intake)
killed the process with no message, no output directory and no summary. This module imports
nothing but the standard library, so the ``harness`` console script installs its recording
handler before anything else of the harness is imported (``harness/cli/__init__.py`` imports
it first); ``harness.cli.main`` replaces it with the raising guard
(``harness.core.interrupts.SignalGuard``) once it knows where the run's output goes, and acts on
a signal that came in between (``pending``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType

_SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)
_pending: list[int] = []


def record(signum: int, frame: FrameType | None) -> None:
    """The early handler: remember the first signal; ``main`` raises it at a safe point."""
    if not _pending:
        _pending.append(int(signum))


def pending() -> int | None:
    """The signal received while the early handler was installed (None: none)."""
    return _pending[0] if _pending else None


def clear() -> None:
    """Forget the pending signal (it has been acted on)."""
    _pending.clear()


def install() -> None:
    """Install ``record`` where a signal still has its default handler (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in _SIGNALS:
        current = signal.getsignal(signum)
        default = signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL
        if current is default or current == default:
            signal.signal(signum, record)


def restore() -> None:
    """Put the defaults back where ``record`` is still installed (``main`` is done)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in _SIGNALS:
        if signal.getsignal(signum) is record:
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)


def launched_as_command() -> bool:
    """Whether this interpreter runs the ``harness`` console script (not a test importing us)."""
    return os.path.basename(sys.argv[0] if sys.argv else "").removesuffix(".exe") in ("harness", "harness-script.py")
