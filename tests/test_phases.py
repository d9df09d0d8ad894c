"""Where the time goes (issue 13): exclusive phase accounting, the record field, the reports."""

from __future__ import annotations

import time

import pytest

from harness.core import phases
from harness.core.phases import PhaseClock, phase
from harness.report.durations import markdown, phase_totals, slowest, terminal_lines
from harness.results import Record


def test_nested_phases_are_exclusive():
    clock = PhaseClock()
    with phases.timing(clock):
        with phase("export"):
            time.sleep(0.02)
            with phase("build"):
                time.sleep(0.03)
    seconds = clock.as_dict()
    assert seconds["build"] >= 0.03
    assert 0.02 <= seconds["export"] < 0.03 + 0.02, "the nested build must not count as export"


def test_phase_without_a_case_is_a_no_op_and_names_are_checked():
    with phase("metrics"):
        pass
    with pytest.raises(ValueError, match="unknown phase"), PhaseClock().phase("compile"):
        pass


def _record(case: str, duration: float, **ph: float) -> Record:
    return Record.from_dict({"id": case, "verdict": "pass", "duration_s": duration, "phases": ph})


def test_record_round_trips_phases_and_omits_them_when_empty():
    rec = _record("t[a]", 2.0, reference=1.5, variant=0.25)
    assert Record.from_dict(rec.to_dict()).phases == {"reference": 1.5, "variant": 0.25}
    assert "phases" not in _record("t[b]", 1.0).to_dict()


def test_totals_slowest_and_renderings():
    recs = [_record("t[a]", 2.0, reference=1.5, variant=0.25), _record("t[b]", 5.0, export=4.0),
            _record("t[c]", 1.0)]
    totals = phase_totals(recs)
    assert totals == pytest.approx({"export": 4.0, "reference": 1.5, "variant": 0.25, "other": 2.25})
    assert [r.id for r in slowest(recs, 2)] == ["t[b]", "t[a]"]
    assert len(slowest(recs, 0)) == 3
    text = "\n".join(markdown(recs))
    assert "## Where the time went" in text and "| export | 4.00 |" in text and "| 1 | 5.00 | t[b] |" in text
    lines = terminal_lines(recs, 1)
    assert any("export" in line for line in lines) and sum("t[" in line for line in lines) == 1
