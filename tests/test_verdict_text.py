"""A compared value never reads as its own contradiction, on any surface.

The case: ``cosine`` 0.99989996 against ``>= 0.9999``. At the 6 significant digits every report
used, the value printed as ``0.9999 (must be >= 0.9999)`` -- a failure that reads as a pass. One
formatter (``harness.core.verdict_text``) prints as many digits as the verdict needs, and every
surface (the failure text the terminal shows, the end-of-run table, ``summary.md``, JUnit, the HTML
checks table, grid and case table, the compare page) goes through it.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from report_fixture import record, write_run

from harness.compare.diff import compare
from harness.compare.render import to_html, to_markdown
from harness.core.direction import Direction
from harness.core.verdict_text import compared_text, exact_text
from harness.report.html.page import render_report
from harness.report.junit import render_junit
from harness.report.summary import render_summary
from harness.report.terminal import plain_lines
from harness.results import Record
from harness.results.checks import CheckResult, outcomes_text
from harness.results.rundir import read_results

VALUE, THRESHOLD = 0.99989996, 0.9999
#: what every surface printed before: the value rounded onto its threshold
CONTRADICTION = "0.9999 (must be >= 0.9999)"


def _failing(run_id: str = "b") -> dict:
    return record("test_logits_parity", "bert-fp16-ort_cpu", "fail", run_id,
                  reason=outcomes_text("model/logits", [CheckResult("cosine", VALUE, ">=", THRESHOLD, "model/logits")]),
                  metrics={"model.logits.cosine": VALUE, "model.logits.norm_max_abs": 0.0241234},
                  thresholds={"model.logits.cosine": {"threshold": THRESHOLD, "op": ">="},
                              "model.logits.norm_max_abs": {"threshold": 0.05, "op": "<="}})


@pytest.mark.parametrize(("value", "threshold", "direction", "unit", "expected"), [
    (VALUE, THRESHOLD, Direction.HIGHER, "", "0.99989996 (must be >= 0.9999)"),
    (0.999882, THRESHOLD, Direction.HIGHER, "", "0.999882 (must be >= 0.9999)"),
    (0.15000001, 0.15, Direction.LOWER, "", "0.15000001 (must be <= 0.15)"),
    (0.0241234, 0.01, Direction.LOWER, "", "0.0241234 (must be <= 0.01)"),  # no extra digits when none are needed
    (5004.0, 5000.0, Direction.LOWER, "ms", "5.004 s (must be <= 5 s)"),  # 3 digits read "5 s <= 5 s"
    (80.001, 80.0, Direction.LOWER, "MiB", "80.001 MiB (must be <= 80 MiB)"),
    (5000.0, 5000.0, Direction.LOWER, "ms", "5 s (must be <= 5 s)"),  # equal is shown equal
    (float("nan"), 0.5, Direction.HIGHER, "", "NaN (must be >= 0.5)"),
])
def test_value_has_the_digits_its_verdict_needs(value: float, threshold: float, direction: Direction, unit: str,
                                                 expected: str) -> None:
    assert compared_text(value, threshold, direction, unit).must_be() == expected


def test_threshold_is_written_exactly_as_configured() -> None:
    assert [exact_text(t) for t in (0.9999, 1e-5, 0.15, 3.0, 0.123456789)] == \
           ["0.9999", "1e-05", "0.15", "3", "0.123456789"]  # 6 digits would say 0.123457


def test_no_printed_value_contradicts_its_verdict() -> None:
    """Values a hair on either side of thresholds: the printed number, read back, always falls on
    the value's side and differs from the threshold unless the value equals it."""
    rng = random.Random(7)
    for _ in range(3000):
        threshold = float(f"{rng.uniform(1e-4, 1.0):.{rng.randint(1, 6)}g}")
        value = threshold * (1 + rng.choice([-1, 1]) * 10 ** -rng.uniform(1, 15))
        direction = rng.choice(list(Direction))
        shown = compared_text(value, threshold, direction)
        read = float(shown.value)
        assert direction.holds(read, threshold) == direction.holds(value, threshold), (value, threshold, shown)
        assert read != threshold or value == threshold, (value, threshold, shown)
        assert float(shown.threshold) == threshold


def test_failure_text_and_end_of_run_table() -> None:
    """What the terminal shows: the failure text under FAILURES and the end-of-run lines."""
    r = Record.from_dict(_failing())
    assert "cosine = 0.99989996 (must be >= 0.9999)" in r.reason and CONTRADICTION not in r.reason
    line = "\n".join(plain_lines([r]))
    assert "0.99989996 (must be >= 0.9999)" in line and CONTRADICTION not in line


def test_summary_and_junit_carry_the_digits() -> None:
    rows = [_failing()]
    summary = render_summary(rows)
    junit = render_junit(rows)
    for text in (summary, junit):
        assert "0.99989996" in text and CONTRADICTION not in text
    attention = summary.split("```", 1)[0]  # the full failure text follows in a block
    message = re.search(r'message="([^"]*)"', junit)
    assert message is not None
    for line in (attention, message.group(1)):
        assert "cosine = 0.99989996 (must be &gt;= 0.9999)" in line.replace(">=", "&gt;=")
        assert "check(s) failed" not in line


def test_html_checks_grid_and_case_table(tmp_path: Path) -> None:
    records = [Record.from_dict(_failing())]
    page = render_report(records)
    assert CONTRADICTION not in page and "0.9999 | >= 0.9999" not in page
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S)
    assert any("0.99989996" in row and "0.9999<" in row for row in rows), "checks table row with both numbers"
    grid = page.split('class="grid"', 1)[1].split("</table>", 1)[0]
    assert "cosine 0.99989996 &gt;= 0.9999 ✗" in grid, grid  # the failing metric, and the mark
    cases = page.split('id="cases"', 1)[1].split("</section>", 1)[0]
    assert "cosine = 0.99989996 (must be &gt;= 0.9999)" in cases and "check(s) failed" not in cases


def test_grid_names_the_failing_metric_with_a_mark_even_when_another_gate_ranks_first() -> None:
    """``norm_max_abs`` heads a passing case; when ``cosine`` fails, the cell shows cosine, marked."""
    page = render_report([Record.from_dict(_failing())])
    grid = page.split('class="grid"', 1)[1].split("</table>", 1)[0]
    assert "norm_max_abs" not in grid and "✗" in grid


def test_compare_reason_is_the_first_failing_check(tmp_path: Path) -> None:
    passing = record("test_logits_parity", "bert-fp16-ort_cpu", "pass", "a",
                     metrics={"model.logits.cosine": 0.99999}, thresholds=_failing()["thresholds"])
    a = write_run(tmp_path / "a", [passing])
    b = write_run(tmp_path / "b", [_failing()])
    cmp = compare(read_results(a), read_results(b))
    assert [v.reason for v in cmp.verdicts] == ["model/logits: cosine = 0.99989996 (must be >= 0.9999)"]
    for text in (to_markdown(cmp), to_html(cmp)):
        assert "0.99989996" in text and "check(s) failed" not in text and CONTRADICTION not in text
