"""Waiting in tests without betting on the machine's speed.

A test that gives a subprocess 90 s passes on a quiet laptop and fails on a CI runner shared
with eight other jobs (``pytest tests -n 2`` beside two busy loops: five
``subprocess.TimeoutExpired`` in the interrupt tests). Tests here wait for *events* — a file,
a line, a signal handler installed, the process exiting — and bound the wait only by
``PATIENCE``, a limit no loaded machine reaches while the process still makes progress; a
process that exits early ends the wait at once with its output, so a broken run fails fast.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

#: the longest any test waits for one event (seconds); ``HARNESS_TEST_PATIENCE`` overrides it.
#: Generous on purpose: it only matters when something hangs, and then CI's own timeout is near.
PATIENCE = float(os.environ.get("HARNESS_TEST_PATIENCE", "1800"))
_POLL = 0.05


def wait_until(condition: Callable[[], bool], what: str, proc: subprocess.Popen | None = None,
               patience: float = PATIENCE) -> None:
    """Poll ``condition`` until it holds; fail when ``proc`` exits first or after ``patience``."""
    deadline = time.monotonic() + patience
    while not condition():
        if proc is not None and proc.poll() is not None:
            if condition():
                return
            raise AssertionError(f"the process exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {patience:.0f} s")
        time.sleep(_POLL)


def record_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def wait_for_records(path: Path, count: int, proc: subprocess.Popen | None = None) -> list[str]:
    """The first ``count`` (or more) lines of a results.jsonl once they are there."""
    wait_until(lambda: len(record_lines(path)) >= count, f"{count} record(s) in {path}", proc)
    return record_lines(path)


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` installed (Linux: ``SigCgt`` in
    /proc/PID/status): the event "the process is ready to be interrupted"."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (int(sig) - 1)))
    except (OSError, ValueError):
        return False
    return False


def wait_exit(proc: subprocess.Popen, patience: float = PATIENCE) -> int:
    """The exit status; a process still alive after ``patience`` is killed and the test fails."""
    try:
        return proc.wait(timeout=patience)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise AssertionError(f"pid {proc.pid} still running after {patience:.0f} s") from None


def default_signals() -> None:
    """``preexec_fn`` for a process a test will signal: SIGINT, SIGQUIT, SIGHUP and SIGTERM back to
    their default dispositions. A test runner started in the background of a non-interactive shell
    (``cmd &``) ignores SIGINT and SIGQUIT, ``nohup`` ignores SIGHUP, children inherit what is
    ignored, and the harness (like Python itself) leaves an ignored signal ignored -- so without
    this the signal is never delivered and the test waits out PATIENCE (seen: a CI run started
    with ``nohup ... &`` sat 15 min on a SIGINT the run never saw)."""
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group a test started (``start_new_session=True``) and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
