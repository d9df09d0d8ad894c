"""Peak resident memory of one case: what a matrix needs of the machine that runs it.

A release engineer sizing a CI runner for a multi-GB model asks "how much memory does this
matrix need", and the answer is per case: the FP32 export with its PyTorch module, the FP16
conversion, a session of the INT8 graph each peak differently. Each case's record carries
``memory`` (``peak_rss_bytes`` and the resident bytes when it started and ended), so the report
can show the heaviest cases beside the slowest.

How the high-water mark is taken, per platform:

* Linux: the kernel keeps a per-process high-water mark of the resident set (``VmHWM`` in
  ``/proc/self/status``), and writing ``5`` to ``/proc/self/clear_refs`` resets it to the
  current RSS. One reset when the case starts and one read when it ends give the exact peak
  of everything the case did, in every thread (onnxruntime's and torch's pools included), at
  no cost while it runs.
* elsewhere (or where ``clear_refs`` is not writable): a daemon thread samples the RSS with
  psutil every :data:`SAMPLE_SECONDS`; a spike shorter than that can be missed (``source``
  says ``sampled``).

Resetting ``VmHWM`` also lowers what the kernel reports as the process's lifetime peak
(``getrusage``'s ``ru_maxrss``, ``/usr/bin/time``'s "Maximum resident set size"), so the
tracker keeps the lifetime peak itself: ``process_peak_rss_bytes`` is the highest mark seen
by this process up to the end of the case.
"""

from __future__ import annotations

import ctypes
import gc
import os
import threading
from typing import Any

#: how often the fallback sampler reads the RSS (seconds)
SAMPLE_SECONDS = 0.01

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"


def _status_bytes(field: str) -> int | None:
    """``VmRSS`` / ``VmHWM`` of this process in bytes (None off Linux)."""
    try:
        with open(_STATUS, encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024  # reported in kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def current_rss() -> int:
    """This process's resident set size in bytes, now."""
    value = _status_bytes("VmRSS")
    if value is not None:
        return value
    import psutil

    return int(psutil.Process().memory_info().rss)


def _reset_hwm() -> bool:
    """Reset the kernel's high-water mark to the current RSS; False where that is not possible."""
    try:
        with open(_CLEAR_REFS, "w", encoding="ascii") as fh:
            fh.write("5")
        return _status_bytes("VmHWM") is not None
    except OSError:
        return False


class _Sampler(threading.Thread):
    """Fallback: the highest RSS seen by polling (daemon: never keeps a process alive)."""

    def __init__(self) -> None:
        super().__init__(name="harness-rss-sampler", daemon=True)
        self.peak = current_rss()
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(SAMPLE_SECONDS):
            self.peak = max(self.peak, current_rss())

    def stop(self) -> int:
        self._stop_event.set()
        self.join(timeout=1.0)
        self.peak = max(self.peak, current_rss())
        return self.peak


class PeakRss:
    """The peak RSS between :meth:`start` and :meth:`stop` (one per process, cases in turn).

    ``process_peak`` is the lifetime peak of the process so far, carried across the resets."""

    def __init__(self) -> None:
        self.process_peak = 0
        self._start = 0
        self._sampler: _Sampler | None = None
        self._kernel = False

    def start(self) -> None:
        self.process_peak = max(self.process_peak, _status_bytes("VmHWM") or 0)
        self._start = current_rss()
        self._kernel = _reset_hwm()
        if not self._kernel:
            self._sampler = _Sampler()
            self._sampler.start()

    def stop(self) -> dict[str, Any]:
        """The case's ``memory`` record: peak, start and end RSS in bytes, how it was measured."""
        end = current_rss()
        if self._kernel:
            peak = max(_status_bytes("VmHWM") or end, end)
            source = "vmhwm"
        else:
            assert self._sampler is not None, "stop() without start()"
            peak = max(self._sampler.stop(), end)
            self._sampler = None
            source = "sampled"
        self.process_peak = max(self.process_peak, peak)
        return {"peak_rss_bytes": int(peak), "start_rss_bytes": int(self._start), "end_rss_bytes": int(end),
                "process_peak_rss_bytes": int(self.process_peak), "source": source, "pid": os.getpid()}


def release_freed_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc ``malloc_trim``), so
    what a case released shows as a lower RSS for the next one instead of staying in the
    allocator's free lists. Best effort: a no-op off glibc."""
    gc.collect()
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass
