"""One Markdown table writer (harness/core/markdown.py): every table the harness writes goes
through it, so a pipe in a cell (a reason, a help text) cannot split a row anywhere (the writer's
own behaviour: tests/test_report.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_module_builds_a_markdown_table_by_hand() -> None:
    rule = re.compile(r"""["'][|:\- ]*(\|---|---\|)""")  # a table's rule row written as a literal
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "harness").rglob("*.py"))
                 if path != ROOT / "harness" / "core" / "markdown.py"
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if rule.search(line)]
    assert not offenders, f"hand-built Markdown tables (use harness.core.markdown.table): {offenders}"
