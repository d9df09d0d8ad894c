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
RENDERERS = [*(ROOT / "harness" / "report").rglob("*.py"), *(ROOT / "harness" / "compare").rglob("*.py")]
#: builds a fragment of markup token by token (<del>/<ins> around escaped text), handed on as markup
HAND_ESCAPED = {ROOT / "harness" / "report" / "html" / "diff.py"}


def test_no_renderer_escapes_html_by_hand() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in RENDERERS
                 if p not in HAND_ESCAPED and re.search(r"html\.escape|from html import escape", p.read_text())]
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
