"""Outputs are checked before any work starts: an unwritable ``--out``, ``--harness-out``,
``--html``/``--csv``/``--markdown``, ``--baseline-store``, ``--history-db``, ``--json`` is one line on stderr and
exit 2 (pytest's usage exit 4 for the plugin's option), with nothing computed in vain.

The tests run as root in CI, for whom a chmod'ed read-only directory is still writable; the
unwritable places used here hold for root too: a path under an existing regular file, an
existing file where a directory is wanted (and the reverse), and ``/proc`` (the chmod variant
runs only as another user).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import PATIENCE

from harness.cli import main
from harness.core import UsageError
from harness.core.writable import PROBE_PREFIX, ensure_writable_dir, ensure_writable_file

TINY_SUITE = '''
def test_quick(variant, harness):
    harness.metrics["done"] = 1.0
'''


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "file.txt"
    path.write_text("not a directory\n")
    return path


def _one_line_error(err: str, option: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("harness: error: ") and option in lines[0], err
    assert "Traceback" not in err


# -- the helper -----------------------------------------------------------------------------------

def test_writable_dir_probe_leaves_nothing_behind(tmp_path):
    target = tmp_path / "a" / "b" / "run"
    assert ensure_writable_dir(target, "--out") == target
    assert list(tmp_path.iterdir()) == []  # the missing directories were made and removed again
    target.mkdir(parents=True)
    ensure_writable_dir(target, "--out")
    assert list(target.iterdir()) == []
    assert not any(p.name.startswith(PROBE_PREFIX) for p in tmp_path.rglob("*"))


def test_writable_file_probe_keeps_an_existing_file_unchanged(tmp_path, a_file):
    before = (a_file.read_bytes(), a_file.stat().st_mtime_ns)
    ensure_writable_file(a_file, "--csv")
    assert (a_file.read_bytes(), a_file.stat().st_mtime_ns) == before
    ensure_writable_file(tmp_path / "new" / "dir" / "out.html", "--html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


@pytest.mark.parametrize("where", ["file itself", "under a file", "proc"])
def test_unwritable_dirs_are_refused_even_as_root(tmp_path, a_file, where):
    path = {"file itself": a_file, "under a file": a_file / "run", "proc": Path("/proc/harness-test/run")}[where]
    if where == "proc" and not Path("/proc/self").exists():
        pytest.skip("no /proc on this system")
    with pytest.raises(UsageError, match=r"^--out .*(not a directory|not writable)"):
        ensure_writable_dir(path, "--out")


def test_files_where_a_directory_is_or_under_a_file_are_refused(tmp_path, a_file):
    with pytest.raises(UsageError, match="is a directory"):
        ensure_writable_file(tmp_path, "--html")
    with pytest.raises(UsageError, match="not a directory"):
        ensure_writable_file(a_file / "report.html", "--html")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root writes into a chmod 0555 directory anyway; covered by the file/proc cases")
def test_read_only_directory_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(UsageError, match="not writable"):
            ensure_writable_dir(ro / "run", "--out")
        with pytest.raises(UsageError, match="not writable"):
            ensure_writable_file(ro / "report.csv", "--csv")
    finally:
        ro.chmod(0o755)


# -- every command that writes, before it works ------------------------------------------------------

def _run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=PATIENCE)


def _suite(tmp_path: Path) -> Path:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_tiny.py").write_text(TINY_SUITE)
    return suites


@pytest.mark.parametrize("where", ["existing file", "under a file"])
def test_harness_run_refuses_an_unwritable_out_before_running(tmp_path, a_file, where):
    out = a_file if where == "existing file" else a_file / "run"
    done = _run_cli(tmp_path, "run", "--suites", str(_suite(tmp_path)), "--models", "bert-tiny", "--precisions",
                    "fp32", "--providers", "torch_cpu", "--out", str(out))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    _one_line_error(done.stderr, "--out")
    assert "INTERNALERROR" not in done.stdout and "passed" not in done.stdout  # no case ran


def test_plugin_refuses_an_unwritable_harness_out_before_collecting(tmp_path, a_file):
    cmd = [sys.executable, "-m", "pytest", str(_suite(tmp_path)), "-p", "no:cacheprovider", "-q",
           "--harness-models", "bert-tiny", "--harness-precisions", "fp32", "--harness-providers", "torch_cpu",
           f"--harness-out={a_file / 'run'}"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=PATIENCE)
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]  # pytest's usage error
    assert "INTERNALERROR" not in done.stdout + done.stderr and "passed" not in done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and "--harness-out" in errors[0] and "not a directory" in errors[0], done.stderr


@pytest.mark.parametrize("option", ["--html", "--csv", "--markdown"])
def test_report_refuses_an_unwritable_output_before_reading(tmp_path, a_file, capsys, option):
    # the run directory does not even exist: the output is judged first, nothing is read in vain
    assert main(["report", str(tmp_path / "no-such-run"), option, str(a_file / "out")]) == 2
    _one_line_error(capsys.readouterr().err, option)
    assert main(["report", str(tmp_path / "no-such-run"), option, str(tmp_path)]) == 2  # a directory
    _one_line_error(capsys.readouterr().err, option)


def test_baseline_save_refuses_an_unwritable_store(tmp_path, a_file, capsys):
    assert main(["baseline", "save", str(tmp_path / "no-such-run"), "--name", "nightly",
                 "--baseline-store", str(a_file / "store")]) == 2
    _one_line_error(capsys.readouterr().err, "--baseline-store")
    assert main(["baseline", "save", str(tmp_path / "no-such-run"), "--name", "nightly", "--baseline-store", str(a_file)]) == 2
    _one_line_error(capsys.readouterr().err, "--baseline-store")


def test_baseline_compare_refuses_unwritable_outputs(tmp_path, a_file, capsys):
    for option in ("--json", "--markdown"):
        assert main(["baseline", "compare", str(tmp_path / "no-such-run"), "--name", "nightly",
                     "--baseline-store", str(tmp_path), option, str(a_file / "out")]) == 2
        _one_line_error(capsys.readouterr().err, option)


def test_history_refuses_an_unwritable_db_and_csv(tmp_path, a_file, capsys):
    assert main(["history", "add", str(tmp_path / "no-such-run"), "--history-db", str(a_file / "h.sqlite")]) == 2
    _one_line_error(capsys.readouterr().err, "--history-db")
    assert main(["history", "show", "--history-db", str(tmp_path / "none.sqlite"), "--csv", str(a_file / "x.csv")]) == 2
    _one_line_error(capsys.readouterr().err, "--csv")


def test_bisect_refuses_an_unwritable_out_before_loading(tmp_path, a_file, capsys, monkeypatch):
    import harness.judge.workspace as workspace

    def never(*_args, **_kwargs):
        raise AssertionError("a model was loaded for a run whose output cannot be written")

    monkeypatch.setattr(workspace.Workspace, "model", never)
    assert main(["bisect", "--models", "bert-tiny", "--precisions", "int8", "--out", str(a_file / "bisect")]) == 2
    _one_line_error(capsys.readouterr().err, "--out")


def test_check_refuses_an_unwritable_out_before_judging(tmp_path, a_file, capsys, monkeypatch):
    import harness.engine as engine

    monkeypatch.setattr(engine, "run_job", lambda *a, **k: pytest.fail("judged with nowhere to write"))
    assert main(["check", "--reference", "bert-tiny", "--onnx", str(tmp_path / "model.onnx"),
                 "--out", str(a_file / "check")]) == 2
    _one_line_error(capsys.readouterr().err, "--out")


def test_bench_refuses_unwritable_outputs(tmp_path, a_file, capsys):
    assert main(["bench", "--models", "bert-tiny", "--json", str(a_file / "bench.json")]) == 2
    _one_line_error(capsys.readouterr().err, "--json")


def test_no_cases_selected_is_an_error_on_stderr(tmp_path):
    done = _run_cli(tmp_path, "run", "--suites", str(_suite(tmp_path)), "--models", "bert-tiny", "--precisions",
                    "fp32", "--providers", "torch_cpu", "-k", "no_such_case", "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert "no cases selected" in done.stderr and "no cases selected" not in done.stdout
