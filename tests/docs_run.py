"""What the docs test needs to *run* the commands of README.md, docs/ and examples/.

A document's commands run in document order, in one sandbox directory per document, against
the test session's warm ``HARNESS_CACHE``: a command that reads what an earlier one wrote
(``harness run --out reports/nightly && harness baseline compare reports/nightly``) finds it.
What the reader is assumed to have *before* the first command (their own model directory, an
exported file, earlier runs, a history database) is the document's premise: built here from the
tiny models the docs name (bert-tiny stands for "your model"), only for the paths a document's
commands mention.

Every command runs unless :data:`NOT_RUN` (or a GPU word, :data:`GPU_REASONS`) says precisely
why it cannot run here; a :data:`NOT_RUN` entry no command matches any more fails the test, so the
list cannot go stale, and a new command is run by default.
"""

from __future__ import annotations

import dataclasses
import enum
import glob
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import docs_given

#: a GPU word in a command and why that command cannot run on a CPU machine
GPU_REASONS = {
    "ort_cuda": "needs the CUDA execution provider (onnxruntime-gpu and an NVIDIA GPU)",
    "ort_trt": "needs the TensorRT execution provider (onnxruntime-gpu, TensorRT and an NVIDIA GPU)",
    "trt_native": "needs TensorRT and an NVIDIA GPU",
    "'.[gpu]'": "installs the gpu extra (tensorrt, onnxruntime-gpu): needs a package index and a GPU",
    "gpu_check": "needs an NVIDIA GPU",
}

#: commands that name a GPU provider but only write files for it, so they run here:
#: ``export-triton --providers ort_cuda`` writes a Triton repository (config.pbtxt with the CUDA or
#: TensorRT execution accelerator, the ONNX files) that a GPU server loads later
WRITES_FOR_A_GPU = (("harness", "export-triton"),)

#: shell variables the docs' scripts set, as the sandbox spells them
VARIABLES = {"out": "reports/nightly-2026-12-01"}

#: commands (their exact text, after splitting ``&&``/``;``) that cannot run here, and why
NOT_RUN: dict[str, str] = {
    "pytest tests -n 2": "the harness's own test suite, which this test is part of: run by CI, whose .ci/run "
                         "ends with exactly this command (test_docs_commands asserts it)",
    "python scripts/tests_under_load.py --burners 4 -- tests -n 2 --random-order":
        "the same suite beside four busy loops in a shuffled order: the release check of the suite, run by hand, "
        "not inside itself (its script runs under tests/test_under_load.py, on the tests that wait for events)",
}


class Needs(enum.Enum):
    """What a command that is not run here needs and this machine (or CI) does not give it. A
    command is skipped only for one of these: "over this test's budget" is not one (every command
    that needs none of them runs, test_docs_commands asserts the count). An install runs into a
    throwaway environment (tests/docs_installs.py), a benchmark as its smoke run
    (tests/docs_measure.py)."""

    GPU = "an NVIDIA GPU (CUDA, TensorRT)"
    SUITE = "the harness's own test suite, which this test is part of (CI runs it: .ci/run's command)"
    GIVEN = "files the paragraph describes rather than gives (edited by hand, made to fail, the reader's own)"


#: the :class:`Needs` of each :data:`NOT_RUN` entry (every entry has one)
NEEDS: dict[str, Needs] = {
    "pytest tests -n 2": Needs.SUITE,
    "python scripts/tests_under_load.py --burners 4 -- tests -n 2 --random-order": Needs.SUITE,
}


def needs(key: str) -> Needs:
    """The :class:`Needs` of a :data:`NOT_RUN` key: listed in :data:`NEEDS`, else files the
    paragraph describes (every other entry of :data:`NOT_RUN` says which)."""
    return NEEDS.get(key, Needs.GIVEN)


