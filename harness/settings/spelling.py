"""An option as the user spells it, on the command that parsed it.

``harness run`` starts pytest in-process; a skip reason or a refusal printed from inside pytest
would name pytest's flag (``use --harness-perf``) to a user who typed ``harness run`` and for whom
the option is ``--perf``. The command travels with the options (``RunOptions.command``, handed
whole to the session and to each xdist worker); every message that names an option asks
:func:`user_flag` with it.
"""

from __future__ import annotations

from harness.settings.options import option


def user_flag(name: str, command: str) -> str:
    """The flag of option ``name`` as ``command``'s user types it (``--perf`` for ``run``,
    ``--harness-perf`` in a plain pytest session)."""
    o = option(name)
    return o.flag if command == "run" and o.on_cli else o.pytest_flag
