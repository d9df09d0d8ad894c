"""Run the test suite beside CPU-burning neighbours: does it hold on a shared CI runner?

Starts ``--burners`` busy-loop processes (default 2), runs ``pytest tests -n 2`` (or the
arguments after ``--``) beside them, and prints the outcome with the load it ran at: the
1-minute load average sampled during the run, its peak, and the wall time. Exit status is
pytest's. Evidence for the reliability fixes (docs/reliability.md): before them this went red with five
``subprocess.TimeoutExpired`` in tests/test_interrupt.py.

Usage:
    python scripts/tests_under_load.py [--burners N] [-- PYTEST ARGS...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burners", type=int, default=2, help="busy-loop processes beside the tests (default 2)")
    args = parser.parse_args(own)
    pytest_args = extra or ["tests", "-n", "2", "-q", "-p", "no:cacheprovider"]
    # a busy loop that ends with this process: a killed script (a test's timeout) leaves no burner behind
    burn = f"import os\nwhile os.getppid() == {os.getpid()}: pass"
    burners = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(args.burners)]
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(5.0):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    began = time.monotonic()
    try:
        code = subprocess.call([sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT)
    finally:
        done.set()
        for burner in burners:
            burner.kill()
            burner.wait()
    wall = time.monotonic() - began
    mean = sum(loads) / len(loads) if loads else float("nan")
    print(f"tests_under_load: pytest {' '.join(pytest_args)} beside {args.burners} busy loop(s) on "
          f"{os.cpu_count()} cores: exit {code}, {wall:.0f} s, load average mean {mean:.1f}, "
          f"peak {max(loads, default=float('nan')):.1f}")
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
