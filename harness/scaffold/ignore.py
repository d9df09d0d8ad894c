"""The ``.gitignore`` entries for a repository the harness runs in."""

from __future__ import annotations

#: run directories (results.jsonl, summary.md, junit.xml, cases/), the CI cache directory, the
#: blessed baseline the workflow restores (``WorkflowSpec.baseline_store``), the blessed environment
#: ``harness baseline env`` lays out when a pull request changes the runtime's version, and the storage
#: directory pytest-benchmark (a dependency) creates in the working directory
ENTRIES = ("reports/", ".harness-cache/", ".harness-baseline/", ".harness-blessed-env/", ".benchmarks/")


def render_ignore() -> str:
    return "# model-harness: run reports and the CI cache of built models and exported artifacts\n" + \
        "\n".join(ENTRIES) + "\n"
