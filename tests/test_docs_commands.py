"""Every command a reader copies from README.md, docs/ and examples/ (issue 28 item 5).

Commands are extracted from fenced blocks (``bash``, ``sh``, ``shell``, ``console`` or no language)
and from the docstrings of ``examples/*.py``, so a command another change adds to the docs is
checked without touching this file. Each command is checked the way it can fail a newcomer:

- ``harness ...``: parsed by the real command-line parser (an option that does not exist, a value
  its type refuses, a missing argument: exit 2 there, a failure here); the ones that need no run
  directory, model or GPU (``RUN``: ``--help``, ``doctor``, ``cache info``, ``history`` on the
  sandbox store) are executed, in a sandbox directory with the shared test cache;
- ``pytest ...``: every ``--harness-*`` option exists in the option table, and list options are
  written the way pytest reads them (``--harness-precisions=fp32,int8``; ``fp32 int8`` after the
  option ends with ``file or directory not found: int8``);
- ``pip install ...``: the spec resolves without an index that has the package (the repository,
  a path or a wheel, or a URL/index the user sets), since ``model-harness`` is not on PyPI.

A command that needs a GPU (a CUDA/TensorRT provider or ``gpu_check``) is parsed but never run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from waiting import PATIENCE

ROOT = Path(__file__).resolve().parents[1]
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
PROGRAMS = ("harness", "pytest", "pip", "python")
GPU_WORDS = ("ort_cuda", "ort_trt", "trt_native", "tensorrt", "cuda", "gpu_check", "[gpu]")
_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)


@dataclass(frozen=True)
class Command:
    source: str  # file:line
    text: str

    @property
    def argv(self) -> list[str]:
        """The command's own words: a leading ``VAR=value``, what follows ``|``/``&&``/``;``
        and shell variables (``"$out"`` -> a placeholder path) are dealt with here."""
        text = re.sub(r"\$\{?(\w+)\}?", r"reports/\1", self.text)
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>()")
        lexer.whitespace_split = True
        words = []
        for word in lexer:  # the first command of a pipeline or list; comments and redirections end it
            if word and word[0] in ";&|<>()" or word.startswith("#"):
                break
            words.append(word)
        while words and re.match(r"^\w+=", words[0]):
            words = words[1:]
        if words[:1] == ["python"] and words[1:3] == ["-m", "pip"]:
            words = ["pip", *words[3:]]
        return words

    @property
    def program(self) -> str:
        return self.argv[0] if self.argv else ""

    @property
    def needs_gpu(self) -> bool:
        return any(word in self.text.lower() for word in GPU_WORDS)


def _commands_in(lines: list[str], source: str, first_line: int) -> list[Command]:
    out: list[Command] = []
    pending = ""
    start = 0
    for offset, raw in enumerate(lines):
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        if not pending:
            start = offset
        pending = f"{pending} {line}".strip() if pending else line
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        command, pending = pending, ""
        if not command or command.startswith("#"):
            continue
        try:
            words = Command(source, command).argv
        except ValueError:  # not shell syntax (output shown in a console block)
            continue
        if not words or words[0] not in PROGRAMS:
            continue
        if len(words) > 1 and words[1].endswith(":") or "[--" in command:
            continue  # output (`harness init: wrote ...`) or a usage synopsis (`[--provider P]`)
        out.append(Command(f"{source}:{first_line + start}", command))
    return out


def extract(path: Path) -> list[Command]:
    """The commands of one Markdown file, or of an example module's docstring."""
    text = path.read_text(encoding="utf-8")
    rel = str(path.relative_to(ROOT))
    if path.suffix == ".py":
        import ast

        doc = ast.get_docstring(ast.parse(text)) or ""
        return _commands_in(doc.splitlines(), rel, 2)
    found: list[Command] = []
    for block in _FENCE.finditer(text):
        if block["lang"].lower() not in SHELL_LANGS:
            continue
        line = text.count("\n", 0, block.start("body")) + 1
        found += _commands_in(block["body"].splitlines(), rel, line)
    return found


def documented_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").glob("*.py"))]


COMMANDS = [c for path in documented_files() for c in extract(path)]


def _ids(commands: list[Command]) -> list[str]:
    return [f"{c.source} {c.text[:60]}" for c in commands]


def test_the_docs_have_commands_to_check() -> None:
    by_program = {p: sum(c.program == p for c in COMMANDS) for p in PROGRAMS}
    assert by_program["harness"] >= 50 and by_program["pytest"] >= 5, by_program
    assert any(c.source.startswith("examples/") for c in COMMANDS)


HARNESS = [c for c in COMMANDS if c.program == "harness"]


