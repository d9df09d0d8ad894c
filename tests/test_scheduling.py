"""The suite's xdist scheduling (tests/scheduling.py): which tests share a unit of work.

A module whose fixture is set up once per module runs whole on one worker; the modules that use a
shared session server are one unit together; any other test is a unit of its own (negative control:
a module without such a fixture is not grouped, so its tests still spread over the workers)."""

from __future__ import annotations

from pathlib import Path

from scheduling import SHARED_SESSION_FIXTURES, SharedSetupScheduling, setup_unit

TESTS = Path(__file__).resolve().parent


def test_modules_are_grouped_by_the_set_up_they_share(tmp_path: Path) -> None:
    module_scoped = tmp_path / "test_a.py"
    module_scoped.write_text('@pytest.fixture(scope="module")\ndef built():\n    return 1\n')
    session_only = tmp_path / "test_b.py"
    session_only.write_text('@pytest.fixture(scope="session")\ndef built():\n    return 1\n')
    assert setup_unit(str(module_scoped)) == str(module_scoped)
    assert setup_unit(str(session_only)) is None  # negative control: its tests stay units of their own
    assert setup_unit(str(tmp_path / "test_gone.py")) is None
    # the two modules judging the served bert share conftest's server: one unit for both
    shared = {setup_unit(str(TESTS / name)) for name in ("test_case_engine.py", "test_serving_rate.py")}
    assert shared == {"mlserver_bert"} and "mlserver_bert" in SHARED_SESSION_FIXTURES
    assert setup_unit(str(TESTS / "test_serving.py")) == str(TESTS / "test_serving.py")  # its own MLServer
    assert setup_unit(str(TESTS / "test_scheduling.py")) is None  # no module fixture here


def test_the_scheduler_splits_node_ids_into_those_units() -> None:
    scheduler = object.__new__(SharedSetupScheduling)  # only the scope rule, no xdist session
    scheduler.root = TESTS.parent
    assert scheduler._split_scope("tests/test_serving.py::test_x[a::b]") == str(TESTS / "test_serving.py")
    assert scheduler._split_scope("tests/test_serving_rate.py::test_y") == "mlserver_bert"
    alone = "tests/test_scheduling.py::test_the_scheduler_splits_node_ids_into_those_units"
    assert scheduler._split_scope(alone) == alone
