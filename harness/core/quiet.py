"""Third-party output kept out of the harness's refusals.

A refusal is one line. But the libraries the harness drives write to the process's stderr
themselves: ONNX Runtime's C++ logger prints a coloured ``[E:onnxruntime:...]`` line before
the exception the harness turns into its message (a truncated external-data file), and
Python libraries emit warnings while reading what is then refused. ``routed_output`` runs
such a step with file descriptor 2 and Python warnings captured: when the step succeeds they
are replayed unchanged (nothing is hidden from a run that works); when it raises, the
exception is the report and what the libraries printed goes to a log file
(``$HARNESS_LOG``, else ``<tmp>/harness-third-party.log``) instead of the terminal.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def log_path() -> Path:
    """Where third-party output of a refused step goes."""
    return Path(os.environ.get("HARNESS_LOG") or Path(tempfile.gettempdir()) / "harness-third-party.log")


@contextmanager
def routed_output(step: str) -> Iterator[None]:
    """Capture fd 2 and warnings around ``step``: replayed on success, logged on an exception."""
    if threading.current_thread() is not threading.main_thread():  # fd 2 is the whole process's
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (embedded, closed): nothing to route
        yield
        return
    capture = tempfile.TemporaryFile()
    os.dup2(capture.fileno(), 2)
    failed = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            try:
                yield
            except BaseException:
                failed = True
                raise
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 2)
        os.close(saved)
        capture.seek(0)
        text = capture.read()
        capture.close()
        if failed:
            _log(step, text, [warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught])
        else:
            if text:
                os.write(2, text)
            for w in caught:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _log(step: str, text: bytes, caught: list[str]) -> None:
    if not text and not caught:
        return
    try:
        with log_path().open("ab") as fh:
            fh.write(f"--- {step} (refused; pid {os.getpid()})\n".encode())
            fh.write(text)
            fh.write("".join(caught).encode())
    except OSError:
        pass
