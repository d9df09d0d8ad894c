"""Interrupts end a run cleanly and say so.

Python turns SIGINT into ``KeyboardInterrupt`` (which pytest already handles: it stops, then
runs its session-finish hooks) but leaves SIGTERM and SIGHUP at their defaults, which kill
the process without a summary or a message — what a CI timeout or a closed terminal sends.
``SignalGuard`` routes all three through the same path: the handler raises ``Interrupted``
(a ``KeyboardInterrupt`` carrying the signal), so pytest unwinds, finished records stay, and
the summary can say INTERRUPTED with the exit code ``128 + signal`` (130 SIGINT, 143 SIGTERM,
129 SIGHUP) — the shell's convention, distinct from pass 0, fail 1 and usage 2.

Handlers are installed only over the defaults (a handler someone else set, or SIGHUP ignored
by ``nohup``, is left alone), only from the main thread, and restored by ``uninstall``.
"""

from __future__ import annotations

import json
import signal
import sysconfig
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Mapping

#: the signals that end a run cleanly (SIGHUP does not exist on Windows)
SIGNALS: tuple[signal.Signals, ...] = tuple(
    s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)


def exit_code(signum: int) -> int:
    """The exit status of a run ended by ``signum``: 128 + its number, as a shell reports it."""
    return 128 + int(signum)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread when an interrupt signal arrives."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = int(signum)


def signal_of(exc: BaseException) -> int | None:
    """The signal behind an exception that stopped a run: ``Interrupted`` carries it, a plain
    ``KeyboardInterrupt`` is Ctrl-C (SIGINT) under someone else's handler. Anything else is no
    signal: ``pytest.exit``, and pytest-xdist's own ``KeyboardInterrupt`` subclass, which it
    raises to stop after ``-x``/``--maxfail`` failures (that run failed; it was not interrupted)."""
    if isinstance(exc, Interrupted):
        return exc.signum
    if type(exc) is KeyboardInterrupt:
        return int(signal.SIGINT)
    return None


@dataclass(frozen=True)
class Interruption:
    """What a summary says about a run that did not finish."""

    signum: int
    not_run: tuple[str, ...] = ()
    expected: int = 0
    #: node id -> the case's identity (``CaseIdentity.as_dict``) for the not-run cases whose
    #: collection said who they are (serial runs; xdist's controller sees ids only)
    cases: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, compare=False)

    @property
    def signal(self) -> str:
        return signal_name(self.signum)

    @property
    def exit_code(self) -> int:
        return exit_code(self.signum)


#: beside results.jsonl while the newest run in that directory was interrupted: a later
#: ``harness report`` says INTERRUPTED as summary.md did, not PASSED over the finished cases
MARKER = "interrupted.json"


def write_marker(out_dir: Path, stopped: Interruption | None) -> None:
    """Record (or, for a run that finished, clear) the directory's interruption."""
    path = Path(out_dir) / MARKER
    if stopped is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)  # interrupted before the first record: not made yet
    data = {"schema": "harness.interrupted/1", "signal": stopped.signal, "signum": stopped.signum,
            "not_run": list(stopped.not_run), "expected": stopped.expected,
            "cases": {n: dict(c) for n, c in stopped.cases.items()}}
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def read_marker(out_dir: Path) -> Interruption | None:
    """The interruption of the directory's newest run, or None (finished, or an older harness).
    An unreadable marker is treated as absent: the records stay the source of truth."""
    try:
        data = json.loads((Path(out_dir) / MARKER).read_text(encoding="utf-8"))
        cases = data.get("cases") or {}
        return Interruption(int(data["signum"]), tuple(str(n) for n in data.get("not_run", ())),
                            int(data.get("expected", 0)),
                            {str(n): dict(c) for n, c in cases.items() if isinstance(c, dict)})
    except (OSError, ValueError, KeyError, TypeError):
        return None


Handler = Callable[[int, FrameType | None], Any] | int | None

#: how often a signal deferred past a library import is delivered again (seconds)
REDELIVERY_S = 0.02


def _library_roots() -> tuple[str, ...]:
    """Where library code lives: the standard library, site-packages, the harness itself."""
    paths = sysconfig.get_paths()
    roots = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.add(str(Path(__file__).resolve().parents[1]))
    return tuple(sorted(r.rstrip("/") + "/" for r in roots if r)) + ("<frozen ",)


