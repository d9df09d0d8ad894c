"""The blessed environment, rebuilt from the versions a baseline recorded.

Re-timing the blessed artifacts and the candidate's in this job (``harness.gate.retime``) measures
both on *this* job's runtime: an ONNX Runtime or OpenVINO upgrade between the baseline and the
candidate is invisible to it. When the runtime versions the baseline recorded (``baseline.json``
``versions``) differ from this environment's, :func:`rebuild` lays out an interpreter whose runtime
packages are the recorded versions -- installed from the package index with ``--no-deps`` into a
folder put first on the path of a virtualenv that otherwise sees this environment's packages --
and ``baseline compare --perf --baseline-env PYTHON`` times the blessed artifacts in it against the
candidate's in this one (``harness.gate.envpair``: timing children alternating in blocks), so the
comparison covers the artifact and the environment together.

Only the runtimes a timing child imports are pinned (:data:`PINNED`); a differing Python version
cannot be rebuilt this way and is reported instead.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from harness.core import UsageError
from harness.results.envinfo import versions

#: the packages a timing child imports (numpy and the runtimes), pinned to the recorded versions
PINNED = ("numpy", "onnxruntime", "openvino")


@dataclass(frozen=True)
class EnvironmentDelta:
    """How this environment's timing packages differ from the ones a baseline recorded."""

    pins: dict[str, str]  # package -> the baseline's version, for each that differs here
    here: dict[str, str]  # package -> this environment's version (absent: not installed here)
    python: tuple[str, str] | None  # (baseline, here) when the Python versions differ

    def describe(self) -> str:
        parts = [f"{name} {self.here.get(name, '<absent>')} here, {version} in the baseline"
                 for name, version in sorted(self.pins.items())]
        if self.python:
            parts.append(f"python {self.python[1]} here, {self.python[0]} in the baseline (not rebuilt)")
        return "; ".join(parts)


def delta(recorded: Mapping[str, str]) -> EnvironmentDelta:
    """The baseline's ``versions`` against this environment's (``harness.results.envinfo.versions``)."""
    here = versions()
    pins = {name: str(recorded[name]) for name in PINNED if recorded.get(name) and recorded[name] != here.get(name)}
    python = (str(recorded["python"]), here["python"]) if recorded.get("python") and \
        recorded["python"] != here["python"] else None
    return EnvironmentDelta(pins, {k: v for k, v in here.items() if k in PINNED}, python)


def rebuild(directory: Path, pins: Mapping[str, str]) -> Path:
    """A virtualenv in ``directory`` whose ``pins`` are the given versions (installed from the
    package index, ``--no-deps``, into ``directory/pinned``) and whose other packages are this
    environment's; returns its interpreter. A failed install is one line naming the pins."""
    pinned = directory / "pinned"
    marker = pinned / "PINS.txt"
    wanted = "\n".join(f"{name}=={version}" for name, version in sorted(pins.items())) + "\n"
    if not (marker.is_file() and marker.read_text(encoding="utf-8") == wanted):  # reused when already laid out
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--upgrade",
                               "--target", str(pinned), *wanted.split()], capture_output=True, text=True)
        if done.returncode != 0:
            last = [line for line in done.stderr.strip().splitlines() if line.strip()]
            raise UsageError(f"baseline env: cannot install {' '.join(wanted.split())} "
                             f"({last[-1][:200] if last else f'pip exit {done.returncode}'})")
        marker.write_text(wanted, encoding="utf-8")
    env = directory / "venv"
    if not (env / "bin" / "python").exists():
        venv.EnvBuilder(with_pip=False, symlinks=True).create(env)
    site = Path(sysconfig.get_paths(vars={"base": str(env), "platbase": str(env)})["purelib"])
    site.mkdir(parents=True, exist_ok=True)
    here = sysconfig.get_paths()["purelib"]
    (site / "harness-blessed.pth").write_text(f"{pinned.resolve()}\n{here}\n", encoding="utf-8")
    return env / "bin" / "python"
