"""Every command's options come from the one table: each parser is derived from its rows (a walk
of every command's parser and ``--help`` finds no option declared outside it), a renamed spelling
still works for one release and says what to change, every command suggests the nearest option
for a typo, the table's ranges hold on every command, and a message names an option as the
command that parsed it."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.cli import build_parser, main
from harness.settings.commands import TABLE, add_command_options, check_limits, commands, renamed, takes

ROOT = Path(__file__).resolve().parents[1]

#: what each command needs to parse (its positionals and required options), nothing more
MINIMAL: dict[str, list[str]] = {
    "compare": ["a", "b"], "baseline save": ["--name", "b"], "baseline compare": ["r", "--name", "b"],
    "baseline env": ["--name", "b"], "history add": ["r"], "bisect": ["--models", "m", "--precisions", "int8"],
    "repro": ["bundle"], "report": ["r"], "calibrate": ["r"], "merge": ["r"], "perf-compare": ["a.onnx"],
}


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for word in command.split():
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def _every_command(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    """Every command path with options of its own (``run``, ``baseline compare``), by walking the parsers."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                path = f"{prefix} {name}".strip()
                nested = any(isinstance(a, argparse._SubParsersAction) for a in child._actions)
                out += _every_command(child, path) if nested else [path]
    return out


def undeclared(parser: argparse.ArgumentParser, command: str) -> list[str]:
    """The options of ``parser`` that are not the table's rows for ``command`` (or the table's rows
    it lacks), from the parser's actions and from its ``--help`` usage."""
    rows = {o.flag: o.name for o, _ in takes(command)}
    aliases = {u.was: o.name for o, u in takes(command) if u.was}
    problems = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        for flag in action.option_strings:
            if rows.get(flag, aliases.get(flag)) != action.dest:
                problems.append(f"{flag} (dest {action.dest})")
    usage = parser.format_usage()
    shown = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", usage)) - {"-h"}
    problems += sorted(f"{flag} in --help" for flag in shown - set(rows))
    problems += sorted(f"{flag} missing" for flag in set(rows) - shown)
    return problems


def test_every_parser_and_help_is_derived_from_the_table(parser: argparse.ArgumentParser) -> None:
    walked = _every_command(parser)
    assert sorted(c for c in walked if takes(c)) == sorted(commands()), "a command without table rows"
    for command in walked:
        assert undeclared(_command_parser(parser, command), command) == [], command
    # the generated page lists every command's options (render_metric_docs --check holds it current)
    page = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    assert all(f"### `harness {c}`" in page for c in commands()[1:])


def test_the_walk_finds_a_hand_written_option() -> None:
    """Negative control: an option added beside the table's, or a row left out, is reported."""
    extra = argparse.ArgumentParser(prog="x")
    add_command_options(extra, "merge")
    extra.add_argument("--verbose", action="store_true")
    assert undeclared(extra, "merge") == ["--verbose (dest verbose)", "--verbose in --help"]
    lacking = argparse.ArgumentParser(prog="x")
    lacking.add_argument("--out")
    assert "--force missing" in undeclared(lacking, "merge")


def _sample(name: str) -> list[str]:
    o = TABLE[name]
    return {"flag": [], "int": ["3"], "pairs": ["p50=8%"], "path": ["/tmp/x"]}.get(
        o.kind.value, ["int8" if name == "precisions" else "ort_cpu" if name == "providers" else "x"])


@pytest.mark.parametrize("change", renamed(), ids=lambda r: f"{r.command}:{r.old}")
def test_a_renamed_spelling_still_works_and_names_the_new_one(change, parser, capsys) -> None:
    """A CI script with the old spelling keeps working (same value) and its log says what to change."""
    name = next(o.name for o, u in takes(change.command) if u.was == change.old)
    minimal = MINIMAL.get(change.command, [])
    argv = [w for i, w in enumerate(minimal) if change.new not in (w, minimal[i - 1] if i else "")]  # and its value
    value = _sample(name)
    new = parser.parse_args([*change.command.split(), *argv, change.new, *value])
    assert capsys.readouterr().err == ""
    old = parser.parse_args([*change.command.split(), *argv, change.old, *value])
    err = capsys.readouterr().err
    assert getattr(old, name) == getattr(new, name) not in (None, False)
    assert err.count("\n") == 1 and f"{change.old} is deprecated" in err and f"use {change.new}" in err
    help_text = _command_parser(parser, change.command).format_help()
    assert not re.search(re.escape(change.old) + r"(?![\w-])", help_text)  # hidden from --help


