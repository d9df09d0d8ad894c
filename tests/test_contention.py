"""harness.perf.contention: the kernel's counters of what took the CPU from a timed loop.

The arithmetic is checked on scripted ``/proc`` files; the preemption counter on the real
kernel, by making a neighbour share this process's CPU and waiting until it is preempted."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.perf.contention import Contention, Probe, _cpu_ticks, probe

LINUX = sys.platform.startswith("linux") and Path("/proc/self/status").exists()


def _stat(rows: dict[str, list[int]]) -> str:
    total = [sum(col) for col in zip(*rows.values())]
    lines = ["cpu " + " ".join(map(str, total))]
    lines += [f"{name} " + " ".join(map(str, fields)) for name, fields in rows.items()]
    return "\n".join(lines + ["intr 1 2 3", "ctxt 99"]) + "\n"


def _status(switches: int) -> str:
    return f"Name:\tpython\nvoluntary_ctxt_switches:\t7\nnonvoluntary_ctxt_switches:\t{switches}\n"


def test_steal_is_the_share_of_the_allowed_cpus_ticks_the_host_took(tmp_path):
    stat, status = tmp_path / "stat", tmp_path / "status"
    #          user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text(_stat({"cpu0": [100, 0, 0, 100, 0, 0, 0, 0, 5, 0], "cpu1": [100, 0, 0, 100, 0, 0, 0, 0, 0, 0]}))
    status.write_text(_status(10))
    p = Probe(proc_stat=stat, proc_status=status)
    p._cpus = {1}  # the loop may run on cpu1 only: cpu0's steal is someone else's
    p.start()
    stat.write_text(_stat({"cpu0": [150, 0, 0, 150, 0, 0, 0, 50, 5, 0], "cpu1": [170, 0, 0, 120, 0, 0, 0, 10, 0, 0]}))
    status.write_text(_status(13))
    result = p.stop()
    assert result.steal_pct == pytest.approx(100 * 10 / 100)  # 10 of cpu1's 100 new ticks were stolen
    assert result.preemptions == 3
    assert _cpu_ticks(None, path=stat) == (60, 350 + 300)  # all CPUs; the guest columns are not counted twice


def test_without_proc_files_every_counter_is_unknown_and_said_so(tmp_path):
    with probe(proc_stat=tmp_path / "missing-stat", proc_status=tmp_path / "missing-status") as p:
        pass
    assert p.result is not None
    assert (p.result.preemptions, p.result.steal_pct) == (None, None)
    assert p.result.preemptions_per_s is None
    described = Contention(None, None, None, 1.0).describe()
    assert described == "no contention counters on this platform"


def test_describe_and_rate():
    c = Contention(preemptions=12, steal_pct=0.9, load_avg=1.02, seconds=3.0)
    assert c.preemptions_per_s == pytest.approx(4.0)
    assert c.describe() == "12 preemptions (4.0/s), host steal 0.9 %, load 1.02"
    assert c.as_dict() == {"preemptions": 12, "steal_pct": 0.9, "load_avg": 1.02, "seconds": 3.0}


@pytest.mark.skipif(not LINUX or not hasattr(os, "sched_setaffinity"),
                    reason="preemption counters are Linux's /proc/self/status")
def test_a_neighbour_on_the_same_cpu_shows_up_as_preemptions():
    """A busy neighbour pinned to this process's CPU must take it from a busy loop: the probe
    counts it. Waits for the event (the counter moving), with a deadline far beyond need."""
    cpu = min(os.sched_getaffinity(0))
    mine = os.sched_getaffinity(0)
    neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(neighbour.pid, {cpu})
        os.sched_setaffinity(0, {cpu})
        with probe() as p:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                x = 0
                for i in range(200_000):  # stay runnable: a sleeping loop is never preempted
                    x += i
                if p._switches is not None and _now_switches() > p._switches:
                    break
        assert p.result is not None and p.result.preemptions is not None
        assert p.result.preemptions >= 1
        assert p.result.preemptions_per_s is not None and p.result.preemptions_per_s > 0
    finally:
        os.sched_setaffinity(0, mine)
        neighbour.kill()
        neighbour.wait()


def _now_switches() -> int:
    from harness.perf.contention import _involuntary_switches

    value = _involuntary_switches()
    assert value is not None
    return value
