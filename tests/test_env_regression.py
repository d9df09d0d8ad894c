"""The default gate (``baseline compare --perf``) catches a slower runtime environment.

The candidate's run is recorded, and the gate runs, in an environment whose
``onnxruntime.InferenceSession.run`` is five times slower (a ``sitecustomize`` that busy-waits
after every call: invisible to the environment fingerprint, as a patched dependency or a thread
setting would be). Re-timing both artifacts in that environment finds them equal -- the paired
rows PASS, the negative control -- and the recorded runs, compared beside them with the canaries
(which the slowdown does not touch), are a REGRESSION: exit 1, and the row says the environment is
slower, not the artifact. The same recording in the plain environment (A/A) passes.

Why five times and 2000 calls: the toy graph takes ~0.03 ms a call, so a CI runner's other worker
moves its canary-adjusted level by up to 50 % between quarters of a 400-call run (level wander,
``harness.gate.judge._wander``); the gate then rightly says INCONCLUSIVE for a 3x change it cannot
bound (seen once in a fresh-clone CI run). 2000 calls make each quarter 20 segments, and 5x keeps
the lower bound past the threshold at any wander below 74 %. What is tested is the mechanism (the
recorded rows see what the paired re-timing cannot); its power on a +25 % change is measured by
``scripts/bench_gate_power.py --modes envslow`` (docs/perf-gate.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_baseline_paired import FAST, write_run
from tests.test_baseline_paired import cache as cache  # noqa: F401  (the export-cache fixture)
from tests.test_envpair import slow_sitecustomize
from tests.waiting import PATIENCE

ROOT = Path(__file__).resolve().parents[1]
#: the candidate's environment: ``InferenceSession.run`` five times slower (module docstring: why five)
SLOW = slow_sitecustomize(5)

#: what ``test_latency`` records of one metric, in whatever environment runs it: the toy graph timed
#: by the harness's loop through its runner (256 rows a call: ~0.1 ms, not the ~15 us whose calls a
#: busy machine preempts by the third), a canary block right before and right after, and one before
#: every segment of the calls (harness.perf.canary.Interleaved): the rows are canary-adjusted
RECORD = """
import json, sys
from pathlib import Path
from harness.gate.onnxpair import FileRuntime, synthetic_feeds
from harness.perf.canary import Canary, Interleaved
from harness.perf.loop import time_calls
from harness.perf.measure import latency_entry

model = Path(sys.argv[1])
feeds = synthetic_feeds(model, 1, 256, 0)
canary = Canary()
interleaved = Interleaved(canary)
with FileRuntime.named("ort_cpu", threads=1).open(model) as runner:
    call = runner.timed_call(feeds)
    canary.block()
    samples = interleaved.rounds(lambda n, warmup: time_calls(call, n, warmup))(2000, 20)
    canary.block()
entry = latency_entry(samples, warmup=20, engine="harness", graph="model", batch_size=1, seq_len=256,
                      canary=interleaved.entry(samples))
