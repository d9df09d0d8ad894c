"""Exports made by the tools practitioners ship with, built at test time for ``harness check``.

The harness must judge files it never built, so these fixtures come from the real tools, run as
their users run them: optimum-onnx's ``optimum-cli export onnx`` (with and without past),
``ORTOptimizer`` (O2, O3) and ``ORTQuantizer`` (dynamic INT8); onnxruntime-genai's model builder
(fp32, int8, int4 on the CPU provider); ``onnxruntime.transformers.optimizer`` (fp32 and
``--float16``); onnxslim. optimum-onnx pins transformers 4.x (the project runs 5.x), so it and
onnxslim live in a venv of their own: ``HARNESS_EXPORTERS_VENV`` names it (CI's ``.ci/run`` builds
it in the background and exports it), else ``.exporters-venv`` in the checkout; its exports come
from another transformers version than the reference, as teams' exports usually do. The genai
builder needs transformers 5 and ONNX Runtime's optimizer is ONNX Runtime's own: both run with the
project's interpreter (``Tool.in_venv`` False; onnxruntime-genai is in the test extra).

An export is cached by content hash (the tool's command, the versions of the venv's packages and
the bytes of the source model), so a session runs each tool once. Where the venv is missing,
``Unavailable`` says why; with ``HARNESS_REQUIRE_EXPORTERS=1`` (CI) the tests fail instead of
skipping.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from harness.core.cachedir import cache_root as harness_cache
from harness.core.cachedir import lock_for, temp_dir_for
from tests.waiting import PATIENCE

ENV = "HARNESS_EXPORTERS_VENV"
REQUIRE_ENV = "HARNESS_REQUIRE_EXPORTERS"
ROOT = Path(__file__).resolve().parents[1]
#: what .ci/run installs into the venv (and what a developer installs by hand)
REQUIREMENTS = Path(__file__).with_name("exporters-requirements.txt")
#: the distributions whose versions decide an export (part of every cache key)
VERSIONED = ("optimum-onnx", "optimum", "transformers", "torch", "onnxruntime", "onnxslim", "onnx")


class Unavailable(Exception):
    pass


def venv() -> Path:
    given = os.environ.get(ENV)
    root = Path(given) if given else ROOT / ".exporters-venv"
    if not (root / "bin" / "python").is_file():
        where = f"{ENV}={given}" if given else f"{root} (no {ENV})"
        raise Unavailable(f"no exporters venv: {where} has no bin/python; create it with: python3 -m venv "
                          f".exporters-venv && .exporters-venv/bin/pip install -r {REQUIREMENTS.relative_to(ROOT)}")
    return root


def required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"


@cache
def versions() -> dict[str, str]:
    """The venv's versions of the packages that decide an export."""
    code = ("import json, importlib.metadata as m\n"
            f"out = {{}}\nfor d in {list(VERSIONED)!r}:\n"
            "    try:\n        out[d] = m.version(d)\n    except m.PackageNotFoundError:\n        pass\n"
            "print(json.dumps(out))")
    done = subprocess.run([str(venv() / "bin" / "python"), "-c", code], capture_output=True, text=True,
                          timeout=PATIENCE, check=True)
    found: dict[str, str] = json.loads(done.stdout)
    return found


@dataclass(frozen=True)
class Tool:
    """One way a practitioner makes an ONNX file: ``argv`` with ``{src}`` / ``{out}`` placeholders,
    run by the exporters venv's python (``in_venv``) or the project's (the ONNX Runtime the harness
    itself runs, for ``onnxruntime.transformers``)."""

    name: str
    argv: tuple[str, ...]
    in_venv: bool = True

    def command(self, src: Path, out: Path) -> list[str]:
        python = str(venv() / "bin" / "python") if self.in_venv else sys.executable
        return [python, *(a.format(src=src, out=out) for a in self.argv)]


def _project_versions() -> dict[str, str]:
    """The project venv's versions of what its tools (the genai builder, ORT's optimizer) export with."""
    from importlib.metadata import version

    return {d: version(d) for d in ("onnxruntime", "onnxruntime-genai", "transformers", "torch", "onnx")}


def _tree_digest(path: Path) -> str:
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode())
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def cache_root() -> Path:
    return harness_cache() / "exporter-fixtures"


def export(tool: Tool, src: Path) -> Path:
    """``tool``'s output for ``src`` (a model directory or an ONNX file): a directory, built once
    per content hash; a failing tool fails with its own last lines."""
    key = hashlib.sha256(json.dumps({"tool": tool.name, "argv": tool.argv, "in_venv": tool.in_venv,
                                     "versions": versions() if tool.in_venv else _project_versions(),
                                     "src": _tree_digest(src)}, sort_keys=True).encode()).hexdigest()[:16]
    out = cache_root() / f"{tool.name}-{key}"
    out.parent.mkdir(parents=True, exist_ok=True)
    with lock_for(out):  # two xdist workers wanting one export: one builds it, the other waits and reuses it
        if not (out / ".done").is_file():
            _build(tool, src, out)
    return out


def _build(tool: Tool, src: Path, out: Path) -> None:
    tmp = temp_dir_for(out)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": ""}
    done = subprocess.run(tool.command(src, tmp), capture_output=True, text=True, env=env, timeout=PATIENCE,
                          cwd=tmp)
    if done.returncode:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise AssertionError(f"{tool.name} failed (exit {done.returncode}):\n{tail}")
    (tmp / ".done").write_text(json.dumps(versions() if tool.in_venv else _project_versions()), encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)  # a half-built entry of a killed run
    tmp.rename(out)
