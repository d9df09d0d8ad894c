"""``--harness-shard K/N``: keep this shard's part of the collected matrix (harness.shard.plan)."""

from __future__ import annotations

import pytest

from harness.core import UsageError
from harness.report.junit import JUNIT_FILE, write_junit
from harness.report.summary import write_note_summary
from harness.results.store import RESULTS_FILE
from harness.session import RUN_DIR, asked_for, run_options, variant_of
from harness.shard.cost import case_cost
from harness.shard.plan import ShardSpec, assign, empty_shard, load_durations, write_shard_file


def _case(item: pytest.Item) -> str | None:
    """The case id a record gets (``test_x[variant]``); None for an item that writes no record
    (a suite's "no variant fits" placeholder): those stay in every shard, they only skip."""
    return item.name if any(k == "harness_case" for k, _ in item.user_properties) else None


@pytest.hookimpl(trylast=True)  # after harness.plugin has tagged the cases
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:

    if not asked_for(config):
        return
    given = run_options(config).given
    if not given.get("shard"):
        if given.get("shard_durations"):
            raise pytest.UsageError("--harness-shard-durations only balances a --harness-shard K/N run")
        return
    try:
        spec = ShardSpec.parse(given["shard"], "--harness-shard")
        source = given.get("shard_durations")
        durations = load_durations(source) if source else None
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    keys = [_case(item) for item in items]
    cases = [k for k in keys if k is not None]
    estimates = None if durations else _estimates(config, items, keys)
    mine = set(assign(cases, spec.count, durations, estimates)[0][spec.index - 1])
    keep = [item for item, key in zip(items, keys) if key is None or key in mine]
    dropped = [item for item, key in zip(items, keys) if key is not None and key not in mine]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep
    write_shard_file(config.stash[RUN_DIR], spec, cases, durations, str(source) if source else None, estimates)


def _estimates(config: pytest.Config, items: list[pytest.Item], keys: list[str | None]) -> dict[str, float]:
    """Case id -> estimated cost (``harness.shard.cost``), for a split without durations."""
    catalog = run_options(config).catalog
    sizes: dict[str, int] = {}
    exports: dict[str, float] = {}
    out: dict[str, float] = {}
    for item, key in zip(items, keys):
        variant = variant_of(item)
        if key is not None and variant is not None:
            test = getattr(item, "originalname", None) or item.name.split("[", 1)[0]
            out[key] = case_cost(test, variant, catalog, sizes, exports).weight
    return out


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """An empty shard (``harness.shard.plan.EmptyShard``) writes its empty ``results.jsonl``,
    summary and JUnit file, and exits 0 where pytest would say "no tests collected"."""
    out = session.config.stash.get(RUN_DIR, None)
    empty = empty_shard(out) if out is not None else None
    if out is None or empty is None:
        return
    results = out / RESULTS_FILE
    if results.is_file() and results.stat().st_size:  # records of an earlier run into this directory: kept
        return
    results.touch()
    write_note_summary(out, "EMPTY SHARD", empty.describe())
    write_junit(out / JUNIT_FILE, [])
    if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK
