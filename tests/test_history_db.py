"""Every command that reads or writes the history resolves its database the same way, in
``harness.core.rundirs.history_db``: the one given, else ``$HARNESS_HISTORY_DB``, else
``reports/history.sqlite``. ``baseline save --history-db`` once defaulted to the path alone, so a CI
job that set the variable for ``harness history add`` saved its baseline from a database that did
not exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.core.rundirs import HISTORY_DB, HISTORY_DB_ENV, history_db
from harness.results import history
from tests.test_history import night


def test_the_given_database_wins_then_the_variable_then_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HISTORY_DB_ENV, raising=False)
    assert history_db() == str(HISTORY_DB) == history.default_db()
    monkeypatch.setenv(HISTORY_DB_ENV, "")  # set but empty: unset
    assert history_db() == str(HISTORY_DB)
    monkeypatch.setenv(HISTORY_DB_ENV, "/ci/history.sqlite")
    assert history_db() == "/ci/history.sqlite" == history.default_db()
    assert history_db("given.sqlite") == "given.sqlite"


def test_history_and_baseline_commands_read_the_variables_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "team" / "history.sqlite"
    runs = [night(tmp_path, n) for n in (1, 2)]
    monkeypatch.chdir(tmp_path)  # no reports/history.sqlite here: only the variable names a store
    monkeypatch.setenv(HISTORY_DB_ENV, str(db))
    assert main(["history", "add", *map(str, runs)]) == 0
    assert db.is_file() and not (tmp_path / HISTORY_DB).exists()
    assert main(["history", "list"]) == 0 and "night2" in capsys.readouterr().out
    store = tmp_path / "baselines"
    assert main(["baseline", "save", "--history-last", "2", "--name", "nightly", "--baseline-store", str(store)]) == 0
    assert (store / "nightly").is_dir()
    assert history.runs()["run_id"].tolist() == ["night1", "night2"]  # the functions' default too
    # an explicit option still wins over the variable
    assert main(["baseline", "save", "--history-last", "1", "--name", "other", "--baseline-store", str(store),
                 "--history-db", str(tmp_path / "absent.sqlite")]) == 2
    assert "absent.sqlite" in capsys.readouterr().err
