"""The documents' benchmark commands, run as smoke runs (``harness.perf.smoke``).

A benchmark the documents print (``harness bench``, ``python scripts/bench_*.py``, ``python
scripts/measure_accuracy_noise.py``) measures for minutes. The docs test runs it exactly as
printed with ``HARNESS_BENCH_SMOKE=1`` in its environment -- one declared mechanism, as
``PYTEST_ADDOPTS`` narrows the pytest runs (``docs_run.NARROWING``): the benchmark's smallest
configuration, end to end, exit 0 when it ran (a measurement verdict is printed, not asserted).
A script is a benchmark when it reads that mechanism (:func:`is_measurement`); one that does not
runs as it is.

A script runs in the test's process, its printed arguments as ``sys.argv`` (as the ``harness``
commands do: the stack imported once per test process, not once per command); the processes it
starts itself (``harness run``, timing children, a busy neighbour) are real ones.

What the benchmark commands take as given, laid by :func:`lay`:

- ``scripts/``: a copy of the checkout's (the documents run them from a checkout);
- the runs ``measure_accuracy_noise.py --analyse`` analyses (the command before it, the 25-minute
  measurement, is a usage synopsis): the premise run, one copy per configuration;
- the model and cache of ``harness run --models /tmp/bench2/work/llama-16l``, which
  ``bench_large_model.py`` built and filled: llama-tiny's directory stands for the 16-layer random
  Llama, the session's warm cache for that run's cache (:data:`STAND_INS`).
"""

from __future__ import annotations

import os
import runpy
import shutil
import sys
from pathlib import Path

import docs_run

from harness.perf import smoke

ROOT = Path(__file__).resolve().parents[1]
#: the reader's paths a benchmark left behind, and the zoo model that stands for each
STAND_INS = {"/tmp/bench2/work/llama-16l": "llama-tiny"}
#: caches a benchmark filled: here, the session's warm cache
WARM_CACHES = ("/tmp/bench2/work/cache-16l",)


def _script(step: docs_run.Step) -> Path | None:
    """``python scripts/x.py ...``: the checkout's script."""
    if step.program != "python" or len(step.argv) < 2 or not step.argv[1].endswith(".py"):
        return None
    path = ROOT / step.argv[1]
    return path if path.is_file() and path.is_relative_to(ROOT / "scripts") else None


def is_measurement(step: docs_run.Step) -> bool:
    """``harness bench`` or a script that reads ``HARNESS_BENCH_SMOKE`` through ``harness.perf.smoke``."""
    script = _script(step)
    return step.argv[:2] == ("harness", "bench") or (
        script is not None and "from harness.perf import smoke" in script.read_text(encoding="utf-8"))


def environment(step: docs_run.Step) -> dict[str, str]:
    return {smoke.ENV: "1"} if is_measurement(step) else {}


def unmarked(step: docs_run.Step, out: str) -> str | None:
    """What is wrong with a benchmark's output: a smoke run's first and last line say so."""
    if not is_measurement(step):
        return None
    lines = [line for line in out.splitlines() if line.strip()]
    if not lines or not lines[0].startswith(smoke.MARK) or not lines[-1].startswith(smoke.MARK):
        return f"its output does not start and end with {smoke.MARK!r} (a smoke run's numbers are not a measurement)"
    return None


def runs_in_process(step: docs_run.Step) -> bool:
    return _script(step) is not None


def run_script(argv: list[str], cwd: Path) -> int:
    """``python scripts/x.py ARGS`` in this process: ``sys.argv`` as the interpreter would set it
    (the script's directory first on ``sys.path``), the exit status of its ``SystemExit``."""
    path = cwd / argv[1]
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv, sys.path[:0] = [str(path), *argv[2:]], [str(path.parent)]
    try:
        runpy.run_path(str(path), run_name="__main__")
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def _noise_configs() -> list[str]:
    """The configuration names of measure_accuracy_noise.py (one run directory each)."""
    return list(runpy.run_path(str(ROOT / "scripts" / "measure_accuracy_noise.py"), run_name="_noise_configs")["CONFIGS"])


def lay(steps: list[docs_run.Step], sandbox: Path, premise: docs_run.Premise) -> None:
    """What the document's benchmark commands take as given (module docstring)."""
    def local(path: str) -> Path:
        return sandbox / path.removeprefix("/") if path.startswith("/tmp/") else sandbox / path

    if any(_script(s) for s in steps):
        shutil.copytree(ROOT / "scripts", sandbox / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    for step in steps:
        script = _script(step)
        if script is not None and script.name == "measure_accuracy_noise.py" and "--analyse" in step.argv:
            out = local(step.argv[step.argv.index("--out") + 1])
            for name in _noise_configs():
                shutil.copytree(premise.run, out / name)
    words = {w for s in steps for w in s.argv}
    for path, model in STAND_INS.items():
        if path in words:
            from harness.zoo.base import materialize, resolve

            local(path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(materialize(resolve(model)), local(path))
    for path in WARM_CACHES:
        if path in words:
            from harness.core.cachedir import cache_root

            local(path).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(cache_root(), local(path), target_is_directory=True)
