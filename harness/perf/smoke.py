"""The smoke run of a benchmark: ``HARNESS_BENCH_SMOKE=1`` in the environment.

A benchmark (``harness bench``, ``scripts/bench_*.py``, ``scripts/measure_accuracy_noise.py``)
measures for minutes; whether it still *works* -- its options, every code path, its report -- is
a question of seconds. With ``HARNESS_BENCH_SMOKE=1`` each one runs its smallest configuration
(a tiny model, one trial, a few calls), end to end, says so at the start and at the end of its
output (the numbers are not a measurement), and exits 0 when it ran: a measurement verdict it
would give (a missed detection target) is printed, not its exit status. A crash, bad usage or a
run of the harness that did not finish still fail it.

One mechanism, declared here and read by every benchmark through :func:`shrink` and
:func:`finish`, as ``PYTEST_ADDOPTS`` narrows a pytest run without changing its command line:
the docs test runs the documents' benchmark commands exactly as printed with it set
(docs/performance.md, "Smoke runs of the benchmarks").
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any

ENV = "HARNESS_BENCH_SMOKE"
#: the first and last line of a smoke run's output, so no reader takes its numbers for a measurement
MARK = f"SMOKE RUN ({ENV}=1)"
#: the smallest ``harness run`` a benchmark script starts in a smoke run (before the arguments it
#: was given, which win): one tiny model at FP32 on ONNX Runtime, two sentences
RUN_ARGS = ("--models", "bert-tiny", "--precisions", "fp32", "--providers", "ort_cpu", "--samples", "2")


def active() -> bool:
    """``HARNESS_BENCH_SMOKE`` is set to anything but empty or ``0``."""
    return os.environ.get(ENV, "").strip() not in ("", "0")


def shrink(namespace: Any, **smallest: Any) -> list[str]:
    """In a smoke run, each named attribute of ``namespace`` (parsed options) takes its smallest
    value: a number at most the one given (a smaller one given stays), anything else (a list of
    sizes, models) replaced. Returns ``name: given -> smoke`` for each that changed (for
    :func:`announce`); outside a smoke run nothing changes and the list is empty."""
    if not active():
        return []
    changed = []
    for name, value in smallest.items():
        given = getattr(namespace, name)
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        new = min(given, value) if numeric and isinstance(given, (int, float)) else value
        if new != given:
            setattr(namespace, name, new)
            changed.append(f"{name.replace('_', '-')} {_show(given)} -> {_show(new)}")
    return changed


def _show(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def banner(changes: list[str]) -> str:
    what = f": {', '.join(changes)}" if changes else ""
    return f"{MARK}: the smallest configuration{what}; its numbers are not a measurement"


def announce(changes: list[str], stream: IO[str] | None = None) -> None:
    """The first line of a smoke run's output (nothing outside one)."""
    if active():
        print(banner(changes), file=stream or sys.stdout, flush=True)


def finish(code: int, verdicts: tuple[int, ...] = (1,), stream: IO[str] | None = None) -> int:
    """A script's exit status: unchanged outside a smoke run; in one, the last line of output,
    and 0 for an exit in ``verdicts`` (a measurement verdict: a target missed, not a failure to run)."""
    if not active():
        return code
    out = stream or sys.stdout
    if code in verdicts and code != 0:
        print(f"{MARK}: ran end to end; the measurement's verdict (exit {code}) is not a verdict of a smoke run, "
              "exit 0", file=out, flush=True)
        return 0
    print(f"{MARK}: {'ran end to end' if code == 0 else f'failed (exit {code})'}; not a measurement",
          file=out, flush=True)
    return code
