"""The HTML pages' templates: Jinja2 with autoescape on, so every string a record, a corpus or a
model name brings is escaped where it is placed, without a hand-written ``escape()`` per cell.

The HTML rule, applied to every ``{{ value }}`` by the environment (``finalize``): control
characters as ``\\xNN`` (``harness.report.text.printable``, the rule of every output), then
HTML-escaped. A decoded token, a model name, a file name or a server's error message can hold ESC
or an XML control character: shown, never passed to the page raw.

Templates live in ``templates/`` inside the package (shipped in the wheel). Inline SVG produced
by matplotlib (``plots.to_svg``) is the only markup passed through unescaped, as ``Markup``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from harness.report.text import printable

if TYPE_CHECKING:  # pragma: no cover
    from jinja2 import Environment


@lru_cache(maxsize=1)
def environment() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    return Environment(loader=PackageLoader("harness.report.html", "templates"),
                       autoescape=select_autoescape(default=True, default_for_string=True), finalize=_shown,
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def _shown(value: Any) -> Any:
    """Every template value's text with its control characters escaped; trusted markup as is."""
    from markupsafe import Markup


    if isinstance(value, str) and not isinstance(value, Markup):
        return printable(value, keep_newlines=True)
    return value


def render(template: str, **context: Any) -> str:
    """``template`` (a file in ``templates/``) rendered with ``context``; values are escaped."""
    return environment().get_template(template).render(**context)


def markup(html: str) -> Any:
    """Trusted markup built by the harness itself (matplotlib's SVG), passed through unescaped."""
    from markupsafe import Markup

    return Markup(html)
