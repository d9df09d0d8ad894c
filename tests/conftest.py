"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterator

import pytest
import torch

from harness.core import Precision, RunOptions, Settings, Variant
from harness.runners import PROVIDERS
from tests.scheduling import SharedSetupScheduling, setup_unit
from tests.serving import mlserver as ms

if TYPE_CHECKING:
    from xdist.remote import Producer

# Two cores, often two xdist workers: one thread per process avoids oversubscription, which
# on this machine made torch an order of magnitude slower (numbers-en-zh decode: 11.3 s with
# 2 threads vs 0.84 s with 1). Numbers are identical; only speed changes.
torch.set_num_threads(int(os.environ.get("HARNESS_TEST_THREADS", "1")))

# PYTEST_ADDOPTS is this session's (pytest read it before loading this file), never the runs the tests
# start: a nested `harness run` or `pytest` that inherited `--random-order` shuffled the cases an
# interrupt test orders on purpose (quick ones first, then one that hangs) and waited forever.
os.environ.pop("PYTEST_ADDOPTS", None)


@pytest.fixture(scope="session")
def small_options() -> RunOptions:
    return RunOptions(settings=Settings(samples=16, batch_size=8, threads=1, inter_threads=1))


@pytest.fixture(scope="session")
def workspace(small_options):
    from harness.judge.workspace import Workspace

    return Workspace(small_options)


@pytest.fixture(scope="session")
def mlserver_bert(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ms.Server]:
    """A real MLServer serving bert-tiny's FP32 export (the harness's own build) as ``bert``, plain (no
    adaptive batching, no faults): one server for every module that judges that served model. The modules
    using it are one unit of work (tests/scheduling.py), so their tests run on the worker that started
    it. Skips (fails under ``HARNESS_REQUIRE_MLSERVER=1``) without MLServer."""
    from tests.serving.faults import bert_tiny_fp32

    server = ms.start_or_skip(tmp_path_factory.mktemp("mlserver-bert"), [ms.ServedFile("bert", bert_tiny_fp32())])
    yield server
    server.stop()


def variant(model: str, precision: str = "fp32", provider: str = "ort_cpu") -> Variant:
    return Variant(model, Precision(precision), PROVIDERS[provider])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> SharedSetupScheduling | None:
    """``-n N`` (xdist's ``load``) schedules by shared set-up (tests/scheduling.py): a module's
    module-scoped fixtures, and conftest's shared servers, set up on one worker, once."""
    return SharedSetupScheduling(config, log) if config.option.dist == "load" else None


#: test modules that take minutes on two cores (subprocess runs beside busy loops, whole scaffolded
#: workflows, pseudo-terminal runs, a crashing xdist worker): handed out first, so they run while the
#: short tests fill the other worker, instead of one worker running a 4-minute test alone at the end
HEAVY_FIRST = ("test_under_load.py", "test_init_paired_gate.py", "test_progress_live.py", "test_native_crash.py",
               "test_docs_commands.py")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """HEAVY_FIRST's modules first, then the modules run as one unit (tests/scheduling.py: the long
    units), then the rest, each in collection order; deterministic, so every xdist worker collects
    the same list."""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}

    def order(item: pytest.Item) -> int:
        if item.path.name in rank:
            return rank[item.path.name]
        return len(rank) if setup_unit(str(item.path)) is not None else len(rank) + 1

    items.sort(key=order)
