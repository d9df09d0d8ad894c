"""Escaping everywhere: a string from a model, a tokenizer, a file or a server reaches every
output inert. Planted here -- an HTML element with a script handler, a Markdown pipe, an ANSI
escape and an XML control character -- in a token, a model name, a file name and a server error,
then checked in summary.md, the HTML report (in headless chromium: no script runs), junit.xml and
the terminal (docs/reliability.md, "Untrusted inputs")."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from report_fixture import record
from untrusted_fixtures import manifest_of, numeric_bundle, write

from harness.cli import main
from harness.report.junit import render_junit

IMG = "<img src=x onerror=alert(1)>"
PLANT = f"{IMG}a|b\x1b[31mRED\x1b[0m\x0bVT\x01"
RAW_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("planted") / "run"
    batch = run / "cases" / f"file{PLANT}" / "model.npz"  # a file name
    batch.parent.mkdir(parents=True)
    batch.write_bytes(b"x")
    records = [
        record("test_logits_parity", f"model{PLANT}-int8-ort_cpu", "fail",  # a model name
               reason="model/logits: norm_max_abs = 0.3 (must be <= 0.1)",
               metrics={"model.logits.norm_max_abs": 0.3},
               thresholds={"model.logits.norm_max_abs": {"threshold": 0.1, "op": "<="}},
               data={"worst": {"model.logits": f"at token {PLANT}"}, "failing_batches": {"model": str(batch)}}),
        record("test_generation_parity", "marian-int8-ort_cpu", "fail", reason="gen_bleu_vs_torch = 12 (must be >= 30)",
               metrics={"gen_bleu_vs_torch": 12.0}, thresholds={"gen_bleu_vs_torch": {"threshold": 30.0, "op": ">="}},
               data={"worst_pairs": [{"index": 1, "source": "two cats", "reference": "zwei Katzen",  # a token
                                      "pytorch": f"zwei {PLANT}", "variant": f"drei {PLANT}", "edit_distance": 3,
                                      "norm_edit_distance": 0.3}]}),
        record("test_endpoint", "served-fp32-kserve", "error", reason=f"EndpointRefused: HTTP 500: {PLANT}"),  # a server
        {**record(f"test_{PLANT}", "bert-fp32-ort_cpu", "error", reason="could not collect"), "suite": f"test_{PLANT}.py"},
    ]
    run.mkdir(exist_ok=True)
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["report", str(run), "--markdown", str(run / "summary.md"), "--html", str(run / "report.html")]) == 0
    return run


def _outside_code(markdown: str) -> str:
    """The Markdown a renderer would interpret: fenced blocks and code spans removed."""
    without_fences = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", markdown)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", without_fences)


def test_summary_md_keeps_every_planted_string_inert(run_dir: Path) -> None:
    text = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert not RAW_CONTROL.search(text), "a raw control character in summary.md"
    prose = _outside_code(text)
    assert "<img" not in prose, prose  # as text in code spans and fences, as &lt;img elsewhere
    for table in re.findall(r"(?m)(?:^\|.*\|\n)+", text):  # every row has the header's columns
        widths = {len(re.findall(r"(?<!\\)\|", _outside_code_keep_pipes(row))) for row in table.splitlines()}
        assert len(widths) == 1, table


def _outside_code_keep_pipes(row: str) -> str:
    """A table row with its code spans blanked but their escaped pipes left escaped."""
    return re.sub(r"(`+)(?:(?!\1).)+?\1", lambda m: "x" * len(m.group(0).replace("\\|", "")), row)


def test_junit_xml_parses_and_holds_no_control_characters(run_dir: Path) -> None:
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    xml = render_junit(records)
    assert not RAW_CONTROL.search(xml)
    root = ET.fromstring(xml)  # before: classname held \x0b -- not well-formed XML
    names = [case.get("classname") for case in root.iter("testcase")]
    assert any(n and "\\x1b[31mRED" in n for n in names), names


def test_the_terminal_shows_escapes_not_colours(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = numeric_bundle(tmp_path / "bundle")
    manifest = manifest_of(bundle)
    manifest["case"] = f"case{PLANT}"  # a name from someone else's bundle
    write(bundle, manifest)
    assert main(["repro", str(bundle)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and not RAW_CONTROL.search(out)
    assert "case<img src=x onerror=alert(1)>a|b\\x1b[31mRED" in out  # shown, as text


def test_html_report_in_a_real_browser_runs_no_planted_script(run_dir: Path) -> None:
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert not RAW_CONTROL.search(html), "a raw control character in the HTML"
    if not CHROMIUM.exists():
        pytest.skip(f"chromium not installed at {CHROMIUM} (Debian package chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (extra test)")
    dialogs: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            page = browser.new_page()
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto((run_dir / "report.html").as_uri(), wait_until="load")
            handlers = page.evaluate("document.querySelectorAll('[onerror], [onload], img').length")
            shown = page.evaluate("document.body.innerText")
        finally:
            browser.close()
    assert dialogs == [] and handlers == 0
    assert IMG in shown  # the planted text is on the page, as text
