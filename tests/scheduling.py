"""How ``pytest tests -n N`` hands the tests to its workers: by the set-up they share.

A fixture set up once per module (a real server, a ``harness run``, a built wheel) is set up once per
*worker* that runs any of the module's tests: xdist's default ``load`` scheduling hands out tests in
chunks, so a module split across two workers paid its set-up twice. Here a module that declares such a
fixture (``@pytest.fixture(scope="module")``, ``"class"`` or ``"package"``) is one unit of work, run whole on
one worker; so are the modules with a function taking one of :data:`SHARED_SESSION_FIXTURES` (a
session-scoped server in tests/conftest.py): one unit for all of them, the server started once. Every other test is a unit
of its own, handed to whichever worker is free. Units go out in collection order (tests/conftest.py
puts the long ones first), not xdist's most-tests-first.

The unit of a test is decided from its node id (``path::name``), as the scheduler sees it on the
controller, which collects nothing: by reading the module's source once. (xdist's ``loadgroup`` marks
cannot do it with this pytest: its workers rename ``item._nodeid``, which pytest no longer reads.)
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

#: session-scoped fixtures of tests/conftest.py that hold a server: every module using one is one unit
SHARED_SESSION_FIXTURES = ("mlserver_bert",)

#: a fixture decorator, at the start of a line, with a scope wider than one test and narrower than the session
_MODULE_SCOPE = re.compile(r"""^\s*@(pytest\.)?fixture\([^)]*scope\s*=\s*["'](module|class|package)["']""", re.MULTILINE)


@cache
def setup_unit(path: str) -> str | None:
    """The unit a test module's tests run in together, or None when each test is its own: the shared
    session fixture it names, else the module itself when it declares a module-scoped fixture."""
    try:
        source = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    for name in SHARED_SESSION_FIXTURES:
        if re.search(rf"def\s+\w+\s*\([^)]*\b{name}\b", source):  # a test or fixture taking it
            return name
    return path if _MODULE_SCOPE.search(source) else None


class SharedSetupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with :func:`setup_unit` as the scope, in collection order."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        config.option.loadscopereorder = False
        super().__init__(config, log)
        self.root = Path(config.rootpath)

    def _split_scope(self, nodeid: str) -> str:
        return setup_unit(str(self.root / nodeid.split("::", 1)[0])) or nodeid
