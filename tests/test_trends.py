"""Trend plots and change points over a history store (issue 28 item 1, issue 26 item 6): a variant
stored in 2 of 4 runs is drawn at those runs' times (read back from the rendered SVG), the axes say
when and in which unit, change points are found, marked and named, and ``harness history changes``
lists them per variant."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from report_fixture import write_run

from harness.cli import main
from harness.gate.changepoints import detect
from harness.results import history

ENV = {"fingerprint": "f00d", "cpu": "Test CPU", "cores": 2}
#: night -> variant -> p50 (ms); marian-tiny-int8-ort_cpu is stored only in nights 1 and 3
P50: dict[int, dict[str, float]] = {
    0: {"bert-tiny-fp32-ort_cpu": 2.00, "bert-tiny-int8-ort_cpu": 1.00},
    1: {"bert-tiny-fp32-ort_cpu": 2.02, "bert-tiny-int8-ort_cpu": 1.01, "marian-tiny-int8-ort_cpu": 7.0},
    2: {"bert-tiny-fp32-ort_cpu": 3.00, "bert-tiny-int8-ort_cpu": 0.99},
    3: {"bert-tiny-fp32-ort_cpu": 3.03, "bert-tiny-int8-ort_cpu": 1.00, "marian-tiny-int8-ort_cpu": 7.1},
}


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def night(root: Path, n: int) -> Path:
    rows: list[dict[str, Any]] = []
    for variant, p50 in P50[n].items():
        rows.append({"schema": "harness.result/1", "run_id": f"night{n}", "variant": variant, "env": ENV,
                     "finished": f"2026-03-{n * 2 + 1:02d}T02:00:00+0000", "harness_version": "0.1.0",
                     "id": f"test_latency[{variant}]", "suite": "test_perf", "verdict": "pass", "metrics": {},
                     "perf": {"latency_ms": {"samples": [p50] * 3, "summary": {"p50": p50}}}})
    return write_run(root / f"nightly-{n}", rows)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    store = tmp_path / "history.sqlite"
    for n in P50:
        history.ingest(night(tmp_path, n), store)
    return store


def _trend_page(db: Path, tmp_path: Path) -> str:
    out = tmp_path / "trend.html"
    assert main(["history", "show", "--metric", "perf:latency_ms.p50", "--history-db", str(db), "--html", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def _line_xs(svg: str, gid: str) -> list[float]:
    """x coordinates of the polyline drawn for ``gid`` (matplotlib writes ``<g id=gid><path d="M x y L x y ...">``)."""
    found = re.search(r'<g id="' + re.escape(gid) + r'">\s*<path d="([^"]+)"', svg)
    assert found, f"no line {gid} in the SVG"
    return [float(x) for x in re.findall(r"[ML] (-?[\d.]+) -?[\d.]+", found.group(1))]


def _tick_xs(svg: str) -> list[float]:
    """x positions of the bottom panel's x ticks, in order (one per run)."""
    ticks = re.findall(r'<g id="xtick_\d+">.*?<use [^>]*x="(-?[\d.]+)"', svg, flags=re.S)
    return [float(x) for x in ticks]


def test_a_variant_missing_from_two_runs_is_drawn_at_its_real_runs(db: Path, tmp_path: Path) -> None:
    page = _trend_page(db, tmp_path)
    ticks = _tick_xs(page)
    # 2 panels (bert-tiny, marian-tiny) share the axis: 4 run ticks each, the same 4 positions
    runs = sorted(set(ticks))
    assert len(runs) == 4 and ticks.count(runs[0]) == 2
    assert _line_xs(page, "series:marian-tiny-int8-ort_cpu") == pytest.approx([runs[1], runs[3]], abs=0.01)
    assert _line_xs(page, "series:bert-tiny-fp32-ort_cpu") == pytest.approx(runs, abs=0.01)
    # spacing follows the dates (nights 2 days apart: equal steps here)
    assert np.diff(runs) == pytest.approx([runs[1] - runs[0]] * 3, rel=0.01)
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", page)
    assert any("03-03 02:00" in t for t in texts) and any(t.startswith("night1") for t in texts), texts
    assert "latency p50 (ms)" in texts
    assert "run finished (UTC) and run id" in texts


def test_change_point_is_marked_and_its_first_bad_run_named(db: Path, tmp_path: Path) -> None:
    page = _trend_page(db, tmp_path)
    assert '<g id="change:bert-tiny-fp32-ort_cpu:night2">' in page
    assert "change:bert-tiny-int8-ort_cpu" not in page  # flat within noise
    named = re.search(r'<li data-variant="bert-tiny-fp32-ort_cpu" data-run="night2">(.*?)</li>', page, flags=re.S)
    assert named and "(2.01 ms → 3.01 ms) since run <code>night2</code> (2026-03-05 02:00), the first bad run" in named.group(1)
    # the table fallback holds every run, the missing values empty, the change marked
    table = page[page.index('<table class="trend-table">'):]
    assert table.count("<tr><td><code>night") == 4 * 1  # one table (one metric), four runs
    assert 'class="num change worse">3 ms ▲' in table


def test_detect_finds_a_level_shift_and_not_noise() -> None:
    rng = np.random.default_rng(7)
    noise = 10 * (1 + 0.03 * rng.standard_normal(40))
    assert detect(noise) == []
    shifted = np.concatenate([noise[:25], noise[25:] * 1.3])
    assert detect(shifted) == [25]
    assert detect([2.0, 2.0, 3.0, 3.0]) == [2]
    assert detect([2.0, 2.0, 3.0]) == []  # a single new value is what the band shows, not a level


