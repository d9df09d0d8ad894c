"""Failure text a person can read in a CI log: a harness case that fails its gate shows the
harness's own failure text (which metric, its value, the threshold, the worst element), not
pytest's long traceback with the ``Variant(...)``/``Case(...)`` reprs of the test's arguments.
A case that errors shows a short traceback (file, line, the raising line), no argument reprs.
``--tb=long`` (or any explicit ``--tb`` other than ``auto``) keeps pytest's own report."""

from __future__ import annotations

from typing import Generator

import pytest

from harness.results.checks import GateFailure


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if (call.when != "call" or call.excinfo is None or not report.failed
            or item.config.getoption("tbstyle", "auto") != "auto"
            or not any(key == "harness_case" for key, _ in item.user_properties)):
        return report
    if isinstance(call.excinfo.value, GateFailure):
        report.longrepr = str(call.excinfo.value).strip()
    else:
        # pytest's own rendering (its traceback pruning: no pluggy frames) in the short style
        report.longrepr = item._repr_failure_py(call.excinfo, style="short")
    return report
