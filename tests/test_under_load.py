"""Tests that hold on a loaded machine (issue 25, item 7).

``pytest tests -n 2`` went red beside two busy loops: five ``subprocess.TimeoutExpired`` in the
interrupt tests, whose waits were fixed (90 s for a process to exit, a 1 s sleep for "the
worker is in the hanging case"). Tests now wait for events (``tests/waiting.py``) bounded only
by ``PATIENCE``. This module proves it twice: no test file sets a short literal timeout, and the
interrupt and subprocess tests pass with CPU-burning neighbours taking the cores.
The interrupt tests run through ``scripts/tests_under_load.py``, the script that runs the whole
suite beside busy loops (README: ``python scripts/tests_under_load.py --burners 4 -- tests -n 2
--random-order``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from waiting import PATIENCE

TESTS = Path(__file__).resolve().parent


def test_no_test_waits_a_fixed_short_time():
    """A literal ``timeout=`` in a test is a bet on the machine's speed; ``PATIENCE`` is not."""
    offenders = []
    for path in sorted(TESTS.glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found = re.search(r"timeout=(\d+(\.\d+)?)\b", line)
            if found and float(found.group(1)) < PATIENCE and "get_attribute" not in line:
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
    assert PATIENCE >= 1800 or os.environ.get("HARNESS_TEST_PATIENCE")


def test_interrupt_and_subprocess_tests_pass_beside_cpu_burning_neighbours(tmp_path):
    """A busy loop takes a core of a CI runner beside the suite's other worker (load >= 3 on two
    cores: the loop, that worker and these tests' own processes); the interrupt tests -- real
    signals to real ``harness run`` / ``pytest`` processes -- and a subprocess refusal still pass.

    One case per event a test waits for, not every parametrization (each is a process start
    beside the burners, ~30 s on two loaded cores; the rest run in the suite itself): the
    signal handler installed (``harness run`` and plain pytest, which install it at different
    points), the first records and the hanging case's marker under ``-n 2`` workers, a record
    on disk before a SIGKILL, and a subprocess exiting with its one-line refusal."""
    selection = [f"{TESTS / 'test_interrupt.py'}::test_a_signal_during_start_up_still_writes_the_run_directory[harness-SIGTERM]",
                 f"{TESTS / 'test_interrupt.py'}::test_a_signal_during_start_up_still_writes_the_run_directory[pytest-SIGTERM]",
                 f"{TESTS / 'test_interrupt.py'}::test_interrupted_run_says_interrupted[harness-2-SIGTERM]",
                 f"{TESTS / 'test_interrupt.py'}::test_killed_run_keeps_finished_records",
                 f"{TESTS / 'test_refusals.py'}::test_an_argparse_error_is_one_line_without_the_usage"]
    script = TESTS.parent / "scripts" / "tests_under_load.py"
    proc = subprocess.run([sys.executable, str(script), "--burners", "1", "--", *selection, "-q", "-n", "0",
                           "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "inner")], capture_output=True,
                          text=True, cwd=TESTS.parent, timeout=PATIENCE * 4)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.search(rf"\b{len(selection)} passed\b", proc.stdout), proc.stdout[-1000:]
    # the script's closing line: the same exit, beside the burners asked for, with the load it saw
    closing = re.search(r"^tests_under_load: .* beside 1 busy loop\(s\) on \d+ cores: exit 0, \d+ s, "
                        r"load average mean [\d.]+, peak [\d.]+$", proc.stdout, re.MULTILINE)
    assert closing, proc.stdout[-1000:]
