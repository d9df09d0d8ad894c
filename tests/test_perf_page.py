"""The perf section a reviewer reads in ten seconds: per model one table of its variants, regressions
first, then the fastest; the speedup against PyTorch FP32 and the change against the baseline from
the records and the gate's file; the same rows in the HTML report, summary.md and the terminal; and
every page's header says when (UTC), where and with what the run measured.
(The HTML page, rendered once by ``tests/screenshots.py``, and its rows as a real browser shows
them: ``tests/test_trends.py``'s screenshot test, with :func:`perf_section_checks`.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from report_fixture import PERF_BASELINE, PERF_VARIANTS, perf_records

from harness.report.perf_table import model_tables
from harness.report.summary import render_summary
from harness.report.terminal import perf_plain_lines
from harness.results import Record

#: reading order of the fixture run with its baseline: regressions first (a failed p99 budget, a
#: baseline regression), then fastest p50 first
EXPECTED = {"bert": ["bert-int8-ort_cpu", "bert-fp32-ort_cpu", "bert-fp32-torch_cpu"],
            "marian": ["marian-fp32-ort_cpu", "marian-int8-ort_cpu", "marian-fp32-torch_cpu"]}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Record]]:
    run_dir = tmp_path_factory.mktemp("perf-run")
    return run_dir, [Record.from_dict(r) for r in perf_records(run_dir)]


def test_rows_regressions_first_then_fastest_with_speedup_and_baseline(run: tuple[Path, list[Record]]) -> None:
    run_dir, records = run
    tables = {t.model: t for t in model_tables(records, run_dir)}
    assert {m: [r.variant for r in t.rows] for m, t in tables.items()} == EXPECTED
    p50 = {v: p for v, _, p, *_ in PERF_VARIANTS}
    for model, table in tables.items():
        assert table.reference == f"{model}-fp32-torch_cpu"
        for row in table.rows:
            if row.variant == table.reference:
                assert row.speedup is None and row.speedup_text == "1.00× (reference)"
            else:
                assert row.speedup == pytest.approx(p50[table.reference] / p50[row.variant])
    marian = {r.variant: r for r in tables["marian"].rows}
    assert marian["marian-fp32-ort_cpu"].baseline_text == "+31.0%" and marian["marian-fp32-ort_cpu"].regressed
    assert {r.variant: r.baseline_text for r in tables["bert"].rows if r.baseline} == {"bert-fp32-ort_cpu": "+4.0%"}
    bert = {r.variant: r for r in tables["bert"].rows}
    assert bert["bert-int8-ort_cpu"].verdict_text == "FAIL: p99_ms = 29.8 ms (must be <= 25 ms)"  # why it is first
    assert bert["bert-fp32-ort_cpu"].verdict_text == "pass"
    assert set(PERF_BASELINE) <= {r.variant for t in tables.values() for r in t.rows}
    # negative control: without the gate's file the baseline regression is no longer one (order by speed)
    plain = {t.model: [r.variant for r in t.rows] for t in model_tables(records)}
    assert plain["marian"] == ["marian-int8-ort_cpu", "marian-fp32-ort_cpu", "marian-fp32-torch_cpu"]
    # no PyTorch FP32 variant: no speedups, and the table says why
    no_reference = model_tables([r for r in records if r.variant != "bert-fp32-torch_cpu"])
    assert no_reference[0].reference is None and all(r.speedup is None for r in no_reference[0].rows)


def test_summary_md_and_terminal_carry_the_same_rows(run: tuple[Path, list[Record]]) -> None:
    run_dir, records = run
    summary = render_summary(records, run_dir=run_dir)
    section = summary[summary.index("## Performance per model"):summary.index("## All cases")]
    for model, variants in EXPECTED.items():
        block = section[section.index(f"### {model}"):]
        assert re.findall(r"^\| `([^`]+)` \|", block, re.M)[:3] == variants
    assert "| variant | verdict | p50 | p99 (95% interval) | throughput | peak RSS | size | cold start | vs PyTorch FP32 | " \
           "p50 vs baseline |" in section
    assert "`marian-fp32-ort_cpu` | slower than the baseline | 12 ms | 19 ms [17.1 ms, 22.8 ms] | 83.3 calls/s" in section
    assert summary.index("**host** ci-runner-7") < summary.index("## Performance per model")
    assert "**run** 2026-01-05 00:00 UTC" in summary
    lines = perf_plain_lines(records, run_dir)
    assert [ln.split()[1] for ln in lines if ln.startswith("  REGRESSED")] == ["bert-int8-ort_cpu", "marian-fp32-ort_cpu"]
    assert "performance: bert" in lines and "vs PyTorch FP32 21.94×" in lines[lines.index("performance: bert") + 2]
    # negative control: a run without perf records has no perf section
    assert "Performance per model" not in render_summary([r for r in records if not r.perf])


def perf_section_checks(page: str) -> None:
    """The perf section of the fixture run's HTML report (``tests/screenshots.py`` renders it once, for
    the browser test too): a table per model in reading order, its chart beside it naming every
    variant once, the regressed rows shaded, the percentiles folded per model, none in the overview."""
    perf = page[page.index('<section id="perf">'):]
    perf = perf[:perf.index("</section>")]
    for model, variants in EXPECTED.items():
        table = re.search(rf'<table class="variants" data-model="{model}">(.*?)</table>', perf, re.S)
        assert table is not None
        assert re.findall(r'data-variant="([^"]+)"', table.group(1)) == variants
        assert f'aria-label="{model}: 3 variants"' in perf
    assert re.findall(r'<tr class="bad" data-variant="([^"]+)"', perf) == ["bert-int8-ort_cpu", "marian-fp32-ort_cpu"]
    overview = re.sub(r"<details>.*?</details>", "", perf, flags=re.S)
    assert '<table class="perf">' not in overview and perf.count('<table class="perf">') == 2  # folded per model
