"""The HTML report on a run with failures, perf cases and a history: structure, order,
escaping, offline-ness, the headline chosen by the metric registry, the CLI; and the same page
in a real headless Chromium (DOM, no console errors, a screenshot)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from report_fixture import FAILING_ID, HOSTILE, make_history, make_run
from waiting import PATIENCE

from harness.cli import main
from harness.report.html.diff import highlight
from harness.report.html.headline import headline
from harness.results.rundir import read_results

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("report")
    run, db = make_run(root), make_history(root)
    out = root / "site" / "report.html"
    assert main(["report", str(run), "--html", str(out), "--history-db", str(db)]) == 0
    return run, db, out


def test_sections_order_and_failures_first(site: tuple[Path, Path, Path]) -> None:
    page = site[2].read_text()
    assert page.index('id="verdict"') < page.index('id="overview"') < page.index('id="failures"') \
        < page.index('id="perf"') < page.index('id="trends"') < page.index('id="cases"')
    assert "FAILED — 6 cases: 3 pass, 2 fail, 0 error, 0 not-run, 1 skip" in page
    failures = re.findall(r'<article class="failure[^"]*" id="[^"]+" data-case="([^"]+)"', page)
    assert failures == ["test_generation_parity[marian-int8-ort_cpu]", FAILING_ID]
    rows = re.findall(r'<tr[^>]* class="v-(\w+)" data-case=', page)
    assert rows[:2] == ["fail", "fail"] and rows[-1] == "skip"


def test_every_string_is_escaped_and_nothing_loads_from_outside(site: tuple[Path, Path, Path]) -> None:
    page = site[2].read_text()
    assert HOSTILE not in page and "<script" not in page.lower()
    assert "&lt;script&gt;" in page and "Test CPU &lt;b&gt;" in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # offline: no CDN, no remote asset


def test_plots_are_inline_svg(site: tuple[Path, Path, Path]) -> None:
    page = site[2].read_text()
    labels = re.findall(r'<figure class="plot" aria-label="([^"]+)"><svg', page)
    assert {"bert: 1 variant", "marian: 1 variant", "latency distribution: bert latency_ms"} <= set(labels)
    assert any(label.startswith("trend: ") for label in labels)
    assert "trend: perf:latency_ms.p50" in labels  # the latency case's headline, through the registry


def test_failure_card_has_checks_worst_element_diff_rerun_and_saved_batch(site: tuple[Path, Path, Path]) -> None:
    run, _, out = site
    page = out.read_text()
    card = page[page.index(f'data-case="{FAILING_ID}"'):]
    card = card[: card.index("</article>")]
    assert "norm_max_abs" in card and "0.31" in card and "&lt;= 0.15" in card and "FAIL" in card
    assert "worst element of <code>model.logits</code>: batch=3, position=17" in card
    assert "harness run --models bert --precisions int8" in card
    link = re.search(r'<a href="([^"]+)">failing batch of model</a>', card)
    assert link and (out.parent / link.group(1)).resolve() == (run / "cases" / FAILING_ID / "model.npz").resolve()
    bundle = re.search(r'<a href="([^"]+)">repro bundle of model \(harness repro DIR\)</a>', card)
    assert bundle and (out.parent / bundle.group(1)).resolve() == \
        (run / "cases" / FAILING_ID / "repro-model" / "bundle.json").resolve()
    assert "<del>Katzen</del>" in page and "<ins>Hunde</ins>" in page


def test_headline_comes_from_the_registry(site: tuple[Path, Path, Path]) -> None:
    records = {r.id: r for r in read_results(site[0])}
    failing = headline(records[FAILING_ID])
    assert failing is not None and (failing.metric, failing.passed, failing.threshold) == ("norm_max_abs", False, 0.15)
    passing = headline(records["test_logits_parity[bert-fp32-ort_cpu]"])
    assert passing is not None and passing.metric == "norm_max_abs" and passing.passed  # declared before cosine
    perf = headline(records["test_latency[bert-fp32-ort_cpu]"])
    assert perf is not None and (perf.metric, perf.value) == ("p50_ms", 1.08)
    assert headline(records["test_generation_parity[marian-fp16-ort_cuda]"]) is None


def test_diff_marks_only_the_differing_characters() -> None:
    ref, got = highlight("zwei Katzen <3", "zwei Hunde <3")
    assert ref.startswith("zwei ") and "<del>" in ref and "&lt;3" in ref and "<ins>" in got and "&lt;3" in got


def test_csv_has_the_headline_columns(site: tuple[Path, Path, Path], tmp_path: Path) -> None:
    import pandas as pd

    out = tmp_path / "r.csv"
    assert main(["report", str(site[0]), "--csv", str(out)]) == 0
    frame = pd.read_csv(out).set_index("id")
    assert frame.loc[FAILING_ID, "headline_metric"] == "model.logits.norm_max_abs"
    assert frame.loc[FAILING_ID, "headline_threshold"] == "<= 0.15"
    assert len(frame) == 6


def test_db_without_html_is_a_usage_error(site: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(site[0]), "--history-db", str(site[1])]) == 2
    assert "--history-db" in capsys.readouterr().err


def test_grid_cell_per_variant_coloured_by_worst_verdict(site: tuple[Path, Path, Path]) -> None:
    page = site[2].read_text()
    by_variant = {v: k for k, v in re.findall(r'data-verdict="(\w+)" data-variant="([^"]+)"', page)}
    assert by_variant == {"bert-fp32-ort_cpu": "pass", "bert-int8-ort_cpu": "fail",
                          "marian-int8-ort_cpu": "fail", "marian-fp16-ort_cuda": "skip"}


def test_report_in_headless_chromium(site: tuple[Path, Path, Path]) -> None:
    """The page in a real browser: the grid renders a cell per variant, the SVG plots have a size,
    the first thing under Failures is a failing case, and the console stays clean."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not installed at {CHROMIUM} (Debian package chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (extra test)")
    out = site[2]
    problems: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
            page.goto(out.as_uri(), wait_until="load")
            assert page.locator("#verdict").get_attribute("data-state") == "failed"
            assert page.locator("table.grid td.cell").count() == 4
            assert page.locator("table.grid td.cell.v-fail").count() == 2
            sizes = page.eval_on_selector_all("figure.plot svg", "els => els.map(e => e.getBoundingClientRect().width)")
            assert len(sizes) >= 5 and min(sizes) > 100
            first = page.locator("#failures article.failure").first
            assert first.get_attribute("data-case", timeout=PATIENCE * 1000) == "test_generation_parity[marian-int8-ort_cpu]"
            assert page.locator("#failures ins, #failures del").count() >= 1
            shot = out.parent / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert problems == []
    assert shot.stat().st_size > 10_000
    keep = shutil.os.environ.get("HARNESS_TEST_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "report.png")
    print(f"screenshot: {shot}")


def test_history_show_html_renders_trend_plots(site: tuple[Path, Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "trend.html"
    assert main(["history", "show", "--metric", "perf:*", "--history-db", str(site[1]), "--html", str(out)]) == 0
    page = out.read_text()
    labels = re.findall(r'<figure class="plot" aria-label="([^"]+)"><svg', page)
    assert "trend: perf:latency_ms.p50" in labels and "trend: perf:cold_start_ms.load" in labels
    assert "<script" not in page


def test_missing_history_store_is_one_line(site: tuple[Path, Path, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(site[0]), "--html", str(out), "--history-db", str(tmp_path / "nope.sqlite")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no history database" in err and not out.exists()


def test_page_header_says_when_and_where_the_run_was(site: tuple[Path, Path, Path]) -> None:
    """The header names the run's time (its cases' finish times, UTC), the machine, the
    fingerprint and the versions: a page saved from a CI artifact still says what it describes."""
    page = site[2].read_text()
    header = re.search(r'<p class="env" id="run-header">(.*?)</p>', page, re.S)
    assert header is not None, page[:2000]
    text = header.group(1)
    assert "<b>run</b> 2026-01-05 00:00 UTC" in text and "<b>host</b> ci-runner-7" in text
    assert "onnxruntime 1.20.0" in text and "f00d" in text
    assert page.index('id="run-header"') < page.index('id="verdict"')  # the page opens with it
