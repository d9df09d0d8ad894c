"""Feature plugins loaded by ``harness.plugin`` (each module is a pytest plugin).

Adding a feature with its own pytest options/fixtures (perf, generation, config files) =
one module here; ``harness.plugin`` lists them in its ``pytest_plugins``.
"""

from __future__ import annotations

import pkgutil


def discover() -> list[str]:
    return sorted(f"{__name__}.{info.name}" for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))
