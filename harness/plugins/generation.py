"""pytest options for generation parity (``--harness-gen-*``) and the request fixture.

The options are rows of the option table (``harness.settings.options``, group ``gen``), so
``harness run --gen-samples``, ``[run] gen_samples`` in ``harness.toml`` and the records' rerun
commands know them too. Unset options leave each model's own choice
(``ModelSpec.extra["generation"]``) or the defaults in ``harness.judge.generation.DEFAULT_REQUEST``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from harness.core import UsageError
from harness.session import run_options

if TYPE_CHECKING:  # pragma: no cover
    from harness.judge.generation import GenerationRequest


def pytest_addoption(parser: pytest.Parser) -> None:
    from harness.settings.options import Group, add_pytest_options

    add_pytest_options(parser, Group.GEN, title="harness-generation",
                       description="generation parity (decode and score text)")


def pytest_configure(config: pytest.Config) -> None:
    """Bad values fail before any test runs (the table's limits: samples >= 0, penalty > 0)."""
    from harness.settings.options import Group, pytest_values

    try:
        pytest_values(config, Group.GEN)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture
def generation_request(request: pytest.FixtureRequest) -> "GenerationRequest":
    """What this run asks of generation parity: the ``gen_*`` settings (options, then config)."""
    from harness.judge.generation import GenerationRequest

    return GenerationRequest.from_settings(run_options(request.config).settings)