#: commands whose documented outcome depends on the machine, and the exit statuses each may give
MACHINE_DEPENDENT: dict[str, tuple[tuple[int, ...], str]] = {
    "harness perf-compare bert-tiny-fp32/model.onnx bert-tiny-int8/model.onnx --pairs 20 --block 50": (
        (0, 1), "a timing verdict: INT8 vs FP32 is a REGRESSION (exit 1) or INCONCLUSIVE (0) by the machine's load"),
    "harness baseline compare runs/pr-17 --name main --perf --baseline-env venv-ort131/bin/python": (
        (0, 1), "a timing verdict: the blessed files on onnxruntime 1.31.1 against the candidate's on this "
                "environment's is a REGRESSION (exit 1) or not (0) by the machine and its load"),
    "harness perf-compare model.onnx --env-a venv-ort131/bin/python --env-b venv-ort132/bin/python --pairs 20": (
        (0, 1), "a timing verdict: onnxruntime 1.32.0 vs 1.31.1 on one file is a REGRESSION (exit 1) or not (0) by the "
                "machine and its load"),
    # ONNX Runtime's u8s8 INT8 kernels on an x86 CPU without VNNI (AVX2 only) saturate (README.md, "On an x86
    # CPU without VNNI"): the documents' numbers are from a VNNI machine
    "harness bisect --models marian-tiny --precisions int8": (
        (0, 1), "the default rule: marian-tiny INT8's first divergent node stays under 0.15 with VNNI (exit 0); "
                "without it encoder layers.1/fc1 reads 0.17 (exit 1)"),
    "harness bisect --models llama-tiny --precisions int8 --suggest --target top1_agreement=0.99 --max-rebuilds 20": (
        (0, 1), "with VNNI the search passes at 16 nodes (exit 0); without it the bisect has 13 candidates and all 13 "
                "kept in FP32 reach top1_agreement 0.984 < 0.99: the best set, NOT verified (exit 1)"),
    "harness bisect --models llama-tiny --precisions int8 --suggest --target top1_agreement=0.99": (
        (0, 1), "with VNNI the search passes at 16 nodes (exit 0); without it the bisect has 13 candidates and all 13 "
                "kept in FP32 reach top1_agreement 0.984 < 0.99: the best set, NOT verified (exit 1)"),
}

# the 16-layer random Llama of docs/large-models.md gave 6 failures (exit 1); llama-tiny stands for it here
MACHINE_DEPENDENT["harness run --models /tmp/bench2/work/llama-16l --precisions fp32 fp16 int8 --providers torch_cpu "
                  "ort_cpu --cache /tmp/bench2/work/cache-16l --out /tmp/bench2/work/run-16l --samples 4 --batch-size 4 "
                  "--threads 1 --release-models always --pytest-args --harness-gen-samples 4 --harness-gen-batch-size 4 "
                  "--harness-gen-max-new-tokens 8"] = (
    (0, 1), "a model's verdict: the printed run judged the 16-layer random Llama (6 failed, exit 1); its stand-in "
            "llama-tiny (tests/docs_measure.py) fails or passes by its own numbers and this CPU's INT8 kernels")

#: what the docs test narrows in every ``harness run`` / ``pytest`` it runs (through pytest's own
#: ``PYTEST_ADDOPTS``, so the command line stays the printed one; a value the command gives wins,
#: pytest reads the command line after it): the perf suites time 40 calls after 5 warm-ups in one
#: fresh process per variant (not 300 + 2 s of tail in 3), generation parity decodes 8 sentences
#: (not 48 or the whole corpus). The same suites, cases and verdict logic; fewer samples.
NARROWING = ("--harness-perf-samples=40 --harness-perf-warmup=5 --harness-perf-repeats=1 "
             "--harness-perf-tail-seconds=0 --harness-gen-samples=8")

#: paths a document's commands take as given, and what stands for them here
#: a copy of the committed numbers-en-zh translator (docs/own-repository.md judges it from another path)
PREMISE_TRANSLATORS = ("./models/zh numbers",)
PREMISE_MODELS = ("./hf-model", "./my-model", "./models/my-model", "./bert-tiny", "./bert-classifier",
                  "./my-hf-model", "./pick", "models/intent model")
PREMISE_ONNX_DIRS = ("./exported",)
PREMISE_ONNX_FILES = ("model.onnx", "./exported/model.onnx", "bert-tiny-fp32/model.onnx", "bert-tiny-int8/model.onnx")
#: timed nights (the perf sections a multi-run baseline aggregates), oldest first
PREMISE_NIGHTS = ("reports/nightly-1", "reports/nightly-2", "reports/nightly-3")
PREMISE_FILES = {"examples/test_own_model.py": "examples/test_own_model.py", "examples/protocol.toml": "examples/protocol.toml"}
#: files a document's prose gives the reader before its commands
DOCUMENT_FILES = {"docs/own-repository.md": {"tests/test_own_model.py": "examples/test_own_model.py"},
                  "docs/hooks.md": {"tests/test_own_model.py": "examples/test_own_model.py",
                                    "tests/conftest.py": "examples/hooks/conftest.py"}}
