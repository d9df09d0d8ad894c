"""Repository-level pytest setup for the plugin's own end-to-end tests (``pytester``, enabled
with ``-p pytester`` in pyproject's addopts rather than ``pytest_plugins`` here: the built-in suites
live under this directory, and a session rooted elsewhere that collects them — ``pytest
--harness-builtin-suites`` from another repository with an editable install — loads this file as a
non-root conftest, where ``pytest_plugins`` is an error).

The harness plugin itself is loaded through its ``pytest11`` entry point (installed with
``pip install -e .``), so suites behave the same here as in any other repository.
"""

from __future__ import annotations

import sys

import _pytest.pytester as _pytester


class _KeepLibraryModules(_pytester.SysModulesSnapshot):
    """pytester drops every module first imported during an in-process run. Dropping library
    modules breaks native extensions and lazy importers (re-importing onnx aborts the process;
    transformers' lazy model classes and torch's operator registry fail on re-import), so only
    the throwaway test modules pytester wrote are dropped; libraries stay imported."""

    def __init__(self, preserve=None) -> None:
        def keep(name: str) -> bool:
            if preserve is not None and preserve(name):
                return True
            module = sys.modules.get(name)
            path = str(getattr(module, "__file__", "") or "")
            return not path or "site-packages" in path or name == "harness" or name.startswith("harness.")

        super().__init__(preserve=keep)


_pytester.SysModulesSnapshot = _KeepLibraryModules  # type: ignore[misc]
