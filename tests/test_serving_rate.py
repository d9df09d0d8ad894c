"""The request-rate sweep against a real MLServer (tests/serving/mlserver.py): open-loop
Poisson arrivals at two offered rates with a p99 budget.

The budget is generous for the low rate (5 requests/s against 1.5 s at p99: met on any machine
that answers at all) and the high rate is far beyond what one Python server process on two
cores answers (2000 requests/s): the low level is the sustainable rate, the high level misses
the budget with a backlog, and the sweep stops there. Then the records go through the baseline
gate and the HTML report, whose latency-throughput curve is photographed in headless Chromium.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.cli import main

pytest.importorskip("tritonclient.http", reason="the serving client (pip install 'model-harness[serving]')")

CHROMIUM = "/usr/bin/chromium"
LOW, HIGH, BUDGET_MS = 5.0, 2000.0, 1500.0


def test_rate_sweep_reports_the_sustainable_rate_at_a_p99_budget(mlserver_bert, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["check", "--reference", "bert-tiny", "--endpoint", mlserver_bert.grpc, "--served-model", "bert",
                 "--samples", "8", "--batch-size", "4", "--perf", "--request-rate", f"{LOW:g}", f"{HIGH:g}",
                 "--arrival", "poisson", "--p99-budget", f"{BUDGET_MS:g}", "--sweep-window", "0.5",
                 "--step-budget", "6", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    records = {r["suite"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    perf = records["check_perf"]["perf"]
    summary = perf["serving_rate"]
    assert records["check_perf"]["verdict"] == "pass"
    assert summary["sustainable_rate"] == LOW and summary["ms_per_request"] == pytest.approx(1000 / LOW)
    low, high = summary["levels"]
    assert low["meets_budget"] and low["errors"] == 0 and low["backlog"] == 0 and low["sent"] > 0
    assert not high["meets_budget"] and (high["backlog"] > 0 or high["achieved"] < 0.9 * HIGH)
    # the high level offered far more requests in its time: sent (answered or failed) plus never sent; its
    # answered count alone depends on how fast a loaded machine answers (14 against the low level's 19 at load 22)
    assert high["sent"] + high["backlog"] > 10 * (low["sent"] + low["backlog"])
    entry = perf[f"latency_ms[rate={LOW:g},arrival=poisson]"]
    assert entry["offered_rate"] == LOW and entry["samples"] and entry["engine"] == "oip-grpc"
    assert f"sustainable rate at p99 <= {BUDGET_MS:g} ms: {LOW:g} requests/s" in text

    # gateable against a baseline: the served cost per request (1000 / sustainable rate) is a gated
    # number; the same run passes, a run whose sustainable rate halved is a regression
    store = tmp_path / "baselines"
    assert main(["baseline", "save", str(out), "--name", "served-rate", "--baseline-store", str(store)]) == 0
    assert _gate_row(out, store, tmp_path / "same.json") == (0, "PASS")
    slower = tmp_path / "slower"
    slower.mkdir()
    lines = []
    for line in (out / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["suite"] == "check_perf":
            record["perf"]["serving_rate"].update(sustainable_rate=LOW / 2, ms_per_request=2000 / LOW)
        lines.append(json.dumps(record))
    (slower / "results.jsonl").write_text("\n".join(lines) + "\n")
    assert _gate_row(slower, store, tmp_path / "slower.json") == (1, "REGRESSION")
    capsys.readouterr()

    html = tmp_path / "report.html"
    assert main(["report", str(out), "--html", str(html)]) == 0
    page = html.read_text()
    assert "served latency vs throughput: offered request rates (poisson arrivals)" in page
    _photograph_curve(html, tmp_path / "curve.png")


def _gate_row(run: Path, store: Path, report: Path) -> tuple[int, str]:
    code = main(["baseline", "compare", str(run), "--name", "served-rate", "--baseline-store", str(store), "--json", str(report)])
    rows = [r for r in json.loads(report.read_text())["rows"] if r["metric"] == "serving_rate.ms_per_request"]
    assert len(rows) == 1, rows
    return code, rows[0]["verdict"]


def _photograph_curve(html: Path, shot: Path) -> None:
    """The curve as a browser draws it: headless Debian Chromium through playwright."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not installed at {CHROMIUM} (Debian package chromium; .ci/run installs it)")
    sync = pytest.importorskip("playwright.sync_api", reason="playwright not installed (extra test)")
    with sync.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            page.goto(html.as_uri(), wait_until="load")
            figure = page.locator('figure.plot[aria-label^="served latency vs throughput"]')
            assert figure.count() == 1
            box = figure.bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 150
            figure.screenshot(path=str(shot))
        finally:
            browser.close()
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    target = os.environ.get("HARNESS_SCREENSHOT_DIR")  # docs/img/served-load-curve.png is made this way
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        (Path(target) / "served-load-curve.png").write_bytes(shot.read_bytes())