PREMISE_RUNS = ("reports/latest", "reports/run-x", "reports/ort-1.19", "reports/ort-1.20", "reports/v1",
                "reports/v2", "reports/v3", "reports/last-nightly", "reports/run-2026-01-02", "runs/2025-06-01",
                "runs/2025-06-02", "reports/nightly")


@dataclass(frozen=True)
class Step:
    """One command of a document: ``text`` as printed (one part of a ``&&``/``;`` list)."""

    source: str
    text: str
    argv: tuple[str, ...]
    expect: int
    after: str = ""  # the command before it on its line (``a && b``) when that one is not run here

    @property
    def program(self) -> str:
        return self.argv[0] if self.argv else ""

    def accepts(self, code: int) -> bool:
        allowed = MACHINE_DEPENDENT.get(self.text)
        return code in allowed[0] if allowed else code == self.expect

    def reason_not_run(self) -> str | None:
        found = self.not_run()
        return found[1] if found else None

    def not_run(self) -> tuple[Needs, str] | None:
        """(what it needs, why) for a command that cannot run here; None: it runs."""
        if self.after:  # `a && b`: b needs what a needs
            first = dataclasses.replace(self, text=self.after, after="")
            need = first.not_run()
            return (need[0] if need else Needs.GIVEN), f"runs after `{self.after}` on the same line, which is not run here"
        document = self.source.rsplit(":", 1)[0]
        for key in (f"{document}: {self.text}", self.text):
            if key in NOT_RUN:
                return needs(key), NOT_RUN[key]
        prefix = next((key for key in NOT_RUN if key.endswith(" ...") and self.text.startswith(key[:-4])), None)
        if prefix:
            return needs(prefix), NOT_RUN[prefix]
        if self.expect != 0:
            return None  # the document shows what happens without the GPU (a refusal, a not-run case)
        if self.argv[:2] in WRITES_FOR_A_GPU:
            return None
        lowered = self.text.lower()
        return next(((Needs.GPU, why) for word, why in GPU_REASONS.items() if word in lowered), None)




def _parts(text: str) -> list[str]:
    """``a && b; c | d`` -> ``a``, ``b``, ``c`` (outside quotes; a pipe's reader is not a command
    of the harness)."""
    parts, current, quote, i = [], "", "", 0
    while i < len(text):
        char = text[i]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif text.startswith(("&&", "||"), i) or char in ";|":
            parts.append(current)
            current = ""
            if char == "|" and not text.startswith("||", i):
                return [p.strip() for p in parts if p.strip()]
            i += 2 if text.startswith(("&&", "||"), i) else 1
            continue
        current += char
        i += 1
    return [p.strip() for p in [*parts, current] if p.strip()]
_EXIT = re.compile(r"(?:\[exit (\d+)\]|\(exit (\d+)\)|#\s*exit (\d+):|\s{2,}exit (\d+)$)")


def steps_of(source: str, text: str, expect: int) -> list[Step]:  # noqa: C901
    """The commands of one documented line: ``a && b`` is two steps (the second runs only when
    the first exits 0, so both must), ``a; status=$?`` one; shell variables and globs as a
    shell in the sandbox would expand them (globs at run time: :func:`expand`)."""
    text = re.split(r"\s+#\s", f" {text}", maxsplit=1)[0].strip()  # the trailing comment
    out: list[Step] = []
    for part in _parts(text):
        if not part or re.match(r"^\w+=\S*$", part) or part.startswith(("exit ", "echo ")):
            continue
        words = shlex.split(re.sub(r"\$\{?(\w+)\}?", lambda m: VARIABLES[m[1]], part))
        while words and re.match(r"^\w+=", words[0]):
            words = words[1:]  # an environment assignment: applied by the runner (:func:`environment`)
        out.append(Step(source, part, tuple(words), expect))
    for i, (first, later) in enumerate(zip(out, out[1:])):  # `a && b`: b after a; a not run leaves b unrun
        if first.reason_not_run() and not later.reason_not_run():
            out[i + 1] = dataclasses.replace(later, after=first.text)
    return out


