"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

import os

import pytest
import torch

from harness.core import Precision, RunOptions, Settings, Variant
from harness.runners import PROVIDERS

# Two cores, often two xdist workers: one thread per process avoids oversubscription, which
# on this machine made torch an order of magnitude slower (numbers-en-zh decode: 11.3 s with
# 2 threads vs 0.84 s with 1). Numbers are identical; only speed changes.
torch.set_num_threads(int(os.environ.get("HARNESS_TEST_THREADS", "1")))


@pytest.fixture(scope="session")
def small_options() -> RunOptions:
    return RunOptions(settings=Settings(samples=16, batch_size=8, threads=1, inter_threads=1))


@pytest.fixture(scope="session")
def workspace(small_options):
    from harness.judge.workspace import Workspace

    return Workspace(small_options)


def variant(model: str, precision: str = "fp32", provider: str = "ort_cpu") -> Variant:
    return Variant(model, Precision(precision), PROVIDERS[provider])


#: test modules that take minutes on two cores (subprocess runs beside busy loops, whole scaffolded
#: workflows, pseudo-terminal runs, a crashing xdist worker): collected first, so pytest-xdist's load
#: scheduling starts them while the short tests fill the other worker (longest first), instead of one
#: worker running a 4-minute test alone at the end of CI
HEAVY_FIRST = ("test_under_load.py", "test_init_paired_gate.py", "test_progress_live.py", "test_native_crash.py",
               "test_docs_commands.py")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Whole modules keep their order and stay contiguous (module fixtures are set up once); the
    reordering is deterministic, so every xdist worker collects the same list."""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
