"""What took the CPU away from a timed loop: preemptions by neighbours and time the hypervisor stole.

A latency tail on a shared machine is partly the machine's. Two counters the kernel keeps say how
much, without touching the timed calls:

* **involuntary context switches** of this process (``/proc/self/status``,
  ``nonvoluntary_ctxt_switches``): the scheduler took the CPU from the loop to run something
  else -- a neighbour process, a kernel thread. Each one lands a call in the tail.
* **steal time** of the CPUs this process may run on (``/proc/stat``, the 8th ``cpu`` column):
  on a virtual machine, the time the host ran another guest on the vCPU. The guest cannot see
  it coming or avoid it by pinning.

Why it is recorded (``contention`` in every latency entry): on the 2-core VM this project is
developed on, steal was about 1 % of each vCPU with no process of its own running, and 0.8 % of
a 0.37 ms graph's calls took more than 1 ms (most about 4 ms, a host time slice) -- the p99 sits
on the edge of those stolen calls, so it moved between 0.69 ms and 4.5 ms from run to run with
the same build. A reader of a p99 (or the gate, where its interval is too wide to judge) needs
to know that the machine, not the model, decided it. The counters are cheap (two small file
reads around a loop, none inside it) and exist on Linux only; elsewhere the fields are ``None``.
``/proc/stat`` counts in 10 ms ticks, so the steal of a loop shorter than a second or two is coarse
(0 or a few ticks); the preemption count is exact.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PROC_STAT = Path("/proc/stat")
_PROC_STATUS = Path("/proc/self/status")


def _cpus() -> set[int] | None:
    getter = getattr(os, "sched_getaffinity", None)
    return set(getter(0)) if getter is not None else None


def _cpu_ticks(cpus: set[int] | None, *, path: Path = _PROC_STAT) -> tuple[int, int] | None:
    """``(steal, total)`` ticks summed over ``cpus`` (all CPUs when None), or None without /proc."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    steal = total = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        try:
            index = int(name[3:])
        except ValueError:
            continue
        if cpus is not None and index not in cpus:
            continue
        fields = [int(x) for x in rest.split()]
        # user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
        total += sum(fields[:8])
        steal += fields[7] if len(fields) > 7 else 0
    return (steal, total) if total else None


def _involuntary_switches(*, path: Path = _PROC_STATUS) -> int | None:
    try:
        for line in path.read_text().splitlines():
            if line.startswith("nonvoluntary_ctxt_switches:"):
                return int(line.split(":", 1)[1])
    except (OSError, ValueError):
        return None
    return None


@dataclass(frozen=True)
class Contention:
    """What the machine did to one timed loop (see the module docstring)."""

    #: the scheduler took the CPU from this process this many times during the loop
    preemptions: int | None
    #: percent of the allowed CPUs' time the hypervisor gave to other guests during the loop
    steal_pct: float | None
    #: the 1-minute load average when the loop ended
    load_avg: float | None
    #: wall seconds of the loop
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {"preemptions": self.preemptions, "steal_pct": self.steal_pct,
                "load_avg": self.load_avg, "seconds": round(self.seconds, 3)}

    @property
    def preemptions_per_s(self) -> float | None:
        """Preemptions per wall second: a rate of the machine, whatever the loop's length."""
        if self.preemptions is None or self.seconds <= 0:
            return None
        return self.preemptions / self.seconds

    def describe(self) -> str:
        """``"12 preemptions (4.1/s), host steal 0.9 %, load 1.02"``: the unknown parts left out."""
        parts = []
        rate = self.preemptions_per_s
        if self.preemptions is not None and rate is not None:
            parts.append(f"{self.preemptions} preemptions ({rate:.1f}/s)")
        if self.steal_pct is not None:
            parts.append(f"host steal {self.steal_pct:.1f} %")
        if self.load_avg is not None:
            parts.append(f"load {self.load_avg:.2f}")
        return ", ".join(parts) or "no contention counters on this platform"


class Probe:
    """Reads the counters at ``start()`` and ``stop()``; holds the result as ``result``."""

    def __init__(self, *, proc_stat: Path = _PROC_STAT, proc_status: Path = _PROC_STATUS) -> None:
        self._stat, self._status = proc_stat, proc_status
        self._cpus = _cpus()
        self.result: Contention | None = None

    def start(self) -> None:
        self._ticks = _cpu_ticks(self._cpus, path=self._stat)
        self._switches = _involuntary_switches(path=self._status)
        self._t0 = time.perf_counter()

    def stop(self) -> Contention:
        seconds = time.perf_counter() - self._t0
        ticks = _cpu_ticks(self._cpus, path=self._stat)
        switches = _involuntary_switches(path=self._status)
        steal = None
        if self._ticks is not None and ticks is not None and ticks[1] > self._ticks[1]:
            steal = round(100.0 * (ticks[0] - self._ticks[0]) / (ticks[1] - self._ticks[1]), 2)
        preempted = None if self._switches is None or switches is None else max(switches - self._switches, 0)
        try:
            load: float | None = round(os.getloadavg()[0], 2)
        except (OSError, AttributeError):
            load = None
        self.result = Contention(preempted, steal, load, seconds)
        return self.result


#: a candidate's loop counts as busier than its baseline's from this many times the preemption
#: rate (and at least MIN_EXTRA_PREEMPTIONS_PER_S more), or this many points more steal
BUSIER_RATE_FACTOR = 2.0
MIN_EXTRA_PREEMPTIONS_PER_S = 5.0
MORE_STEAL_POINTS = 1.0


def _of(entry: Mapping[str, Any] | None) -> Contention | None:
    if not isinstance(entry, Mapping):
        return None
    try:
        seconds = float(entry.get("seconds") or 0.0)
        pre = entry.get("preemptions")
        steal = entry.get("steal_pct")
        load = entry.get("load_avg")
        return Contention(int(pre) if isinstance(pre, (int, float)) else None,
                          float(steal) if isinstance(steal, (int, float)) else None,
                          float(load) if isinstance(load, (int, float)) else None, seconds)
    except (TypeError, ValueError):
        return None


def busier_note(base: Mapping[str, Any] | None, cand: Mapping[str, Any] | None) -> str | None:
    """A clause for a latency verdict when the candidate's loop ran on a visibly busier machine
    than the baseline's (recorded ``contention`` entries), else None.

    It informs, it does not judge: the canary (``harness.gate.canary``) is what discounts machine
    drift. But a p99 REGRESSION read beside "preempted 41/s (baseline 2/s)" is one a release
    engineer reruns before blaming the model.
    """
    b, c = _of(base), _of(cand)
    if b is None or c is None:
        return None
    said = []
    br, cr = b.preemptions_per_s, c.preemptions_per_s
    if br is not None and cr is not None and cr >= BUSIER_RATE_FACTOR * br and cr - br >= MIN_EXTRA_PREEMPTIONS_PER_S:
        said.append(f"preempted {cr:.1f}/s (baseline {br:.1f}/s)")
    if b.steal_pct is not None and c.steal_pct is not None and c.steal_pct - b.steal_pct >= MORE_STEAL_POINTS:
        said.append(f"host steal {c.steal_pct:.1f} % (baseline {b.steal_pct:.1f} %)")
    if not said:
        return None
    return "the candidate's machine was busier while timing: " + ", ".join(said)


@contextmanager
def probe(**paths: Path) -> Iterator[Probe]:
    """``with probe() as p: <timed loop>`` then ``p.result``: the counters around the loop, none inside."""
    p = Probe(**paths)
    p.start()
    try:
        yield p
    finally:
        p.stop()


__all__ = ["Contention", "Probe", "busier_note", "probe"]
