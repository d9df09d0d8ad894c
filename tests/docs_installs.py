"""The documents' ``pip install`` commands, run for real in a throwaway environment.

A reader's ``pip install`` puts the harness into *their* environment. The docs test runs it into a
throwaway virtual environment, one per document (``python -m venv --without-pip``), whose one
``.pth`` file names the test environment's site-packages: pip finds torch and every dependency
already satisfied and installs only the project, built from a copy of the checkout's tracked files
(``model-harness/``: the "fresh clone" of the README's quickstart, the checkout of
docs/openvino.md, the ``./model-harness`` of "In your own repository"). Building it needs
setuptools from the package index (pip's build isolation), as the reader's install does; nothing
else is fetched. ``pip`` is that environment's (``python -m pip`` of its interpreter; the pip
package itself is the test environment's, seen through the ``.pth``).

pip refuses to uninstall what lies outside the environment it installs into ("Not uninstalling
model-harness at ..., outside environment ..."): :func:`snapshot` before and after every install
proves the test environment was not touched.

A ``harness`` command on the same line after an install (``pip install ... && harness run``) runs
that environment's ``harness`` in the install's directory (on the bare-run premise config, as
every bare ``harness run`` of the documents); every other command of the document runs in the
test's own process as before. The checkout copy is removed once no later command needs it (a
``pytest`` run in the sandbox would otherwise collect the checkout's own tests).
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

import docs_run
from waiting import PATIENCE

ROOT = Path(__file__).resolve().parents[1]
#: the checkout copy's directory in the sandbox (README.md names it ``./model-harness``)
CHECKOUT = "model-harness"
#: the throwaway environment's directory in the sandbox (hidden: pytest does not collect it)
ENVIRONMENT = ".docs-venv"


def is_install(step: docs_run.Step) -> bool:
    return step.argv[:2] == ("pip", "install")


def in_checkout(step: docs_run.Step) -> bool:
    """``pip install -e ".[test]"``, ``pip install '.[openvino]'``: the project in the working
    directory, so the command runs in the checkout the prose puts the reader in."""
    return is_install(step) and any(w == "." or w.startswith(".[") for w in step.argv[2:])


def installed_harness(step: docs_run.Step, steps: list[docs_run.Step]) -> docs_run.Step | None:
    """The install this ``harness`` command follows on its line (``pip install ... && harness run``)."""
    if step.program != "harness":
        return None
    before = [s for s in steps[:steps.index(step)] if s.source == step.source]
    return before[-1] if before and is_install(before[-1]) else None


def uses_environment(step: docs_run.Step, steps: list[docs_run.Step]) -> bool:
    return is_install(step) or installed_harness(step, steps) is not None


def cwd_of(step: docs_run.Step, steps: list[docs_run.Step], sandbox: Path) -> Path:
    install = step if is_install(step) else installed_harness(step, steps)
    return sandbox / CHECKOUT if install is not None and in_checkout(install) else sandbox


def lay(steps: list[docs_run.Step], sandbox: Path, premise: docs_run.Premise) -> None:
    """The checkout copy when a command installs it, and the bare-run premise config in it for
    a bare ``harness run`` after an install there."""
    if not any(is_install(s) for s in steps):
        return
    checkout = sandbox / CHECKOUT
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in tracked.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    if any(docs_run.bare_run(s) and cwd_of(s, steps, sandbox) == checkout for s in steps
           if installed_harness(s, steps)):
        (checkout / "harness.toml").write_text(docs_run.PREMISE_CONFIG)
        (checkout / "exported").mkdir(exist_ok=True)
        shutil.copy(premise.onnx, checkout / "exported" / "model.onnx")


@dataclass(frozen=True)
class Throwaway:
    """A virtual environment that sees the test environment's packages and installs into itself."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def environ(self) -> dict[str, str]:
        """As after ``source .docs-venv/bin/activate``; no PYTHONPATH (the installed harness must
        be the one imported), no pip version check (one request to the index fewer)."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update(PATH=f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(self.root),
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        return env


def throwaway(sandbox: Path) -> Throwaway:
    """The document's environment, created on its first install."""
    found = Throwaway(sandbox / ENVIRONMENT)
    if not found.python.exists():
        venv.EnvBuilder(with_pip=False, symlinks=True).create(found.root)
        purelib = subprocess.run([str(found.python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        (Path(purelib) / "docs-test-environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return found


def snapshot() -> dict[str, object]:
    """What an install or uninstall in the test environment would change: the names in its
    site-packages and bin/, and each installed distribution's RECORD (rewritten on every install)."""
    found: dict[str, object] = {"bin": sorted(p.name for p in Path(sys.prefix, "bin").iterdir())}
    for directory in map(Path, site.getsitepackages()):
        found[str(directory)] = sorted(p.name for p in directory.iterdir() if p.name != "__pycache__")
        for record in directory.glob("*.dist-info/RECORD"):
            found[str(record)] = record.stat().st_mtime_ns
    return found


def execute(step: docs_run.Step, steps: list[docs_run.Step], sandbox: Path) -> int:
    """An install, or the ``harness`` command after one, in the document's throwaway environment
    (with the variables the runner set for it); the checkout copy removed after the last command
    that needs it."""
    environment = throwaway(sandbox)
    cwd = cwd_of(step, steps, sandbox)
    argv = list(step.argv)
    command = [str(environment.python), "-m", "pip", *argv[1:]] if is_install(step) else [
        str(environment.root / "bin" / argv[0]), *argv[1:]]
    before = snapshot()
    done = subprocess.run(command, cwd=cwd, env=environment.environ(), timeout=PATIENCE)
    assert snapshot() == before, f"{step.source}: `{step.text}` changed the test's own environment"
    if is_install(step) and done.returncode == 0:  # the harness that environment imports is the one installed
        where = subprocess.run([str(environment.python), "-c", "import harness; print(harness.__file__)"], cwd=sandbox,
                               env=environment.environ(), capture_output=True, text=True, timeout=PATIENCE)
        assert Path(where.stdout.strip()).is_relative_to(sandbox), (
            f"{step.source}: after `{step.text}` the environment imports harness from {where.stdout or where.stderr}")
    if not any(uses_environment(s, steps) for s in steps[steps.index(step) + 1:]):
        shutil.rmtree(sandbox / CHECKOUT, ignore_errors=True)
    return done.returncode
