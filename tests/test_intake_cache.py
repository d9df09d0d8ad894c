"""A user's model directory is checked at intake once per content: a rerun that replays every case
imports neither transformers nor torch for it; any edit checks again; a refusal is never kept."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness.core import UsageError
from harness.core.admission import Limits
from harness.settings.intake import checked_intake
from harness.zoo.base import ModelCatalog, spec_for_directory

TRANSLATOR = Path(ModelCatalog().resolve("numbers-en-zh").path or "")


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    directory = tmp_path / "translator"
    shutil.copytree(TRANSLATOR, directory)
    return directory


def test_a_passed_intake_is_not_redone_until_the_directory_or_the_limits_change(user_dir: Path) -> None:
    spec = spec_for_directory(user_dir)
    assert checked_intake(spec, Limits()) is True  # first run: checked
    assert checked_intake(spec, Limits()) is False  # same content, same limits: the kept pass
    assert checked_intake(spec, Limits(batch=Limits.batch + 1)) is True  # the run's limits take part
    config = user_dir / "config.json"
    stat = config.stat()
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # an edit, however small
    assert checked_intake(spec, Limits()) is True
    assert checked_intake(spec, Limits()) is False


def test_a_refused_directory_is_refused_on_every_run(user_dir: Path) -> None:
    spec = spec_for_directory(user_dir)
    assert checked_intake(spec, Limits()) is True
    for name in os.listdir(user_dir):  # the tokenizer taken away after a pass was kept
        if name.startswith(("tokenizer", "special_tokens")):
            os.remove(user_dir / name)
    for _ in range(2):  # the kept pass was of other files; and nothing of a failed check is kept
        with pytest.raises(UsageError, match="tokenizer"):
            checked_intake(spec, Limits())