print(json.dumps({"latency_ms": entry, "canary_ms": canary.entry()}))
"""


def _environment(tmp_path: Path, slow: bool) -> dict[str, str]:
    """This interpreter with the harness on its path, and (``slow``) a sitecustomize before it."""
    site = tmp_path / ("env-slow" if slow else "env-plain")
    site.mkdir(exist_ok=True)
    if slow:
        (site / "sitecustomize.py").write_text(SLOW, encoding="utf-8")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "OMP_NUM_THREADS": "1"}


def _recorded(env: dict[str, str], model: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", RECORD, str(model)], env=env, capture_output=True, text=True,
                          timeout=PATIENCE)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _gate(env: dict[str, str], run_dir: Path, store: Path, out: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; raise SystemExit(entrypoint())",
                           "baseline", "compare", str(run_dir), "--name", "main", "--baseline-store", str(store), "--perf",
                           *FAST, "--json", str(out), *extra], env=env, capture_output=True, text=True,
                          timeout=PATIENCE)
    return done.returncode, json.loads(out.read_text()), done.stdout + done.stderr


def test_a_slower_runtime_environment_fails_the_default_gate_and_a_a_passes(tmp_path, cache):
    plain, slow = _environment(tmp_path, slow=False), _environment(tmp_path, slow=True)
    main = write_run(tmp_path / "main", cache, seq=256)  # builds the artifact; its timing is replaced below
    model = next(cache.root.iterdir()) / "model.onnx"
    store = tmp_path / "store"
    write_run(tmp_path / "main", cache, seq=256, timed=_recorded(plain, model))
    saved = subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; raise SystemExit(entrypoint())",
                            "baseline", "save", str(main), "--name", "main", "--baseline-store", str(store)], env=plain,
                           capture_output=True, text=True, timeout=PATIENCE)
    assert saved.returncode == 0, saved.stderr

    # A/A: the candidate recorded and judged in the same plain environment
    same = write_run(tmp_path / "same", cache, seq=256, timed=_recorded(plain, model))
    code, doc, out = _gate(plain, same, store, tmp_path / "aa.json")
    assert doc["mode"] == "paired" and doc["recorded_rows"], out
    assert code == 0 and not any(r["verdict"] == "REGRESSION" for r in doc["rows"] + doc["recorded_rows"]), out

    # the candidate recorded, and the gate run, in the slower environment
    slower = write_run(tmp_path / "slower", cache, seq=256, timed=_recorded(slow, model))
    code, doc, out = _gate(slow, slower, store, tmp_path / "env.json")
    paired = next(r for r in doc["rows"] if r["metric"] == "latency_ms.p50")
    recorded = next(r for r in doc["recorded_rows"] if r["metric"] == "latency_ms.p50")
    assert paired["verdict"] != "REGRESSION" and paired["ratio"] < 1.5, paired  # both artifacts slowed alike
    assert recorded["verdict"] == "REGRESSION" and recorded["ratio"] > 1.5, recorded
    assert "canary-adjusted" in recorded["reason"] and recorded["evidence"] == "two-runs", recorded
    assert "the candidate's environment (or its machine, beyond the canary) is slower" in recorded["reason"]
    assert code == 1 and "in the recorded runs beside the paired re-timing" in doc["headline"], out


def test_the_blessed_environment_paired_against_this_one_sees_the_slowdown_in_the_paired_rows(tmp_path, cache):
    """``--baseline-env``: the blessed artifact re-timed in the blessed (plain) environment, the
    candidate's in this job's slower one, by timing children alternating in blocks: the paired rows
    themselves are the REGRESSION now."""
    plain, slow = _environment(tmp_path, slow=False), _environment(tmp_path, slow=True)
    main = write_run(tmp_path / "main", cache, seq=256)
    store = tmp_path / "store"
    saved = subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; raise SystemExit(entrypoint())",
                            "baseline", "save", str(main), "--name", "main", "--baseline-store", str(store)], env=plain,
                           capture_output=True, text=True, timeout=PATIENCE)
    assert saved.returncode == 0, saved.stderr
    blessed = f"env PYTHONPATH={plain['PYTHONPATH']} {sys.executable}"
    code, doc, out = _gate(slow, write_run(tmp_path / "cand", cache, seq=256), store, tmp_path / "envs.json",
                           "--baseline-env", blessed)
    p50 = next(r for r in doc["rows"] if r["metric"] == "latency_ms.p50")
    assert "the blessed ones in the blessed environment" in doc["mode_reason"], out
    assert p50["verdict"] == "REGRESSION" and p50["ratio"] > 1.5 and "process pairs" in p50["reason"], p50
    assert code == 1


def test_baseline_env_rebuilds_the_recorded_runtime_or_says_nothing_differs(tmp_path, cache):
    from harness.results.envinfo import versions

    env = _environment(tmp_path, slow=False)
    here = versions()

    def bless(name: str, recorded: dict[str, str]) -> subprocess.CompletedProcess[str]:
        run_dir = write_run(tmp_path / name, cache, env={"fingerprint": "f", "versions": recorded})
        subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; raise SystemExit(entrypoint())",
                        "baseline", "save", str(run_dir), "--name", name, "--baseline-store", str(tmp_path / "store")],
                       env=env, check=True, capture_output=True, timeout=PATIENCE)
        return subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; raise SystemExit(entrypoint())",
                               "baseline", "env", "--name", name, "--baseline-store", str(tmp_path / "store"), "--dir",
                               str(tmp_path / f"env-{name}")], env=env, capture_output=True, text=True, timeout=PATIENCE)

    same = bless("same", {k: here[k] for k in ("python", "numpy", "onnxruntime")})
    assert same.returncode == 0 and same.stdout == "" and "nothing to rebuild" in same.stderr, same.stderr
    older = "1.31.1" if here["onnxruntime"] != "1.31.1" else "1.32.0"  # the versions the docs' environments use
    other = bless("other", {"python": here["python"], "onnxruntime": older})
    if other.returncode != 0 and "cannot install" in other.stderr and not os.environ.get("HARNESS_REQUIRE_INDEX"):
        pytest.skip(f"no package index to install onnxruntime=={older} from: {other.stderr.strip()[-200:]}")
    assert other.returncode == 0, other.stderr
    assert f"onnxruntime {here['onnxruntime']} here, {older} in the baseline" in other.stderr
    python = other.stdout.strip()
    got = subprocess.run([python, "-c", "import onnxruntime, numpy; print(onnxruntime.__version__)"],
                         capture_output=True, text=True, timeout=PATIENCE)
    assert got.stdout.strip() == older, got.stderr
