"""Which command the user typed, so a message names the option the way they spell it.

``harness run`` starts pytest in-process; a skip reason or a refusal printed from inside pytest
used to name pytest's flag (``use --harness-perf``) to a user who typed ``harness run`` and for
whom the option is ``--perf``. ``harness run`` sets :data:`FRONT_END` for the session; every
message that names an option asks :func:`user_flag`.
"""

from __future__ import annotations

import os

from harness.settings.options import option

#: set to the command (``run``) while ``harness run`` drives pytest
FRONT_END = "HARNESS_FRONT_END"


def front_end() -> str:
    """``run`` under ``harness run``; '' in a plain pytest session."""
    return os.environ.get(FRONT_END, "")


def user_flag(name: str) -> str:
    """The flag of option ``name`` as this session's user types it (``--perf`` or ``--harness-perf``)."""
    o = option(name)
    return o.flag if front_end() == "run" and o.on_cli else o.pytest_flag
