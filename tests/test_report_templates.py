"""The HTML pages come from Jinja2 templates with autoescape on (harness/report/html/templates):
no renderer escapes by hand, every template a renderer names exists, and the wheel ships them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "harness" / "report" / "html" / "templates"
#: every module that writes an HTML page: the report, compare, `history show --html`, `bisect`'s page
RENDERERS = [*(ROOT / "harness" / "report").rglob("*.py"), *(ROOT / "harness" / "compare").rglob("*.py"),
             ROOT / "harness" / "cli" / "history.py", ROOT / "harness" / "debug" / "report.py"]


def test_no_renderer_escapes_html_by_hand() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in RENDERERS
                 if re.search(r"html\.escape|from html import escape", p.read_text())]
    assert not offenders, f"escape in a template instead (autoescape is on): {offenders}"


def test_every_named_template_exists_and_ships_in_the_wheel() -> None:
    named = {m for p in RENDERERS for m in re.findall(r"render\(\"([\w.]+\.j2)\"", p.read_text())}
    assert {"report.html.j2", "grid.html.j2", "failures.html.j2", "compare.html.j2"} <= named
    assert not named - {t.name for t in TEMPLATES.glob("*.j2")}
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["harness"]
    assert "report/html/templates/*.j2" in data


def test_autoescape_is_on_for_every_template() -> None:
    from harness.report.html.templating import environment, render

    assert environment().autoescape("grid.html.j2") is True
    html = render("figure.html.j2", label='<script>"x"</script>', svg="<svg/>")
    assert "&lt;script&gt;&#34;x&#34;&lt;/script&gt;" in html and "&lt;svg/&gt;" in html  # a str is never markup


def test_a_headline_number_is_written_by_its_units_formatter() -> None:
    """The grid's cold start read `load_ms 1.007e+04 ms`; a time, size or rate now goes through
    the formatter of its unit (harness/report/units.py), a unitless metric keeps its digits."""
    from harness.report.html.headline import Headline

    assert Headline("load_ms", "perf.load_ms", 10070.000000000002, 15000, "<=", True, "ms").text() == \
        "load_ms 10.1 s <= 15 s"
    assert Headline("p50_ms", "perf.p50_ms", 1.0834, unit="ms").text() == "p50_ms 1.08 ms"
    assert Headline("norm_max_abs", "m.norm_max_abs", 0.01552, 0.15, "<=", True, "output units").text() == \
        "norm_max_abs 0.01552 <= 0.15"


def test_a_sentence_diff_escapes_what_the_model_wrote() -> None:
    """The failure cards' sentence diff (was hand-escaped f-strings): <del>/<ins> are the
    template's, a tag the model decoded is text."""
    from harness.report.html.diff import highlight, pieces

    assert pieces("zwei Katzen", "zwei Hunde") == ([("same", "zwei "), ("del", "Katzen")],
                                                     [("same", "zwei "), ("ins", "Hunde")])
    ref, got = highlight("<script>alert(1)</script> Katzen", "<script>alert(1)</script> Hunde")
    assert "<script>" not in ref + got and ref.startswith("&lt;script&gt;alert(1)&lt;/script&gt; ")
    assert ref.endswith("<del>Katzen</del>") and got.endswith("<ins>Hunde</ins>")


def test_the_history_and_bisect_pages_escape_a_model_name() -> None:
    """`harness history show --html` and `harness bisect`'s bisect.html (were f-strings with
    html.escape): a model or metric named <script> is text in the title, the heading and the table."""
    from harness.report.html.templating import markup, render

    hostile = "<script>alert(1)</script>"
    page = render("history_page.html.j2", title=f"history of {hostile!r}", css=markup("b{}"),
                  body=markup("<svg></svg>"))
    assert "<script>" not in page and page.count("&lt;script&gt;") == 2 and "<svg></svg>" in page
    page = render("bisect.html.j2", title=f"{hostile} / model / int8", headline=[f"first divergent: {hostile}", "x"],
                  plot=markup("<svg/>"), bars=markup(""), header=["module"], rows=[[hostile]])
    assert "<script>" not in page and page.count("&lt;script&gt;") == 4 and "<br>" in page


def test_a_number_reads_the_same_on_every_surface() -> None:
    """One formatter per unit (harness/report/units.py, the unit from the metric registry) behind
    the HTML grid and failure card, summary.md, the terminal table and the compare page: a time
    of 10070 ms is `10.1 s` on each (never `1.007e+04`), a unitless KL the same digits on each."""
    from report_fixture import record

    from harness.compare.diff import MetricDelta
    from harness.compare.render import _accuracy_cells
    from harness.report.html.cases import render_failures
    from harness.report.html.headline import headline
    from harness.report.summary import render_summary
    from harness.report.terminal import plain_lines
    from harness.results import Record

    raw = record("test_latency", "bert-fp32-ort_cpu", "fail",
                 metrics={"perf.p50_ms": 10070.000000000002, "model.logits.kl": 0.0123456},
                 thresholds={"perf.p50_ms": {"threshold": 5000, "op": "<="},
                             "model.logits.kl": {"threshold": 0.02, "op": "<="}})
    rec = Record.coerce(raw)
    grid = headline(rec)
    assert grid is not None and grid.text() == "p50_ms 10.1 s <= 5 s ✗"
    card = render_failures([rec], None, None)
    summary = render_summary([raw])
    terminal = "\n".join(plain_lines([raw]))
    compared = _accuracy_cells(MetricDelta(rec.id, "perf.p50_ms", 5000.0, 10070.000000000002, "lower"))
    assert compared[2:5] == ["5 s", "10.1 s", "5.07 s"]
    for surface in (card, summary, terminal):
        assert "10.1 s" in surface and "1.007e+04" not in surface and "10070" not in surface, surface
    assert "0.0123456" in card and "0.0123456" in summary  # kl beside its threshold: 6 significant digits on both
