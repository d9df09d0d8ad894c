"""Paired A/B across two environments: the same ONNX file timed by two interpreters, alternately.

An ONNX Runtime or torch upgrade is a change of environment, not of artifact: ``perf-compare``
on two files in one process cannot see it, and two recorded runs carry the machine's drift
between them (-39 % .. +68 % between runs of the same build here). This module starts
one timing child per environment (``harness/perf/envchild.py``, run by path with each
environment's interpreter command, so the other environment needs only numpy and its runtime; the
child loads the file with the backend's own loader, so any backend that runs files can be paired)
and asks them for blocks of calls in turn, A B or B A drawn per pair, exactly as
``harness.gate.paired.interleave`` does inside one process. Only one child runs at a time (the
other waits on its stdin), so they never compete for the cores; whatever the machine does hits
both sides of a pair alike. The result is a ``PairedSamples``, judged by ``judge_paired``.

The pairs are spread over several *fresh* process pairs (:data:`PROCESS_PAIRS`), and judged per
process pair. Why: a process brings a speed of its own -- where its allocations and the runtime's
buffers land, cache aliasing, thread placement --, the same environment twice in two processes
read +8.5 % [1.072, 1.117], p = 0.002 (a 10 us call, 10 pairs; CI, 2026-12-02), a false REGRESSION
that one child per side repeats in every pair. With a new pair of children every few pairs, that
bias is noise between process pairs, and the verdict's interval and test count it as such.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Mapping, Sequence

import numpy as np

from harness.core import UsageError
from harness.gate.onnxpair import FileRuntime
from harness.gate.paired import PairedSamples

CHILD = Path(__file__).resolve().parents[1] / "perf" / "envchild.py"
#: process pairs a comparison is spread over (fewer when there are fewer block pairs): at least
#: ``judge_paired``'s ``MIN_PAIRS``, so a verdict over process pairs can be significant
PROCESS_PAIRS = 10


@dataclass
class EnvChild:
    """One environment's timing child: started, warmed up, answering blocks."""

    label: str
    command: Sequence[str]
    proc: subprocess.Popen[str]
    info: dict[str, Any] = field(default_factory=dict)

    def block(self, n: int) -> np.ndarray:
        stdin, stdout = self._pipes()
        stdin.write(f"{n}\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise UsageError(f"environment {self.label} ({shlex.join(self.command)}): the timing child exited "
                             f"({self._stderr()})")
        return np.asarray(json.loads(line)["samples_ms"], dtype=float)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                stdin, _ = self._pipes()
                stdin.write("\n")
                stdin.flush()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        return self.proc.stdin, self.proc.stdout

    def _stderr(self) -> str:
        err = self.proc.stderr.read() if self.proc.stderr is not None else ""
        lines = [x for x in err.strip().splitlines() if x.strip()]
        return lines[-1][:300] if lines else f"exit {self.proc.poll()}"


def environment_command(text: str, where: str) -> list[str]:
    """``/venv/bin/python`` or ``env PYTHONPATH=/x python``: the command that runs the environment's
    interpreter, split like a shell would."""
    try:
        parts = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"{where}: {text!r} is not a command line ({exc})") from None
    if not parts:
        raise UsageError(f"{where}: empty interpreter command")
    return parts


def start(label: str, command: Sequence[str], model: Path, feeds: Path, *, runtime: FileRuntime,
          warmup: int) -> EnvChild:
    """Start a child and wait for its ready line (the file is loaded by its backend and warmed up)."""
    spec = json.dumps(runtime.child_spec(model).to_dict(), sort_keys=True)
    argv = [*command, str(CHILD), "--loader", runtime.backend.loader_ref(), "--spec", spec, "--feeds", str(feeds),
            "--warmup", str(warmup)]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, bufsize=1)
    except OSError as exc:
        raise UsageError(f"environment {label}: cannot run {shlex.join(command)} ({exc.strerror})") from None
    child = EnvChild(label, list(command), proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait()
        raise UsageError(f"environment {label} ({shlex.join(command)}): {child._stderr()}")
    child.info = json.loads(line)
    return child


def interleave_envs(command_a: Sequence[str], command_b: Sequence[str], model_a: Path, model_b: Path,
                    feeds: Mapping[str, np.ndarray], *, runtime: FileRuntime, pairs: int = 30, block: int = 50, warmup: int = 20,
                    seed: int = 0, processes: int = PROCESS_PAIRS) -> tuple[PairedSamples, dict[str, dict[str, Any]]]:
    """Time ``pairs`` pairs of blocks over ``min(processes, pairs)`` fresh process pairs (a new
    child per environment for each, started in random order; the pairs as evenly spread as they
    divide); the samples say which process pair timed each pair (``groups``), and the children's
    ready info per side is the first process pair's."""
    if pairs < 1 or block < 1 or processes < 1:
        raise ValueError("pairs, block and processes must be >= 1")
    for model in dict.fromkeys((model_a, model_b)):
        runtime.admit(model)
    rng = np.random.default_rng(seed)
    generations = min(processes, pairs)
    sizes = [pairs // generations + (1 if g < pairs % generations else 0) for g in range(generations)]
    out_a, out_b, first, groups = np.empty((pairs, block)), np.empty((pairs, block)), [], []
    info: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="harness-envpair-") as tmp:
        path = Path(tmp) / "feeds.npz"
        np.savez(path, **dict(feeds))  # type: ignore[arg-type]
        i = 0
        for generation, size in enumerate(sizes):
            a, b = _start_pair(command_a, command_b, model_a, model_b, path, runtime=runtime, warmup=warmup,
                               b_first=bool(rng.random() < 0.5))
            info = info or {"A": a.info, "B": b.info}
            try:
                for _ in range(size):
                    if rng.random() < 0.5:
                        out_a[i], out_b[i] = a.block(block), b.block(block)
                        first.append("A")
                    else:
                        out_b[i], out_a[i] = b.block(block), a.block(block)
                        first.append("B")
                    groups.append(generation)
                    i += 1
            finally:
                a.close()
                b.close()
    return PairedSamples(out_a, out_b, tuple(first), tuple(groups)), info


def _start_pair(command_a: Sequence[str], command_b: Sequence[str], model_a: Path, model_b: Path, feeds: Path, *,
                runtime: FileRuntime, warmup: int, b_first: bool) -> tuple[EnvChild, EnvChild]:
    """One child per environment, started one after the other (B first when ``b_first``); the first
    is closed if the second cannot start."""
    order = [("B", command_b, model_b), ("A", command_a, model_a)] if b_first else [
        ("A", command_a, model_a), ("B", command_b, model_b)]
    started: dict[str, EnvChild] = {}
    try:
        for label, command, model in order:
            started[label] = start(label, command, model, feeds, runtime=runtime, warmup=warmup)
    except BaseException:
        for child in started.values():
            child.close()
        raise
    return started["A"], started["B"]
