"""A full filesystem under ``--out`` or the cache (issue 25, items 1 and 3), on real full
filesystems: a tmpfs of a few MiB mounted for the test (root only; skipped elsewhere, with the
reason). Before: nothing was checked up front, a full disk surfaced as 85 ``INTERNALERROR>``
lines and 0 records after the work, or a 66-line traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def small_fs(tmp_path):
    """``make(size)``: a fresh tmpfs of ``size`` mounted under tmp_path (unmounted afterwards)."""
    mounts: list[Path] = []

    def make(size: str) -> Path:
        point = tmp_path / f"fs{len(mounts)}"
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN): {done.stderr.strip()[:200]}")
        mounts.append(point)
        return point

    yield make
    for point in mounts:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def _harness(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {}),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; entrypoint()", *args],
                          capture_output=True, text=True, cwd=cwd, env=env)


RUN = ["--models", "bert-tiny", "--precisions", "fp32", "--providers", "torch_cpu"]


def test_a_nearly_full_out_is_refused_before_any_work(small_fs, tmp_path):
    fs = small_fs("1m")
    proc = _harness("run", *RUN, "--out", str(fs / "run"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"harness: error: --out {fs / 'run'}: only ") and "free" in line and "needs about" in line
    assert not (fs / "run").exists()


def test_a_full_or_read_only_cache_is_one_line_before_work(small_fs, tmp_path):
    full = small_fs("1m")
    proc = _harness("run", *RUN, "--out", str(tmp_path / "run"), cwd=tmp_path,
                    env={"HARNESS_CACHE": str(full / "cache")})
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"harness: error: HARNESS_CACHE {full / 'cache'}: only ") and "the cache" in line
    read_only = small_fs("8m")
    subprocess.run(["mount", "-o", "remount,ro", str(read_only)], check=True)
    proc = _harness("run", *RUN, "--cache", str(read_only / "cache"), "--out", str(tmp_path / "run2"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"harness: error: --cache {read_only / 'cache'}: not writable (Read-only file system)")
    assert not (tmp_path / "run").exists() and not (tmp_path / "run2").exists()


def test_a_read_only_cache_that_holds_every_model_keeps_working(tmp_path):
    """The negative control: a warmed cache mounted read-only still runs (chmod does not bind
    root, so a read-only bind mount of a warmed cache)."""
    cache = tmp_path / "warm"
    warm = _harness("run", *RUN, "--cache", str(cache), "--out", str(tmp_path / "first"), cwd=tmp_path)
    assert warm.returncode == 0, warm.stdout[-2000:] + warm.stderr[-2000:]
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "--bind", "-o", "ro", str(cache), str(ro)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount read-only here (needs root / CAP_SYS_ADMIN)")
    try:
        proc = _harness("run", *RUN, "--cache", str(ro), "--out", str(tmp_path / "second"), cwd=tmp_path)
    finally:
        subprocess.run(["umount", "-l", str(ro)], capture_output=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


FILLER = '''
import os
import pathlib


def test_1_first(variant, harness):
    harness.metrics["done"] = 1.0


def test_2_fills_the_disk(variant, harness):
    """Another writer fills the run directory's filesystem, as a job beside it would."""
    filler = pathlib.Path(os.environ["FILL_DIR"]) / "filler.bin"
    with filler.open("wb") as fh:
        try:
            while True:
                fh.write(b"x" * 65536)
                fh.flush()
        except OSError:
            pass
    harness.metrics["done"] = 1.0


def test_3_never_runs(variant, harness):
    harness.metrics["done"] = 1.0
'''


def test_the_disk_filling_up_mid_run_keeps_the_records_and_says_so(small_fs, tmp_path):
    fs = small_fs("72m")  # above the up-front floor (64 MiB), then filled by the second case
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_fill.py").write_text(FILLER)
    out = fs / "run"
    proc = _harness("run", "--suites", str(suites), *RUN, "--out", str(out), cwd=tmp_path,
                    env={"FILL_DIR": str(fs)})
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text[-4000:]
    assert "INTERNALERROR" not in text and "Traceback" not in text
    errors = [line for line in proc.stderr.splitlines() if line.startswith("harness: error:")]
    assert len(errors) == 1 and str(out / "results.jsonl") in errors[0] and "no space left on device" in errors[0]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]  # every line intact
    assert [r["id"].split("[")[0] for r in records] == ["test_1_first", "test_2_fills_the_disk"]
    summary = (out / "summary.md").read_text()
    assert "**STOPPED**" in summary and "no space left on device" in summary and "PASSED" not in summary
    assert "1 case(s) not run" in summary and "0 record(s) lost" in summary
    assert not (out / ".harness-reserve").exists()