def runs_pytest(step: Step) -> bool:
    """``harness run``, ``pytest ...`` and ``python -m pytest ...``: what reads ``PYTEST_ADDOPTS``."""
    return step.argv[:2] == ("harness", "run") or step.program == "pytest" or step.argv[:3] == (
        "python", "-m", "pytest")


def environment(step: Step) -> dict[str, str]:
    """``HARNESS_CACHE=/tmp/empty harness repro ...``: the assignments in front of the command, and
    :data:`NARROWING` for a command that runs pytest."""
    found = {"PYTEST_ADDOPTS": NARROWING} if runs_pytest(step) else {}
    for word in shlex.split(step.text):
        if not re.match(r"^\w+=", word):
            break
        name, _, value = word.partition("=")
        found[name] = value
    return found


def expected_exit(lines: list[str], after: int) -> int:
    """The exit status the document shows for the command ending at line ``after``: ``[exit N]``,
    ``(exit N)``, ``# exit N: ...`` on its line or the lines of output before the next command,
    or ``$ echo $?`` followed by N; 0 when the document shows none. In a block without ``$ ``
    prompts every line is a command: only the command's own line says its status."""
    prompted = any(raw.strip().startswith("$ ") for raw in lines)
    for offset, raw in enumerate(lines[after:] if prompted else lines[after:after + 1], start=after):
        line = raw.strip()
        if offset > after and line.startswith("$ ") and line != "$ echo $?":
            break
        found = _EXIT.search(line)
        if found:
            return int(next(g for g in found.groups() if g))
        if offset > after and line.startswith("harness: error:"):  # the one-line refusal of a usage error
            return 2
        if line == "$ echo $?" and offset + 1 < len(lines) and lines[offset + 1].strip().isdigit():
            return int(lines[offset + 1].strip())
    return 0


def expand(argv: tuple[str, ...], cwd: Path) -> list[str]:
    """Shell globbing in ``cwd`` (``reports/shard-*``); a pattern that matches nothing stays as is."""
    out: list[str] = []
    for word in argv:
        matches = sorted(glob.glob(word, root_dir=cwd)) if any(c in word for c in "*?[") else []
        out += matches or [word]
    return out


def mentioned(path: str, steps: list[Step]) -> bool:
    pattern = re.compile(rf"(^|[\s'\"=]){re.escape(path)}(/|['\"]|\s|$)")
    return any(pattern.search(" ".join(s.argv)) or pattern.search(s.text) for s in steps)


#: the reader's suite config where a document runs ``harness run`` without naming models (and
#: does not write one with ``harness init``): one tiny model at FP32 and its exported file, few
#: samples, so that "the default suites on my models" costs seconds, not the whole zoo
PREMISE_CONFIG = """\
# the docs test's stand-in for the reader's harness.toml
[run]
models = ["bert-tiny"]
precisions = ["fp32"]
providers = ["ort_cpu"]
samples = 8

[models.bert-tiny.artifacts]
fp32 = "exported/model.onnx"
"""


def bare_run(step: Step) -> bool:
    """``harness run`` / ``harness check --config`` whose models come from the config file."""
    words = step.argv[1:]
    return words[:1] in (("run",), ("check",)) and not {"--models", "--reference", "--suites"} & set(words)


def narrow_config(path: Path, steps: list[Step]) -> None:
    """After ``harness init`` wrote the reader's harness.toml: its model stays, the matrix shrinks
    to FP32 on ONNX Runtime (the other precisions and PyTorch CPU are judged by the other tests),
    plus a precision a later ``-k`` of the document selects (``harness run -k "fp16"``), and 8
    samples (cost)."""
    selected = {w for s in steps if "-k" in s.argv[:-1] for w in re.findall(r"\w+", s.argv[s.argv.index("-k") + 1])}
    kept = ["fp32", *sorted(selected & {"fp16", "int8"})]
    text = re.sub(r"(?m)^providers = .*$", 'providers = ["ort_cpu"]', path.read_text(), count=1)
    text = re.sub(r"(?m)^precisions = .*$", f"precisions = {kept!r}".replace("'", '"'), text, count=1)
    path.write_text(re.sub(r"(?m)^samples = \d+", "samples = 8", text, count=1))


