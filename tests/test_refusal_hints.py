"""What a user reads when they mistype or look back: a did-you-mean on every command's options,
refusals cut to the nearest candidates, history values in their units, and a README whose model
table names every model its commands use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from report_fixture import make_history

from harness.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_an_option_like_nothing_is_still_unrecognized(capsys: pytest.CaptureFixture[str]) -> None:
    """The negative control of the did-you-mean on every command (tests/test_command_options.py):
    no invented suggestion."""
    assert main(["run", "--zzzzzzzz"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --zzzzzzzz" in err and "did you mean" not in err


def test_a_config_key_typo_is_one_short_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "harness.toml").write_text('[run]\nmodles = ["bert-tiny"]\n')
    monkeypatch.chdir(tmp_path)
    assert main(["run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "run.modles: unknown key (did you mean 'models'?); nearest valid: models," in err
    message = err.split("harness.toml: ", 1)[1]
    assert re.search(r"\(\+\d+ more\)$", message) and len(message) < 200, message  # was ~580: every key


def test_history_show_writes_values_in_their_units(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = make_history(tmp_path)
    assert main(["history", "show", "--history-db", str(db), "--variant", "bert-fp32-ort_cpu",
                 "--metric", "perf:latency_ms.p50"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"1\.08 ms", out) and re.search(r"1\.404 ms|1\.4 ms", out), out


def test_readme_model_table_lists_every_model_its_commands_use() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `([\w.-]+)` \|", readme, flags=re.M))
    used = set()
    for command in re.findall(r"harness [^\n]*?--models ([^\n]+)", readme):
        for word in command.split():
            if word.startswith("-") or "/" in word:
                break
            used.add(word.strip("\"'`"))
    assert used and used <= table, sorted(used - table)