def test_history_changes_lists_change_points_per_variant(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # bert-tiny-fp32's p50 moved +50 % two nights ago and stayed: the series rule fails the command
    assert main(["history", "changes", "--metric", "perf:latency_ms.p50", "--history-db", str(db)]) == 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "bert-tiny-fp32-ort_cpu" in line)
    assert "night2" in row and "2026-03-05" in row and "+50.0%" in row and "worse" in row
    assert "bert-tiny-int8-ort_cpu" not in out.split("change point", 1)[-1]
    assert "1 change point(s) in 3 series" in out
    verdicts = out.split("1 change point(s)", 1)[1]
    assert "REGRESSION" in next(line for line in verdicts.splitlines() if "bert-tiny-fp32-ort_cpu" in line)
    assert "INCONCLUSIVE" in next(line for line in verdicts.splitlines() if "marian-tiny-int8-ort_cpu" in line)
    assert "bert-tiny-int8-ort_cpu" not in verdicts.split("REGRESSION: 3 series", 1)[0]  # a plain PASS: not listed
    assert "REGRESSION: 3 series judged by the perf gate's series rule (1 INCONCLUSIVE, 1 PASS, 1 REGRESSION)" in \
        " ".join(verdicts.split())


def test_history_changes_with_no_series_long_enough_to_judge_is_not_green(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three nights hold no series the rule can judge (a level of two runs each side of a change):
    nothing compared is exit 1, not a green "3 INCONCLUSIVE"; --allow-missing accepts it and says so."""
    args = ["history", "changes", "--metric", "perf:latency_ms.p50", "--history-db", str(db), "--last", "3"]
    assert main(args) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "FAIL: 3 series" in out and "nothing compared (0 series with 4 or more runs)" in out
    assert main([*args, "--allow-missing"]) == 0
    assert "OK: 3 series" in " ".join(capsys.readouterr().out.split())


def test_history_changes_passes_a_flat_store(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The control: without the one variant that moved, the same store's series all pass (exit 0)."""
    assert main(["history", "changes", "--metric", "perf:latency_ms.p50", "--variant", "bert-tiny-int8-ort_cpu",
                 "--history-db", str(db)]) == 0
    assert "OK: 1 series judged by the perf gate's series rule (1 PASS)" in " ".join(capsys.readouterr().out.split())


def test_history_changes_unknown_metric_is_one_line(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "changes", "--metric", "perf:latency_ms.p5O", "--history-db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no stored metric matches" in err


def test_screenshot_script_photographs_the_pages(tmp_path: Path) -> None:
    """tests/screenshots.py (what docs/img is made with) in a real headless Chromium."""
    import screenshots

    if not Path(screenshots.CHROMIUM).exists():
        pytest.skip(f"chromium not installed at {screenshots.CHROMIUM} (Debian package chromium; .ci/run installs it)")
    pytest.importorskip("playwright.sync_api", reason="playwright not installed (extra test)")
    seen: dict[str, Any] = {}
    pages = screenshots.build_pages(tmp_path / "pages")
    from test_perf_page import perf_section_checks

    perf_section_checks(pages["perf"].read_text())
    shots = screenshots.screenshot(pages, tmp_path / "img", seen=seen)
    assert [s.name for s in shots] == ["report.png", "perf.png", "compare.png", "trends.png"]
    assert all(s.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and s.stat().st_size > 20_000 for s in shots)
    # the perf run's tables as the browser shows them: every variant once, in its model's table,
    # regressions first, the speedup column the reference's p50 over the variant's, from the records
    from report_fixture import PERF_VARIANTS
    from test_perf_page import EXPECTED

    rows = seen["perf_rows"]
    assert all(r["visible"] for r in rows)
    assert {m: [r["variant"] for r in rows if r["model"] == m] for m in EXPECTED} == EXPECTED
    heads = seen["table_heads"][0]
    speedup = heads.index("vs PyTorch FP32")
    p50 = {v: p for v, _, p, *_ in PERF_VARIANTS}
    for r in rows:
        reference = p50[f"{r['model']}-fp32-torch_cpu"]
        shown = r["cells"][speedup]
        expected = "1.00× (reference)" if r["variant"].endswith("fp32-torch_cpu") else \
            f"{reference / p50[r['variant']]:.2f}×"
        assert shown == expected, (r["variant"], shown)
    assert [r["variant"] for r in rows if r["regressed"]] == ["bert-int8-ort_cpu", "marian-fp32-ort_cpu"]


def test_history_show_keeps_metric_names_whole_on_a_narrow_terminal(db: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "70")
    assert main(["history", "show", "--metric", "perf:latency_ms.p50", "--history-db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "perf:latency_ms.p50" in out and "marian-tiny-int8-ort_cpu" in out


def test_history_changes_names_a_bracketed_series_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The verdict line printed ``latency_ms[gen=tpot,kv=on].p50`` as ``latency_ms.p50``: rich read the
    brackets as a style tag, so TPOT and TTFT regressions read as the same series."""
    store = tmp_path / "history.sqlite"
    for n in P50:
        rows = [{"schema": "harness.result/1", "run_id": f"night{n}", "variant": variant, "env": ENV,
                 "finished": f"2026-03-{n * 2 + 1:02d}T02:00:00+0000", "harness_version": "0.1.0",
                 "id": f"test_generation_perf[{variant}]", "suite": "test_perf", "verdict": "pass", "metrics": {},
                 "perf": {"latency_ms[gen=tpot,kv=on]": {"samples": [p50] * 3, "summary": {"p50": p50}}}}
                for variant, p50 in P50[n].items()]
        history.ingest(write_run(tmp_path / f"nightly-{n}", rows), store)
    assert main(["history", "changes", "--metric", "perf:latency_ms*", "--history-db", str(store)]) == 1
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("REGRESSION:"))
    assert "bert-tiny-fp32-ort_cpu perf:latency_ms[gen=tpot,kv=on].p50: +50.0%" in line
