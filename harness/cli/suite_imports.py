"""User suites imported so that two runs in one process, or two same-named files, never collide.

pytest's default import mode puts a test file's folder on ``sys.path`` and imports it under its
basename (``test_fixed_positions``). A second ``harness run`` in the same process (a notebook, a
script, two tests on one pytest-xdist worker) whose suite has the same basename in another folder
finds the first run's module in ``sys.modules`` and pytest refuses it ("import file mismatch"):
exit 1, no records. So:

- after an in-process run, the modules it imported from its suite folders are forgotten
  (the next run imports its own files afresh; libraries and the harness stay imported);
- before a run, a module of the same name imported from another file is forgotten too;
- one run whose own suites hold two files of the same basename is collected with
  ``--import-mode=importlib`` (unique module names), unless ``--pytest-args`` chose a mode:
  the default mode could never import both.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator, Sequence

#: pytest's default ``python_files`` patterns
_TEST_FILES = ("test_*.py", "*_test.py")


def suite_files(suites: Iterable[Path]) -> Iterator[Path]:
    """The test files pytest would collect from ``suites`` (files as given, folders walked)."""
    for suite in suites:
        if suite.is_file():
            yield suite.resolve()
        elif suite.is_dir():
            for pattern in _TEST_FILES:
                yield from (p.resolve() for p in suite.rglob(pattern) if "site-packages" not in p.parts)


def roots(suites: Iterable[Path]) -> list[Path]:
    """The folders the suites' modules are imported from."""
    return [(s if s.is_dir() else s.parent).resolve() for s in suites]


def import_mode_args(suites: Sequence[Path], pytest_args: Sequence[str]) -> list[str]:
    """``--import-mode=importlib`` when two collected files share a basename and the user chose no mode."""
    if any(a.startswith("--import-mode") for a in pytest_args):
        return []
    names = Counter(p.name for p in set(suite_files(suites)))
    return ["--import-mode=importlib"] if any(n > 1 for n in names.values()) else []


def _module_file(name: str) -> Path | None:
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    return Path(file).resolve() if file else None


def forget_stale(suites: Sequence[Path]) -> None:
    """Forget modules named like a suite file of this run but imported from another file."""
    for file in suite_files(suites):
        name = file.stem
        found = _module_file(name)
        if found is not None and found != file and "site-packages" not in found.parts:
            del sys.modules[name]


def forget_imported(suites: Sequence[Path], before: set[str]) -> None:
    """Forget the modules this run imported from its suite folders (not the harness, not libraries)."""
    folders = roots(suites)
    for name in set(sys.modules) - before:
        if name == "harness" or name.startswith("harness."):
            continue
        file = _module_file(name)
        if file is not None and "site-packages" not in file.parts and any(file.is_relative_to(f) for f in folders):
            del sys.modules[name]