def writes(path: str, steps: list[Step]) -> bool:
    return any(f"--out {path}" in " ".join(s.argv) for s in steps)


@dataclass(frozen=True)
class Premise:
    """What stands for the reader's own files (built once per test process)."""

    model: Path  # an HF directory (bert-tiny's)
    translator: Path  # the committed numbers-en-zh translator's HF directory
    onnx: Path  # an ONNX file exported from it by hand (other I/O names than the harness's)
    fp32: Path  # the harness's own FP32 and INT8 exports of it (same I/O names at both precisions)
    int8: Path
    run: Path  # a run directory: bert-tiny FP32 + INT8 on ORT, untimed
    history: Path  # a history database of four timed nights
    nights: list[Path]  # those nights' run directories, oldest first


def lay_premise(steps: list[Step], root: Path, premise: Premise) -> None:
    """Create, under ``root``, the paths the document's commands take as given (only those)."""
    _lay_inputs(steps, root, premise)
    _lay_runs(steps, root, premise)
    docs_given.lay_printed(steps[0].source.rsplit(":", 1)[0], root, Path(__file__).resolve().parents[1])


def _lay_inputs(steps: list[Step], root: Path, premise: Premise) -> None:
    """The reader's model directories, exported files and the files the prose hands them."""
    for name in PREMISE_MODELS:
        if mentioned(name, steps):
            shutil.copytree(premise.model, root / name, dirs_exist_ok=True)
    for name in PREMISE_TRANSLATORS:
        if mentioned(name, steps):
            shutil.copytree(premise.translator, root / name, dirs_exist_ok=True)
    if mentioned("./pick", steps):  # a directory the loader refuses: pickle weights
        (root / "pick" / "model.safetensors").rename(root / "pick" / "pytorch_model.bin")
    files = {name: source for name, source in PREMISE_FILES.items() if mentioned(name, steps)}
    for name, source in {**files, **DOCUMENT_FILES.get(steps[0].source.rsplit(":", 1)[0], {})}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(__file__).resolve().parents[1] / source, root / name)
    for name in PREMISE_ONNX_DIRS:
        if mentioned(name, steps):
            (root / name).mkdir(parents=True, exist_ok=True)
            shutil.copy(premise.onnx, root / name / "model.onnx")
    for name in PREMISE_ONNX_FILES:
        if mentioned(name, steps):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            built = premise.int8 if "int8" in name else premise.fp32
            shutil.copy(built if name.startswith("bert-tiny") else premise.onnx, root / name)
    if any(bare_run(s) for s in steps) and not any(s.argv[1:2] == ("init",) for s in steps):
        config = PREMISE_CONFIG
        if steps[0].source.startswith("docs/sharding.md"):  # three shards need more than two cases
            config = config.replace('precisions = ["fp32"]', 'precisions = ["fp32", "int8"]')
        (root / "harness.toml").write_text(config)
        (root / "exported").mkdir(exist_ok=True)
        shutil.copy(premise.onnx, root / "exported" / "model.onnx")


def _lay_runs(steps: list[Step], root: Path, premise: Premise) -> None:
    """Earlier runs, timed nights and the history database the commands read."""
    for name in PREMISE_RUNS:
        if mentioned(name, steps) and not writes(name, steps):
            shutil.copytree(premise.run, root / name, dirs_exist_ok=True)
    for name, night in zip(PREMISE_NIGHTS, premise.nights):
        if mentioned(name, steps):
            shutil.copytree(night, root / name)
    for step in steps:  # what a run not run here would have written, later commands read: the premise run
        out = step.argv[step.argv.index("--out") + 1] if "--out" in step.argv[:-1] else None
        if out and step.argv[1:2] == ("run",) and step.reason_not_run() and not (root / out).exists():
            shutil.copytree(premise.run, root / out)
    if mentioned("reports/history.sqlite", steps) or any(s.argv[1:2] == ("history",) or "--history-last" in s.argv
                                                          for s in steps):
        (root / "reports").mkdir(exist_ok=True)
        shutil.copy(premise.history, root / "reports" / "history.sqlite")
