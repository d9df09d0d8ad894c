"""``junit.xml``: the run's records as JUnit XML, for CI systems that draw test tables from it.

Written from the records (not from pytest's own ``--junitxml``) so the CI table says what
``results.jsonl`` says: a ``not-run`` case (a requested variant that could not run here) is a
failure there, not a quiet skip, and every case carries its rerun command. One ``<testsuite>``
per suite (``test_logits_parity``...), one ``<testcase>`` per record.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Iterable

from harness.report.checks import reason_line
from harness.report.text import printable
from harness.results import Record
from harness.results.record import RecordLike
from harness.results.sections import Interrupted

JUNIT_FILE = "junit.xml"


def _text(value: object) -> str:
    """The JUnit XML rule, for every string from a record (names, reasons, the rerun command): XML
    1.0 cannot hold most control characters, so they are escaped as the terminal shows them; the
    serialiser escapes ``<``, ``&`` and quotes."""
    return printable(str(value or ""), keep_newlines=True)


def _failure(r: Record) -> bool:
    return r.verdict in ("fail", "not-run") and not Interrupted.of(r)


def _error(r: Record) -> bool:
    """An erroring case, or a selected case a signal stopped (``harness.results.notrun``)."""
    return r.verdict == "error" or bool(Interrupted.of(r))


def render_junit(records: Iterable[RecordLike], name: str = "model-harness") -> str:
    recs = [Record.coerce(r) for r in records]
    by_suite: dict[str, list[Record]] = defaultdict(list)
    for r in recs:
        by_suite[r.suite or "harness"].append(r)
    root = ET.Element("testsuites", name=name, tests=str(len(recs)),
                      failures=str(sum(_failure(r) for r in recs)),
                      errors=str(sum(_error(r) for r in recs)),
                      skipped=str(sum(r.verdict == "skip" for r in recs)),
                      time=f"{sum(r.duration_s for r in recs):.3f}")
    for suite, cases in sorted(by_suite.items()):
        element = ET.SubElement(root, "testsuite", name=_text(suite), tests=str(len(cases)),
                                failures=str(sum(_failure(r) for r in cases)),
                                errors=str(sum(_error(r) for r in cases)),
                                skipped=str(sum(r.verdict == "skip" for r in cases)),
                                time=f"{sum(r.duration_s for r in cases):.3f}")
        for r in sorted(cases, key=lambda r: r.id):
            case = ET.SubElement(element, "testcase", classname=_text(f"harness.{suite}"), name=_text(r.id),
                                 time=f"{r.duration_s:.3f}")
            properties = ET.SubElement(case, "properties")
            for key in ("variant", "model", "precision", "provider", "verdict"):
                ET.SubElement(properties, "property", name=key, value=_text(getattr(r, key)))
            message = _text(reason_line(r))  # the failing metric, value and threshold, as summary.md says
            if Interrupted.of(r):  # selected, never finished: a signal stopped the run
                ET.SubElement(case, "error", message=message, type="interrupted").text = _text(r.reason)
            elif r.verdict in ("fail", "not-run"):
                ET.SubElement(case, "failure", message=message, type=r.verdict).text = _text(r.reason)
            elif r.verdict == "error":
                ET.SubElement(case, "error", message=message, type="error").text = _text(r.reason)
            elif r.verdict == "skip":
                ET.SubElement(case, "skipped", message=message)
            if r.rerun:
                ET.SubElement(case, "system-out").text = f"rerun: {_text(r.rerun)}"
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: Path, records: Iterable[RecordLike]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_junit(records), encoding="utf-8")
    return path
