"""A team's fields in every record, without forking the harness (docs/hooks.md).

Put this ``conftest.py`` beside your gating tests: pytest loads it, and the harness calls its two
hooks -- the machine description every record carries (``env``) and each record just before it is
written to ``results.jsonl``. Installed as a package's ``model_harness.hooks`` entry point, the same
module serves ``harness run`` and ``harness check`` too.
"""

from __future__ import annotations

import os
from typing import Any


def harness_machine_info(info: dict[str, Any]) -> None:
    """Where the run ran: the CI runner's name (the environment fingerprint is not changed by it)."""
    info["runner"] = os.environ.get("RUNNER_NAME", "local")


def harness_record(record: dict[str, Any]) -> None:
    """Who owns the model and which ticket tracks it: read by the team's dashboards."""
    record["team"] = {"owner": "search-infra", "ticket": os.environ.get("RELEASE_TICKET", "none")}
