"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

import pytest

from harness.config import PROVIDERS, Precision, RunOptions, Variant


@pytest.fixture(scope="session")
def small_options() -> RunOptions:
    return RunOptions(num_samples=16, batch_size=8)


@pytest.fixture(scope="session")
def workspace(small_options):
    from harness.workspace import Workspace

    return Workspace(small_options)


def variant(model: str, precision: str = "fp32", provider: str = "ort_cpu") -> Variant:
    return Variant(model, Precision(precision), PROVIDERS[provider])