def _typo(flag: str) -> str:
    """``--models`` -> ``--mdoels``: two different letters swapped (never a prefix argparse would accept)."""
    i = next(i for i in range(3, len(flag) - 1) if flag[i] != flag[i + 1] and (flag[i] + flag[i + 1]).isalpha())
    return flag[:i] + flag[i + 1] + flag[i] + flag[i + 2:]


@pytest.mark.parametrize("command", commands())
def test_every_command_suggests_its_nearest_option(command: str, parser, capsys) -> None:
    flag = max((o.flag for o, _ in takes(command) if o.flag.startswith("--")), key=len)
    with pytest.raises(SystemExit) as refused:  # what main() returns as the exit code
        parser.parse_args([*command.split(), *MINIMAL.get(command, []), _typo(flag), "1"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{_typo(flag)}: unknown option (did you mean '{flag}'?)" in err, err


def test_the_tables_ranges_hold_on_every_command(parser, capsys) -> None:
    assert main(["perf-compare", "a.onnx", "--pairs", "0"]) == 2
    assert capsys.readouterr().err.strip() == "harness: error: --pairs: must be >= 1, got 0"
    check_limits(parser.parse_args(["perf-compare", "a.onnx", "--pairs", "1"]))  # negative control: in range
    assert main(["check", "--request-timeout", "0"]) == 2
    assert "--request-timeout: must be > 0, got 0" in capsys.readouterr().err


def test_a_message_names_the_option_as_the_command_that_parsed_it() -> None:
    """``harness run`` hands its command with the options (and to each xdist worker): a skip reason
    names ``--perf`` to its user; a plain pytest session's user reads ``--harness-perf``."""
    from harness.core import RunOptions
    from harness.plugins.perf import skip_reason
    from harness.session import OPTIONS

    handed = SimpleNamespace(stash=pytest.Stash())
    handed.stash[OPTIONS] = RunOptions(command="run")
    worker = SimpleNamespace(stash=pytest.Stash(), workerinput={"harness_command": "run"})
    plain = SimpleNamespace(stash=pytest.Stash())
    assert skip_reason(handed).endswith("(use --perf)")  # type: ignore[arg-type]
    assert skip_reason(worker).endswith("(use --perf)")  # type: ignore[arg-type]
    assert skip_reason(plain).endswith("(use --harness-perf)")  # type: ignore[arg-type]


def test_a_command_line_builds_only_the_command_it_names() -> None:
    """``harness check ...`` imports the check command's module, not every command's (the history
    store's, the gate's, the HTML report's: 0.2-0.3 s of every check); the parser it builds for
    that command is the one the full parser holds, and a name that is no command is refused
    against every command."""
    import subprocess
    import sys

    probe = ("import sys; from harness.cli import build_parser; build_parser(['check', '--onnx', 'x']); "
             "print(' '.join(sorted(m for m in sys.modules if m.startswith('harness.cli.'))))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    commands = [m for m in loaded.stdout.split() if not m.rpartition(".")[2].startswith("_")]
    assert commands == ["harness.cli.check"], loaded.stdout  # the command's module, no other command's
    full = _command_parser(build_parser(), "check")
    alone = _command_parser(build_parser(["check", "--onnx", "x"]), "check")
    assert [a.option_strings for a in alone._actions] == [a.option_strings for a in full._actions]
    assert build_parser(["--version"])._subparsers is not None
    for argv in (["suite-imports"], ["chek"]):
        sub = next(a for a in build_parser(argv)._actions if isinstance(a, argparse._SubParsersAction))
        assert {"check", "run", "history"} <= set(sub.choices), argv


@pytest.mark.parametrize(("argv", "said"), [
    (["chek"], "harness: error: 'chek': unknown command (did you mean 'check'?); nearest valid: check"),
    (["history", "shwo"], "harness: error: 'shwo': unknown command (did you mean 'show'?); valid: add, show"),
    (["init", "x", "--ci", "gitlab"],
     "harness: error: --ci: invalid choice 'gitlab' (did you mean 'github'?); valid: github, none"),
])
def test_a_refused_choice_names_the_nearest_and_the_valid_ones(argv: list[str], said: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped command or choice reads like every other refusal: what was given, the nearest
    name, the valid ones; argparse printed ``argument COMMAND: invalid choice: 'chek' (choose
    from 'baseline', 'bench', ...)`` with every command and no suggestion. One line, exit 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(said) and err.count("\n") == 1, err
