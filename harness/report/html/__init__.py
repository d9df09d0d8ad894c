"""The HTML report (``harness report --html``, ``harness merge``, ``harness compare --html``).

Small modules, one job each: ``headline`` (which number a case shows, from the metric registry),
``grid`` (the overview), ``cases`` (failures first, then every case), ``diff`` (differing
characters), ``perf`` and ``trends`` (matplotlib plots as inline SVG via ``plots``), ``page``.
"""

from harness.report.html.page import render_report

__all__ = ["render_report"]
