"""The tail-fidelity scripts run end to end at a tiny size: every backend and engine gets its
rows, and the exit code is the one the table implies (timings themselves are never asserted)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    # not an xdist worker's environment: the script's own pytest session must own pytest-benchmark
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")} | {"OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], capture_output=True, text=True,
                          env=env, cwd=ROOT)


def test_bench_fidelity_prints_every_backend_engine_and_statistic(tmp_path):
    out = tmp_path / "fidelity.json"
    proc = _script("bench_fidelity.py", "--models", "encoder-custom", "--providers", "ort_cpu,torch_cpu",
                   "--rounds", "2", "--calls", "10", "--json", str(out))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert {(r["provider"], r["engine"], r["stat"]) for r in rows} == {
        (p, e, s) for p in ("ort_cpu", "torch_cpu") for e in ("harness", "pytest-benchmark") for s in ("p50", "p90", "p99")}
    inside = sum(r["inside"] for r in rows)
    assert f"{inside} of {len(rows)} intervals inside 0.97-1.03" in proc.stdout
    assert proc.returncode == (0 if inside == len(rows) else 1)  # green only when every interval is inside
    assert all(r["n"] == 20 for r in rows)
    # what the machine did is printed and stored per engine (preemptions, steal, slow calls)
    machine = json.loads(out.read_text())["machine"]
    assert [(m["model"], m["provider"]) for m in machine] == [("encoder-custom", "ort_cpu"), ("encoder-custom", "torch_cpu")]
    for m in machine:
        assert set(m["engines"]) == {"bare", "harness", "pytest-benchmark"}
        assert all(0.0 <= e["slow_share"] <= 1.0 and e["preemptions_per_s"] >= 0 for e in m["engines"].values())
    assert re.search(r"encoder-custom\s+ort_cpu\s+bare [0-9.]+/s, steal", proc.stdout)


def test_bench_fidelity_refuses_a_backend_without_a_bare_loop():
    proc = _script("bench_fidelity.py", "--providers", "trt_native")
    assert proc.returncode == 2 and "--providers: no bare loop for trt_native" in proc.stderr


def test_bench_tail_sources_prints_each_loop_and_the_first_calls_of_a_block():
    proc = _script("bench_tail_sources.py", "--rounds", "5", "--calls", "10")
    assert proc.returncode == 0, proc.stderr[-2000:]
    for loop in ("bare", "collect-then-time", "collect-freeze", "harness", "gc-off", "io-binding"):
        assert re.search(rf"^{loop}\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+\s+(\d+\.\d\d ?){{5}}$", proc.stdout, re.M), proc.stdout
    assert re.search(r"automatic collections inside bare's timed blocks: \d+", proc.stdout)