_LIBRARY_ROOTS = _library_roots()


def library_import(frame: FrameType | None) -> str | None:
    """The library module whose top-level code runs in ``frame`` or a caller (being imported,
    not run as ``__main__``), else None.

    Why it matters: an exception raised inside a library's import leaves it half-initialised in
    ways a later import cannot repair -- ``torch`` without ``torch.distributed``, ``onnx``
    without ``onnx.defs``, native extensions whose global registries (protobuf descriptors,
    operator tables) already hold the first attempt and abort the process on the second: the
    ``Fatal Python error: Aborted`` of a Ctrl-C in the first seconds of a run. A user's own
    suite module is not a library: a signal during its slow import still stops it at once."""
    while frame is not None:
        code = frame.f_code
        if (code.co_name == "<module>" and code.co_filename.startswith(_LIBRARY_ROOTS)
                and frame.f_globals.get("__name__") != "__main__" and _run_by_import(frame)):
            return code.co_filename
        frame = frame.f_back
    return None


def _run_by_import(frame: FrameType) -> bool:
    """Whether a module's top-level ``frame`` runs because the import system is loading it.

    A ``<module>`` frame of a library file is not always an import: pytest-xdist's workers run
    ``xdist/remote.py`` through execnet's ``exec`` (``__name__`` is ``__channelexec__``), and that
    frame stays on the stack for the worker's whole life -- taken for an import, every signal in
    a worker was deferred again and again, never raised. An import's module code is called by
    importlib's loader (``_call_with_frames_removed`` in ``<frozen importlib._bootstrap>``)."""
    caller = frame.f_back
    return caller is not None and caller.f_code.co_filename.startswith("<frozen importlib._bootstrap")


@dataclass
class SignalGuard:
    """Installs the raising handler for ``SIGNALS`` over their defaults; ``received`` is the
    first signal seen."""

    received: int | None = None
    _previous: dict[int, Handler] = field(default_factory=dict)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
        if library_import(frame) is not None:  # never inside a library's import: once it is done
            timer = threading.Timer(REDELIVERY_S, self._redeliver, (signum,))
            timer.daemon = True
            timer.start()
            return
        raise Interrupted(signum)

    def _redeliver(self, signum: int) -> None:
        """Deliver a deferred signal again -- only while this guard is installed. After
        ``uninstall`` the handler is someone else's (the next test's, or the default that kills
        the process): a redelivery then would stop whatever runs next, as a stray SIGINT once
        brought down a pytest-xdist worker in the middle of another test. ``received`` keeps it."""
        if signum in self._previous:
            signal.raise_signal(signum)

    @staticmethod
    def _is_default(signum: int, current: Handler) -> bool:
        if signum == signal.SIGINT:
            return current is signal.default_int_handler
        return current == signal.SIG_DFL

    def install(self, replaceable: tuple[Handler, ...] = ()) -> bool:
        """Install where the handler is still the default (or one of ``replaceable``: the
        command line's start-up recorder); False when not in the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for signum in SIGNALS:
            current = signal.getsignal(signum)
            if self._is_default(signum, current) or any(current is r for r in replaceable):
                self._previous[signum] = current
                signal.signal(signum, self._handle)
        return True

    def uninstall(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._handle:
                signal.signal(signum, previous)
        self._previous.clear()


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold ``SIGNALS`` during a short critical section, then deliver the first one that came.

    Why: a signal raises at any bytecode boundary, and the record collector's "case finished"
    is three steps -- mark it finished, append its line to results.jsonl, keep it for the
    summary. A SIGINT that landed between the last two (the interrupt test met it on a machine at
    load 8) left 4 records on disk and a summary saying "3 finished" and "8 not run" of 12; one
    landing inside the write would leave half a line. Held here, the signal is delivered to the
    handler in place as soon as the section ends (``signal.raise_signal``), so the run still stops
    at once, with the bookkeeping whole. Outside the main thread (where Python runs no handlers)
    and for a handler set outside Python (``getsignal`` is None) nothing is held.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    previous: dict[int, Handler] = {}
    for signum in SIGNALS:
        current = signal.getsignal(signum)
        if current is None:
            continue
        previous[signum] = current
        signal.signal(signum, hold)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if held:
            signal.raise_signal(held[0])
