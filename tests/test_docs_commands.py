"""Every command a reader copies from README.md, docs/ and examples/ (issue 28 item 5).

Commands are extracted from fenced blocks (``bash``, ``sh``, ``shell``, ``console`` or no language;
in a block with ``$ `` prompts only the prompted lines) and from the docstrings of
``examples/*.py``, so a command another change adds to the docs is checked without touching
this file. Each command is checked the way it can fail a newcomer:

- it **runs** (``test_document_commands_run``, one test per document so ``-n 2`` spreads them):
  in document order, in one sandbox directory per document, with the session's warm cache,
  on the premise the document takes as given (tests/docs_run.py: the reader's model is
  bert-tiny's directory, their earlier runs one tiny run); it must exit as the document shows
  (``[exit N]``, ``(exit N)``, ``# exit N:``, a ``harness: error:`` line below it: 2; else 0).
  What cannot run here is listed in ``docs_run.NOT_RUN`` (or named by a GPU word) with its
  precise reason and what it needs (``docs_run.Needs``: a GPU, a package index, ...; never its
  cost); a new command runs by default, a stale entry fails, and the
  counts found / run / not run by need are asserted. ``pytest`` commands run in this process
  like ``harness`` ones (the stack imported once), the perf and generation suites narrowed to
  fewer samples through ``PYTEST_ADDOPTS`` (``docs_run.NARROWING``: the printed command line);
  ``pip install`` into a throwaway environment that sees this one's packages, from a copy of the
  checkout (tests/docs_installs.py); a benchmark as its smoke run, ``HARNESS_BENCH_SMOKE=1``
  (tests/docs_measure.py, ``harness.perf.smoke``); ``pytest tests -n 2`` is the suite CI runs.
  A command that names a server or an environment (an inference server on 127.0.0.1:8000/8001,
  a team's PostgreSQL, two onnxruntime virtualenvs) runs against real ones (tests/docs_services.py:
  MLServer, PostgreSQL, virtualenvs), the documented address mapped to the real one;
- ``harness ...``: parsed by the real command-line parser (an option that does not exist, a value
  its type refuses, a missing argument: exit 2 there, a failure here);
- ``pytest ...``: every ``--harness-*`` option exists in the option table, and list options are
  written the way pytest reads them (``--harness-precisions=fp32,int8``; ``fp32 int8`` gets a
  one-line error naming that spelling, see the last test);
- ``pip install ...``: the spec resolves without an index that has the package (the repository,
  a path or a wheel, or a URL/index the user sets), since ``model-harness`` is not on PyPI.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import docs_exports
import docs_installs
import docs_measure
import docs_run
import docs_services
import pytest
from docs_run import expected_exit
from waiting import PATIENCE

ROOT = Path(__file__).resolve().parents[1]
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
PROGRAMS = ("harness", "pytest", "pip", "python", "cp", "mkdir")
GPU_WORDS = ("ort_cuda", "ort_trt", "trt_native", "tensorrt", "cuda", "gpu_check", "[gpu]")
_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)


@dataclass(frozen=True)
class Command:
    source: str  # file:line
    text: str
    expect: int = 0  # the exit status the document shows for it (docs_run.expected_exit)

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
    prompted = any(raw.strip().startswith("$ ") for raw in lines)  # then the other lines are output
    for offset, raw in enumerate(lines):
        line = raw.strip()
        if line.startswith("$ "):
            line = line[2:]
        elif prompted and not pending:
            continue
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
            continue  # output (`harness init: wrote ...`) or a usage synopsis (`[--providers P]`)
        out.append(Command(f"{source}:{first_line + start}", command, expected_exit(lines, offset)))
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
            from harness.plugin import pytest_plugins  # feature plugins add options of their own

            plugin_flags = {f for f in _plugin_flags(pytest_plugins)}
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


# --- every command that needs no GPU runs, document by document -----------------------------------
def _steps_by_document() -> dict[str, list[docs_run.Step]]:
    found: dict[str, list[docs_run.Step]] = {}
    for command in COMMANDS:
        document = command.source.rsplit(":", 1)[0]
        found.setdefault(document, []).extend(docs_run.steps_of(command.source, command.text, command.expect))
    return found


STEPS = _steps_by_document()


def test_every_command_is_run_or_has_a_reason() -> None:
    """A NOT_RUN entry names a command that exists (the list cannot go stale); what is left runs."""
    texts = {text for steps in STEPS.values() for step in steps
             for text in (step.text, f"{step.source.rsplit(':', 1)[0]}: {step.text}")}
    stale = {key for key in docs_run.NOT_RUN
             if key not in texts and not (key.endswith(" ...") and any(t.startswith(key[:-4]) for t in texts))}
    assert not stale, f"NOT_RUN names commands no document has: {stale}"
    assert not set(docs_run.MACHINE_DEPENDENT) - texts
    assert all(s.program in PROGRAMS for steps in STEPS.values() for s in steps)


#: what the documents hold today (README.md, docs/, examples/): a change to the docs changes these
#: counts on purpose; a command that stops running (or a new one that does not run) fails here
FOUND, RUN_HERE = 175, 170
NOT_RUN_BY_NEED = {"GPU": 2, "SUITE": 3}


def test_every_command_that_needs_no_gpu_runs() -> None:
    """Every command is run unless it needs what this machine does not have (docs_run.Needs: a
    GPU, a package index, a service the example names, ...); none is skipped for its cost."""
    steps = [s for found in STEPS.values() for s in found]
    skipped = {s: s.not_run() for s in steps}
    by_need: dict[str, int] = {}
    for why in skipped.values():
        if why is not None:
            by_need[why[0].name] = by_need.get(why[0].name, 0) + 1
    run = [s for s, why in skipped.items() if why is None]
    assert not [w for w in skipped.values() if w and "budget" in w[1].lower()], "a command skipped for its cost"
    needs_no_gpu = [s for s, why in skipped.items() if why is None or why[0] is not docs_run.Needs.GPU]
    assert (len(steps), len(run), by_need) == (FOUND, RUN_HERE, NOT_RUN_BY_NEED), (
        f"{len(steps)} commands found, {len(run)} run here, not run: {by_need}")
    print(f"{len(steps)} commands, {len(needs_no_gpu)} need no GPU, {len(run)} run here, "
          f"{by_need.get('SUITE', 0)} run by CI (the suite); not run: {by_need}")


def test_the_suite_commands_are_what_ci_and_the_load_check_run() -> None:
    """``pytest tests -n 2`` (README.md) is the suite this test is part of: it cannot run inside
    itself, and it is run -- by CI, whose .ci/run runs exactly that command line. The load check
    beside it runs the same suite (``tests -n 2`` after its ``--``) through
    scripts/tests_under_load.py, the script tests/test_under_load.py runs."""
    suite = sorted({s.text for steps in STEPS.values() for s in steps
                    if s.not_run() and s.not_run()[0] is docs_run.Needs.SUITE})
    ci, under_load = "pytest tests -n 2", "python scripts/tests_under_load.py --burners 4 -- tests -n 2 --random-order"
    assert suite == sorted([ci, under_load]), suite
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert ci in [line for line in lines if line and not line.startswith("#")], (
        f".ci/run does not run `{ci}`, the README's test command")
    assert under_load.split(" -- ")[1].startswith(ci.removeprefix("pytest ")), "the load check runs another suite"
    assert "tests_under_load.py" in (ROOT / "tests" / "test_under_load.py").read_text()


@pytest.fixture(scope="module")
def premise(tmp_path_factory: pytest.TempPathFactory) -> docs_run.Premise:
    """What the documents take as given: a model of the reader's (bert-tiny's HF directory), an
    ONNX file exported from it, a run directory (bert-tiny FP32 + INT8 on ORT; no timings: the perf
    suite is over this test's budget) and a history database (the four nights of test_trends, timed)."""
    from test_check import _bert_onnx
    from test_trends import P50, night

    from harness.cli import main
    from harness.results import history
    from harness.zoo.base import materialize, resolve

    root = tmp_path_factory.mktemp("docs-premise")
    run = root / "run"
    code = main(["run", "--models", "bert-tiny", "--precisions", "fp32", "int8", "--providers", "ort_cpu",
                 "--samples", "8", "--out", str(run), "--pytest-args", "-p", "no:cacheprovider", "-q"])
    assert code == 0, f"the premise run failed ({code})"
    for n in P50:
        history.ingest(night(root / "nights", n), root / "history.sqlite")
    # the harness's own exports this run used (same I/O names at both precisions), read from its
    # records: the shared cache holds other bert-tiny INT8 artifacts too (static, forced external
    # data by test_external_data) and a glob picked one whose weights live in a second file
    built: dict[str, list[Path]] = {"fp32": [], "int8": []}
    for line in (run / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        precision = record["id"].split("bert-tiny-", 1)[-1].split("-", 1)[0]
        artifact = (record.get("artifacts") or {}).get("model/model.onnx") or {}
        if precision in built and artifact.get("path"):
            built[precision].append(Path(artifact["path"]))
    assert all(built.values()), f"the premise run recorded no bert-tiny artifacts: {built}"
    assert all(not p.with_name(p.name + ".data").exists() for paths in built.values() for p in paths)
    return docs_run.Premise(model=materialize(resolve("bert-tiny")), translator=materialize(resolve("numbers-en-zh")),
                            onnx=_bert_onnx(root / "model.onnx"),
                            fp32=built["fp32"][-1], int8=built["int8"][-1], run=run, history=root / "history.sqlite",
                            nights=[root / "nights" / f"nightly-{n}" for n in sorted(P50)])


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[docs_services.Services]:
    """The servers and environments the documents' commands name, each started when a command
    first needs it (MLServer once per test process), stopped at the session's end."""
    found = docs_services.Services(tmp_path_factory.mktemp("docs-services"))
    yield found
    found.close()


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> docs_exports.Builds:
    """The reader's own exports docs/check.md and docs/runtime.md judge (tests/docs_exports.py),
    built on a document's first need."""
    return docs_exports.Builds(tmp_path_factory.mktemp("docs-exports"))


def _execute(step: docs_run.Step, steps: list[docs_run.Step], cwd: Path, monkeypatch: pytest.MonkeyPatch,
             services: docs_services.Services) -> int:
    """Run one step in ``cwd`` the way a shell there would (``harness`` and the scripts in-process:
    the stack is imported once per test process; an install and the command after it on its line
    in the document's throwaway environment), against the real services it names (raises
    ``docs_services.Missing`` where one cannot be had)."""
    import subprocess
    import sys

    from harness.cli import main

    argv = [w.replace("/tmp/", f"{cwd}/tmp/") for w in docs_run.expand(step.argv, cwd)]
    argv = docs_services.resolve(argv, services, cwd)
    with monkeypatch.context() as env:
        for name, value in {**docs_run.environment(step), **docs_measure.environment(step)}.items():
            env.setenv(name, value.replace("/tmp/", f"{cwd}/tmp/"))
        if docs_installs.uses_environment(step, steps):
            return docs_installs.execute(step, steps, cwd)
        if docs_measure.runs_in_process(step):
            return docs_measure.run_script(argv, cwd)
        if argv[0] == "harness":
            try:
                return main(argv[1:])
            except SystemExit as exc:
                return int(exc.code or 0)
        if argv[0] == "pytest" or argv[:3] == ["python", "-m", "pytest"]:
            return _pytest_here(argv[1:] if argv[0] == "pytest" else argv[3:], cwd)
        program = [sys.executable] if argv[0] == "python" else [argv[0]]  # python -c, cp, mkdir
        done = subprocess.run([*program, *argv[1:]], cwd=cwd, timeout=PATIENCE)
        return done.returncode


def _pytest_here(args: list[str], cwd: Path) -> int:
    """``pytest ARGS`` in this process, as ``harness run`` runs it (the stack imported once, not
    once per command: ~10 s each on two loaded cores). The modules it imported from the sandbox
    are forgotten afterwards: the test modules of two sandboxes share a name (test_own_model),
    and an interpreter imports a name once."""
    import sys

    import pytest

    before, path = set(sys.modules), list(sys.path)
    try:
        return int(pytest.main(args))
    finally:
        for name in set(sys.modules) - before:
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(cwd)):
                del sys.modules[name]
        sys.path[:] = path


@pytest.mark.parametrize("document", sorted(STEPS))
def test_document_commands_run(document: str, premise: docs_run.Premise, services: docs_services.Services,
                               exports: docs_exports.Builds, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capfd: pytest.CaptureFixture[str]) -> None:
    """The document's commands in its order, in one sandbox: each exits as the document says (0
    unless it shows ``[exit N]``), or is listed with the reason it cannot run here. A command
    whose service cannot be had here (no MLServer, no PostgreSQL, no package index) is not run:
    the test ends as a skip naming it, or fails where the environment requires it (CI)."""
    import time

    steps = STEPS[document]
    docs_run.lay_premise(steps, tmp_path, premise)
    exports.lay(steps, tmp_path)
    docs_installs.lay(steps, tmp_path, premise)
    docs_measure.lay(steps, tmp_path, premise)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    failed, ran, missing = [], 0, []
    for step in steps:
        if step.reason_not_run():
            continue
        started = time.monotonic()
        try:
            code = _execute(step, steps, tmp_path, monkeypatch, services)
        except docs_services.Missing as exc:
            (failed if exc.required else missing).append(f"{step.source}: `{step.text}` not run: {exc.reason}")
            continue
        output = capfd.readouterr()
        ran += 1
        if step.argv[1:2] == ("init",) and code == 0:
            docs_run.narrow_config(tmp_path / "harness.toml", steps)
        log = os.environ.get("HARNESS_DOCS_TIMES")  # a file to append each command's seconds to
        if log:
            with open(log, "a", encoding="utf-8") as times:
                times.write(f"{time.monotonic() - started:6.1f} s  exit {code}  {step.source}  {step.text[:100]}\n")
        if not step.accepts(code):
            tail = (output.err.strip() or output.out.strip())[-400:]
            # the lines that say why (a gate's REGRESSION rows, a FAIL) wherever they were printed
            why = [line.strip()[:300] for line in (output.out + output.err).splitlines()
                   if "REGRESSION" in line or "FAIL" in line][:12]
            failed.append(f"{step.source}: `{step.text}` exited {code}, the document says {step.expect}: "
                          + "\n".join([*why, tail]))
        elif docs_measure.unmarked(step, output.out):
            failed.append(f"{step.source}: `{step.text}`: {docs_measure.unmarked(step, output.out)}")
    assert not failed, "\n".join(failed)
    if missing:
        pytest.skip("\n".join(missing))


def test_last_failed_through_harness_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capfd: pytest.CaptureFixture[str]) -> None:
    """`harness run --pytest-args --lf` reruns only what failed (was refused: the cache plugin was off).
    In this process, as the documents' commands run (pytest's cache lives in the working directory)."""
    import sys

    from harness.cli import main

    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_team.py").write_text("def test_ok():\n    pass\n\n\ndef test_broken():\n    assert False\n")
    monkeypatch.chdir(tmp_path)

    def run(*extra: str) -> str:
        assert main(["run", "--suites", str(suites), "--out", str(tmp_path / "out"), *extra]) == 1
        sys.modules.pop("test_team", None)  # imported afresh by the next session, as a new process would
        output = capfd.readouterr()
        return output.out + output.err
    first = run()
    assert "1 failed, 1 passed" in first, first
    again = run("--pytest-args", "--lf")
    assert "1 failed in" in again and " passed" not in again, again  # test_ok was not run again
    assert (tmp_path / ".pytest_cache").is_dir()


