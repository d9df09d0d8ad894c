"""The real services the documents' commands talk to, for the docs test (tests/test_docs_commands.py).

A reader's copy-paste command names a server at its own address: an inference server on
``127.0.0.1:8000`` (HTTP) / ``:8001`` (gRPC) serving ``bert``, a team's PostgreSQL ``db``, two
virtualenvs with different onnxruntime installs. The docs test runs those commands against real
ones, never mocks:

- **MLServer** (tests/serving/mlserver.py: the real package from ``$HARNESS_MLSERVER``, our small
  ONNX Runtime model runtime) serving the harness's own exports of the models the documents ask
  for (:data:`SERVED`), started once per test process on free ports, lazily: by the first
  document whose commands name an endpoint;
- **PostgreSQL** (tests/pg_server.py: ``$HARNESS_TEST_PG_URL``, else a throwaway cluster), one
  fresh database standing for the example's ``harness`` database;
- **two Python environments** (:data:`ENVIRONMENTS`, docs/perf-gate.md's ``--env-a`` /
  ``--env-b``): virtualenvs in the sandbox at the paths the command names, each holding the
  onnxruntime version its name says (the test's own, or that version installed from the package
  index, once per test process) in front of the test's own numpy.

:data:`ADDRESSES` maps each documented address to the real one, once, as docs_run.VARIABLES
maps shell variables; the command otherwise runs as printed, except for the declared narrowing
of a served check (:data:`SERVED_NARROWING`). Where a service cannot be had here, the command is not run
and the document's test ends as a skip naming it -- a failure where the environment requires it
(``HARNESS_REQUIRE_MLSERVER=1``, ``HARNESS_REQUIRE_PG=1``, ``HARNESS_REQUIRE_INDEX=1``: CI).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import sysconfig
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pg_server
from waiting import PATIENCE

from tests.serving import mlserver as ms

#: a documented address and the service that stands there: ``http`` / ``grpc`` of the MLServer,
#: ``postgres`` (a fresh database on the test's PostgreSQL server)
ADDRESSES = {
    "http://127.0.0.1:8000": "http",
    "grpc://127.0.0.1:8001": "grpc",
    "postgresql://ci@db/harness": "postgres",
}


@dataclass(frozen=True)
class Served:
    """A model the documents ask the server for, and the harness export that stands for it."""

    name: str
    model: str  # zoo model
    precision: str
    graph: str = "model"  # the export's graph (``encoder``, ``decoder``, ... of a seq2seq split)
    version: str = "1"


#: what the documents' commands ask the server for: ``bert`` is the premise's bert-tiny (the
#: reader's ``./bert-classifier``), a version 2 of it, marian-tiny split into its three graphs,
#: encoder-custom at FP16 (docs/serving.md's Triton repository)
SERVED = (
    Served("bert", "bert-tiny", "fp32"),
    Served("bert", "bert-tiny", "fp32", version="2"),
    Served("marian-enc", "marian-tiny", "fp32", graph="encoder"),
    Served("marian-dec", "marian-tiny", "fp32", graph="decoder"),
    Served("marian-dec-past", "marian-tiny", "fp32", graph="decoder_with_past"),
    Served("encoder-custom-fp16", "encoder-custom", "fp16"),
)

#: what the docs test narrows in a served ``harness check`` (flags the command does not give
#: itself): windows of 0.1 s and 0.5 s per concurrency level for the load sweep (not 1 s and up to
#: 15 s), 8 decoded sentences for generation parity (docs_run.NARROWING's --harness-gen-samples=8).
#: The same levels, checks and verdicts; fewer samples.
SERVED_NARROWING = {"--sweep-window": "0.1", "--step-budget": "0.5", "--gen-samples": "8"}

#: interpreters the documents name (``--env-a venv-ort131/bin/python``) and the onnxruntime
#: version each environment holds
ENVIRONMENTS = {"venv-ort131": "1.31.1", "venv-ort132": "1.32.0"}

INDEX_REQUIRE_ENV = "HARNESS_REQUIRE_INDEX"


class Missing(Exception):
    """A service a command needs cannot be had here: ``reason`` says which and why. Where
    ``require_env`` is set to 1 (CI) it must be had: the test fails instead of skipping."""

    def __init__(self, reason: str, require_env: str) -> None:
        self.required = os.environ.get(require_env) == "1"
        self.reason = f"{reason} ({require_env}=1: required here)" if self.required else reason
        super().__init__(self.reason)


class Services:
    """The test process's services, each started the first time a command needs it and
    stopped by :meth:`close` (the session's end)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._stack = contextlib.ExitStack()
        self._server: ms.Server | Missing | None = None
        self._postgres: str | Missing | None = None
        self._onnxruntime: dict[str, Path | Missing] = {}

    def close(self) -> None:
        self._stack.close()

    def mlserver(self) -> ms.Server:
        if self._server is None:
            try:
                self._server = self._start_mlserver()
            except ms.Unavailable as exc:
                self._server = Missing(f"no MLServer here: {exc}", ms.REQUIRE_ENV)
        if isinstance(self._server, Missing):
            raise self._server
        return self._server

    def _start_mlserver(self) -> ms.Server:
        from harness.core import Precision, RunOptions, Settings, Variant
        from harness.judge.workspace import Workspace
        from harness.runners import PROVIDERS
        from harness.serving.artifacts import variant_files

        ms.executable()  # no server binary: say so before exporting anything
        workspace = Workspace(RunOptions(settings=Settings()))
        files = []
        for served in SERVED:
            graphs = variant_files(workspace, Variant(served.model, Precision(served.precision), PROVIDERS["ort_cpu"]))[2]
            path = next(g.path for g in graphs if g.graph.name == served.graph)
            files.append(ms.ServedFile(served.name, path, version=served.version))
        server = ms.start(self.root / "mlserver", files)
        self._stack.callback(server.stop)
        return server

    def postgres(self) -> str:
        if self._postgres is None:
            try:
                url = self._stack.enter_context(contextlib.contextmanager(pg_server.server)())
                self._postgres = self._stack.enter_context(contextlib.contextmanager(pg_server.fresh_database)(url))
            except pg_server.Unavailable as exc:
                self._postgres = Missing(f"no PostgreSQL server could be started: {exc}",
                                         pg_server.REQUIRE_ENV)
        if isinstance(self._postgres, Missing):
            raise self._postgres
        return self._postgres

    def address(self, documented: str) -> str:
        """The real address standing for a documented one."""
        service = ADDRESSES[documented]
        if service == "postgres":
            return self.postgres()
        server = self.mlserver()
        return server.http if service == "http" else server.grpc

    def onnxruntime(self, version: str) -> Path:
        """A directory whose ``onnxruntime`` package is ``version``: the test's own when it is
        that version, else installed from the package index (once per test process)."""
        import onnxruntime

        if onnxruntime.__version__ == version:
            return Path(onnxruntime.__file__).parents[1]
        if version not in self._onnxruntime:
            target = self.root / f"onnxruntime-{version}"
            done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                   "--no-deps", "--target", str(target), f"onnxruntime=={version}"],
                                  capture_output=True, text=True, timeout=PATIENCE)
            last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:]
            self._onnxruntime[version] = target if done.returncode == 0 else Missing(
                f"onnxruntime=={version} for an environment the document names needs a package index: "
                f"pip exited {done.returncode}: {' '.join(last)}", INDEX_REQUIRE_ENV)
        found = self._onnxruntime[version]
        if isinstance(found, Missing):
            raise found
        return found


