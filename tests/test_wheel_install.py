"""Done-when for "installable anywhere": the wheel, installed into a fresh environment, runs
from an empty directory as a team's CI would run it.

The wheel is built from this checkout once (``pip wheel --no-deps --no-build-isolation``) and
installed with ``pip --python`` into a new virtual environment without pip. The new
environment reuses the dependencies already installed here (torch is 800 MB) through a
``.pth`` file naming this interpreter's site-packages; a ``.pth`` line adds a directory to
``sys.path`` without processing the ``.pth`` files inside it, so the editable install of the
checkout living there (its ``__editable__`` finder) never activates. Every command runs with
``PYTHONPATH`` removed and from a temporary directory outside the checkout, and the test
asserts that ``harness`` imports from the fresh environment.

Then, from an empty directory: (a) ``harness run`` on a zoo model and on a user HF directory
whose path holds a space; (b) pytest in a scratch "foreign repo" whose own test file uses the
public fixtures, with the built-in suites added by ``--harness-builtin-suites``; (c)
``harness init`` for the user's model, then ``harness run`` reading the written config.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from waiting import PATIENCE

from harness.zoo.base import materialize, resolve

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "test_own_model.py"


def _missing_build_tools() -> str | None:
    """The wheel is built without isolation (no network): setuptools >= 77 must be here."""
    try:
        import setuptools
    except ImportError:
        return "setuptools is not installed (pip install -e '.[test]' brings it)"
    major = int(setuptools.__version__.split(".")[0])
    return None if major >= 77 else f"setuptools {setuptools.__version__} < 77 cannot build this pyproject"


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return result


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    missing = _missing_build_tools()
    if missing:
        pytest.skip(missing)
    base = tmp_path_factory.mktemp("wheel")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # built from a copy of what the wheel is made of: setuptools writes build/ and *.egg-info next
    # to the sources, which must not land in (or be reused from) the checkout
    source = base / "source"
    source.mkdir()
    shutil.copy(REPO / "pyproject.toml", source)
    shutil.copy(REPO / "README.md", source)
    shutil.copytree(REPO / "harness", source / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(base / "dist"), str(source)], capture_output=True, text=True, timeout=PATIENCE,
                           cwd=base, env=clean)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (base / "dist").glob("model_harness-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=PATIENCE)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                                "--no-index", "-q", str(wheel)], capture_output=True, text=True, timeout=PATIENCE,
                               env=clean)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    # after the install: with the dependencies visible, pip would see the editable checkout's
    # model-harness as "already satisfied" and install nothing
    deps = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "_harness_test_dependencies.pth").write_text("\n".join(deps) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARNESS_SUITES", "HARNESS_DATASETS",
                                                              "GITHUB_STEP_SUMMARY", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("OMP_NUM_THREADS", "1")
    return venv, env


def test_wheel_runs_from_an_empty_directory(fresh_env, tmp_path):
    venv, env = fresh_env
    bin_dir = venv / "bin"
    work = tmp_path / "empty dir"
    work.mkdir()

    where = _run([str(bin_dir / "python"), "-c", "import harness, harness.suites, harness.data.corpus as c; "
                  "print(harness.__file__); print(c.datasets_dir())"], work, env)
    assert where.returncode == 0, where.stderr
    module, corpora = where.stdout.split()
    assert Path(module).resolve().is_relative_to(venv.resolve()), f"harness imported from {module}, not the fresh env"
    assert not Path(module).resolve().is_relative_to(REPO)
    assert (Path(corpora) / "MANIFEST.json").is_file()

    # (a) a zoo model and a user's HF directory (a space in its path) from an empty directory
    shutil.copytree(materialize(resolve("bert-tiny")), work / "models" / "my model")
    run_a = _run([str(bin_dir / "harness"), "run", "--models", "bert-tiny", "./models/my model",
                  "--precisions", "fp32", "--providers", "ort_cpu", "-k", "logits", "--out", "reports/a"], work, env)
    assert run_a.returncode == 0, run_a.stdout[-3000:] + run_a.stderr[-3000:]
    records = {r["variant"]: r for r in _records(work / "reports" / "a")}
    assert set(records) == {"bert-tiny-fp32-ort_cpu", "my_model-fp32-ort_cpu"}
    assert {r["verdict"] for r in records.values()} == {"pass"}
    assert (work / "reports" / "a" / "junit.xml").is_file()
    assert "--suites" not in records["bert-tiny-fp32-ort_cpu"]["rerun"]  # the installed suites, from anywhere

    # (b) a foreign repository: the team's own test file with the public fixtures, plus the built-in suites
    repo = work / "team-repo"
    (repo / "tests").mkdir(parents=True)
    shutil.copy(EXAMPLE, repo / "tests" / "test_own_model.py")
    run_b = _run([str(bin_dir / "python"), "-m", "pytest", "tests", "-p", "no:cacheprovider", "-q",
                  "--harness-models=bert-tiny", "--harness-precisions=fp32", "--harness-providers=ort_cpu",
                  "--harness-builtin-suites", "-k", "own_model or logits_parity", "--harness-out=reports/b"], repo, env)
    assert run_b.returncode == 0, run_b.stdout[-3000:] + run_b.stderr[-3000:]
    by_id = {r["id"]: r for r in _records(repo / "reports" / "b")}
    assert set(by_id) == {"test_numeric_parity[bert-tiny-fp32-ort_cpu]", "test_predicted_labels_agree[bert-tiny-fp32-ort_cpu]",
                          "test_logits_parity[bert-tiny-fp32-ort_cpu]"}
    assert by_id["test_predicted_labels_agree[bert-tiny-fp32-ort_cpu]"]["metrics"]["label_agreement"] == 1.0
    assert "--suites" not in by_id["test_logits_parity[bert-tiny-fp32-ort_cpu]"]["rerun"]  # reruns from anywhere
    assert "--suites tests/test_own_model.py" in by_id["test_numeric_parity[bert-tiny-fp32-ort_cpu]"]["rerun"]

    # (c) harness init for the user's model, then the written config
    init = _run([str(bin_dir / "harness"), "init", "models/my model"], work, env)
    assert init.returncode == 0, init.stderr
    assert (work / "harness.toml").is_file() and (work / ".github" / "workflows" / "model-harness.yml").is_file()
    run_c = _run([str(bin_dir / "harness"), "run", "-k", "test_logits_parity and fp32", "--out", "reports/c"], work, env)
    assert run_c.returncode == 0, run_c.stdout[-3000:] + run_c.stderr[-3000:]
    verdicts = {r["variant"]: r["verdict"] for r in _records(work / "reports" / "c")}
    assert verdicts == {"my-model-fp32-torch_cpu": "pass", "my-model-fp32-ort_cpu": "pass"}


def test_init_workflow_steps_run_from_a_clean_checkout_with_a_local_index(fresh_env, tmp_path):
    """The workflow ``harness init`` writes, run step by step from a fresh clone for a push to
    main: its install line is the wheel that is installed here, by path and sha256 (no bare
    ``model-harness==`` name an index could answer), installed by pip from a local index into a new
    environment; then the cache key, doctor, the gate with its timings and the blessing of the
    baseline. The one platform piece is the checkout (a ``git clone``) and setup-python (a venv)."""
    from workflow_steps import Context, run_job

    venv, env = fresh_env
    work = tmp_path / "team repo"
    shutil.copytree(materialize(resolve("bert-tiny")), work / "models" / "intent")
    init = _run([str(venv / "bin" / "harness"), "init", "models/intent", "--precisions", "fp32",
                 "--providers", "ort_cpu"], work, env)
    assert init.returncode == 0, init.stderr
    workflow = work / ".github" / "workflows" / "model-harness.yml"
    text = workflow.read_text()
    wheel_spec = re.search(r"'(model-harness @ file://\S+\.whl#sha256=[0-9a-f]{64})'", text)
    assert wheel_spec is not None, text  # what is installed here, pinned by its hash
    assert "model-harness==" not in text and "HARNESS_SPEC" in init.stdout
    git = {**env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-qm", "gate"]):
        assert _run(argv, work, git).returncode == 0
    checkout = tmp_path / "runner" / "checkout"
    assert _run(["git", "clone", "-q", str(work), str(checkout)], tmp_path, git).returncode == 0

    # a local index that serves only the wheel (PEP 503 layout), named by the repository variable
    wheel = Path(wheel_spec.group(1).split("file://", 1)[1].split("#")[0])
    index = tmp_path / "index" / "model-harness"
    index.mkdir(parents=True)
    shutil.copy(wheel, index / wheel.name)
    runner_venv = tmp_path / "runner" / "python"
    subprocess.run([sys.executable, "-m", "venv", str(runner_venv)], check=True, timeout=PATIENCE)
    purelib = next((runner_venv / "lib").glob("python3*/site-packages"))
    (purelib / "_runner_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # torch et al.
    # the job's commands unchanged; its timings kept short the way pytest narrows any run (PYTEST_ADDOPTS)
    runner_env = {**env, "PATH": f"{runner_venv / 'bin'}{os.pathsep}{env['PATH']}",
                  "PYTEST_ADDOPTS": "--harness-samples=8 --harness-perf-samples=40 --harness-perf-warmup=3 "
                                    "--harness-perf-time-budget=3 --harness-perf-repeats=1 --harness-perf-tail-seconds=0"}
    context = Context("push", vars={"PIP_INDEX_URL": (tmp_path / "index").as_uri()}, workspace=checkout)
    steps = run_job(workflow, "gate", context, checkout, runner_env, timeout=PATIENCE)
    failed = [s for s in steps if s.ran and s.returncode != 0]
    assert not failed, f"{failed[0].name}:\n{failed[0].output[-4000:]}"
    ran = [s.name for s in steps if s.ran]
    assert ran[0] == "Install the harness" and any(n.startswith("Gate") for n in ran) and \
        any(n.startswith("Bless") for n in ran), ran
    where = _run([str(runner_venv / "bin" / "python"), "-c", "import harness; print(harness.__file__)"], checkout,
                 runner_env)
    assert Path(where.stdout.strip()).is_relative_to(runner_venv), where.stdout  # installed by the step
    assert re.fullmatch(r"harness-Linux-[0-9a-f]{16}", context.outputs["cache-key"]["key"])
    assert (checkout / ".harness-baseline" / "main" / "baseline.json").is_file()
    assert {r["verdict"] for r in _records(checkout / "reports" / "gate")} <= {"pass", "skip"}