def test_space_separated_list_values_get_the_comma_spelling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capfd: pytest.CaptureFixture[str]) -> None:
    """`pytest --harness-precisions fp32 int8` used to end `file or directory not found: int8`;
    now one line names the spelling pytest reads (a real pytest, in an empty directory, in this
    process as the documents' pytest commands run)."""
    from harness.settings.options import spaced_list_value

    def is_path(word: str) -> bool:
        return word in ("tests", "tests/test_x.py")

    assert spaced_list_value(["--harness-precisions", "fp32", "int8", "tests"], is_path) == (
        "--harness-precisions fp32 int8: pytest takes one value per option and reads 'int8' as a test path; "
        "write --harness-precisions=fp32,int8")
    assert spaced_list_value(["--harness-precisions", "fp32", "tests/test_x.py", "-q"], is_path) is None
    assert spaced_list_value(["--harness-precisions=fp32,int8", "tests"], is_path) is None
    assert spaced_list_value(["-k", "fp16", "int8"], is_path) is None  # not a list option of the harness

    monkeypatch.chdir(tmp_path)
    code = _pytest_here(["-p", "no:cacheprovider", "--harness-precisions", "fp32", "int8", "--harness-models",
                         "bert-tiny"], tmp_path)
    err = capfd.readouterr().err
    assert code == 4, err
    assert "write --harness-precisions=fp32,int8" in err and "not found: int8" not in err, err