def resolve(argv: Sequence[str], services: Services, cwd: Path) -> list[str]:
    """The command as it runs in the sandbox ``cwd``: each documented address replaced by the
    real one, the environments it names laid out (:func:`lay_environment`), a served check
    narrowed (:data:`SERVED_NARROWING`). Raises :class:`Missing`."""
    out = [services.address(word) if word in ADDRESSES else word for word in argv]
    for name in ENVIRONMENTS:
        if any(word.startswith(f"{name}/") for word in argv) and not (cwd / name).exists():
            lay_environment(cwd / name, services.onnxruntime(ENVIRONMENTS[name]))
    if out[:2] == ["harness", "check"] and "--endpoint" in argv:
        out += [w for flag, value in SERVED_NARROWING.items() if flag not in argv for w in (flag, value)]
    return out


def lay_environment(path: Path, onnxruntime: Path) -> None:
    """A virtualenv without pip whose ``site-packages`` holds a ``.pth`` putting ``onnxruntime``
    (a directory with that package) first and the test's own ``site-packages`` (numpy) after it:
    what harness/perf/envchild.py imports, at the version the environment stands for."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(path)
    (site,) = path.glob("lib/python*/site-packages")
    paths = dict.fromkeys([str(onnxruntime), sysconfig.get_paths()["purelib"]])
    (site / "harness-docs-env.pth").write_text("".join(f"{p}\n" for p in paths))