@pytest.mark.parametrize("command", HARNESS, ids=_ids(HARNESS))
def test_harness_command_parses(command: Command, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import build_parser

    argv = command.argv[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):
            pytest.fail(f"{command.source}: `{command.text}` is refused by the parser: "
                        f"{capsys.readouterr().err.strip().splitlines()[-1]}")


PYTEST = [c for c in COMMANDS if c.program == "pytest"]


def _pytest_options() -> dict[str, object]:
    from harness.settings.options import OPTIONS

    return {o.pytest_flag: o for o in OPTIONS if o.on_cli}


@pytest.mark.parametrize("command", PYTEST, ids=_ids(PYTEST))
def test_pytest_command_uses_options_pytest_reads(command: Command) -> None:
    from harness.settings.options import Kind

    known = _pytest_options()
    words = command.argv
    for i, word in enumerate(words):
        if not word.startswith("--harness-"):
            continue
        flag, eq, value = word.partition("=")
        option = known.get(flag)
        if option is None and flag.startswith("--harness-"):
            from harness.plugins import discover  # feature plugins add options of their own

            plugin_flags = {f for f in _plugin_flags(discover())}
            assert flag in plugin_flags, f"{command.source}: {flag} is not a pytest option of the harness"
            continue
        kind = getattr(option, "kind", None)
        if kind in (Kind.LIST, Kind.INT_LIST) and not eq:
            rest = words[i + 2:i + 3]
            assert not rest or rest[0].startswith("-") or _looks_like_path(rest[0]), (
                f"{command.source}: `{flag} {value or words[i + 1]} {rest[0]}` — pytest reads one value per option: "
                f"write {flag}={','.join([words[i + 1], rest[0]])}")


def _looks_like_path(word: str) -> bool:
    return "/" in word or word.endswith(".py") or (ROOT / word).exists()


def _plugin_flags(modules: list[str]) -> set[str]:
    import importlib

    flags: set[str] = set()

    class Collect:
        def addoption(self, *names: str, **_: object) -> None:
            flags.update(names)

        def getgroup(self, *_: object, **__: object) -> Collect:
            return self

        def addini(self, *_: object, **__: object) -> None:
            pass

    for name in modules:
        hook = getattr(importlib.import_module(name), "pytest_addoption", None)
        if hook is not None:
            hook(Collect())
    return flags


PIP = [c for c in COMMANDS if c.program == "pip" and "install" in c.argv]
#: what pip can install this project from without it being on an index
_RESOLVES = re.compile(r"^(-e|--editable|\.|\./|/|[\w./-]+\.whl$|\.\[|[\w-]+ ?@ |git\+|https?://|-r$|--index-url|"
                       r"--extra-index-url|-i$|--no-index|--find-links|-f$)")


@pytest.mark.parametrize("command", PIP, ids=_ids(PIP))
def test_pip_install_lines_resolve(command: Command) -> None:
    words = command.argv[command.argv.index("install") + 1:]
    if any(w.startswith(("--index-url", "--extra-index-url", "-i", "--find-links", "-f", "--no-index")) for w in words):
        return  # the user names where the package comes from
    for word in (w for w in words if not w.startswith("-")):
        if re.match(r"^model-harness(\[|$|[<>=])", word):
            pytest.fail(f"{command.source}: `pip install {word}` cannot resolve: model-harness is not on a package "
                        "index; install from the repository (pip install .), a wheel path, or an index URL you set")


#: subcommands run for real: they need no run directory, model, GPU or network
RUN = ("--help", "doctor", "cache info", "history list", "history show", "history changes", "init --help")


def _runnable(command: Command) -> bool:
    if command.program != "harness" or command.needs_gpu:
        return False
    words = " ".join(command.argv[1:])
    return words.endswith("--help") or any(words.startswith(prefix) for prefix in RUN[1:])


RUNNABLE = [c for c in HARNESS if _runnable(c)]


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory whose ``reports/history.sqlite`` holds the four nights of test_trends."""
    from test_trends import P50, night

    from harness.results import history

    root = tmp_path_factory.mktemp("docs-sandbox")
    for n in P50:
        history.ingest(night(root / "nights", n), root / "reports" / "history.sqlite")
    return root


@pytest.mark.parametrize("command", RUNNABLE, ids=_ids(RUNNABLE))
def test_runnable_command_succeeds(command: Command, sandbox: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    monkeypatch.chdir(sandbox)
    monkeypatch.setenv("COLUMNS", "200")
    try:
        code = main(command.argv[1:])
    except SystemExit as exc:  # --help
        code = int(exc.code or 0)
    assert code == 0, f"{command.source}: `{command.text}` exited {code}: {capsys.readouterr().err.strip()[-300:]}"


def test_last_failed_through_harness_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`harness run --pytest-args --lf` reruns only what failed (was refused: the cache plugin was off)."""
    import subprocess
    import sys

    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_team.py").write_text("def test_ok():\n    pass\n\n\ndef test_broken():\n    assert False\n")

    def run(*extra: str) -> str:
        done = subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; entrypoint()",
                               "run", "--suites", str(suites), "--out",
                               str(tmp_path / "out"), *extra], cwd=tmp_path, capture_output=True, text=True,
                              timeout=PATIENCE)
        return done.stdout + done.stderr
    first = run()
    assert "1 failed, 1 passed" in first, first
    again = run("--pytest-args", "--lf")
    assert "1 failed in" in again and " passed" not in again, again  # test_ok was not run again
    assert (tmp_path / ".pytest_cache").is_dir()
