"""Where a case's time goes: build, export, reference, variant, metrics, perf.

Users size CI from this ("the references are 60% of the run: cache them"; "INT8 export is
the slow part"), so every record carries ``phases`` (seconds per phase). The clock is the
case's, held in a context variable for the duration of the test, so the layers that do the
work (loading, exporting, judging) mark their phase with ``with phase("export"):`` and never
need the case passed down. Accounting is *exclusive*: a phase nested in another (a model
loaded lazily while an artifact is exported) is subtracted from its parent, so the phases
never add up to more than the case's duration; what no phase claims is ``other`` (pytest,
fixtures, writing side files).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

#: the phases, in pipeline order (the record may hold any subset)
PHASES = ("build", "export", "reference", "variant", "metrics", "perf")


#: called with the phase a case enters (or returns to; '' when it leaves the last one) in this
#: process: the progress heartbeat says which phase a long case is in (harness/plugins/progress.py)
LISTENERS: list[Callable[[str], None]] = []


def _announce(name: str) -> None:
    for listener in LISTENERS:
        listener(name)


class PhaseClock:
    """Exclusive seconds per phase for one case."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[list[float]] = []  # [start, seconds spent in nested phases]
        self._names: list[str] = []

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}; one of {', '.join(PHASES)}")
        frame = [time.perf_counter(), 0.0]
        self._stack.append(frame)
        self._names.append(name)
        if LISTENERS:
            _announce(name)
        try:
            yield
        finally:
            self._names.pop()
            if LISTENERS:
                _announce(self._names[-1] if self._names else "")
            self._stack.pop()
            elapsed = time.perf_counter() - frame[0]
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed - frame[1]
            if self._stack:
                self._stack[-1][1] += elapsed

    def as_dict(self) -> dict[str, float]:
        return {name: round(self.seconds[name], 4) for name in PHASES if self.seconds.get(name, 0.0) > 0.0}


_CURRENT: ContextVar[PhaseClock | None] = ContextVar("harness_phase_clock", default=None)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Count the block as ``name`` on the current case's clock (nothing when no case runs)."""
    clock = _CURRENT.get()
    if clock is None:
        yield
        return
    with clock.phase(name):
        yield


@contextmanager
def timing(clock: PhaseClock) -> Iterator[PhaseClock]:
    """Make ``clock`` the current one for the block (the case fixture holds it for the test)."""
    token = _CURRENT.set(clock)
    try:
        yield clock
    finally:
        _CURRENT.reset(token)


def start(clock: PhaseClock) -> object:
    """Make ``clock`` current until ``stop(token)`` (a fixture's setup and teardown)."""
    return _CURRENT.set(clock)


def stop(token: object) -> None:
    _CURRENT.reset(token)  # type: ignore[arg-type]
