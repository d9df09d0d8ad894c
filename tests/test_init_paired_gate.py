"""The workflow `harness init` writes gates a pull request's performance paired: its commands
(the steps' `run:` scripts, without GitHub) run end to end on a team's tiny model.

A push to main runs the gate with timings and blesses it (`baseline save --keep-artifacts`);
a pull request runs the gate and `baseline compare --perf`. The A/A pull request (nothing changed)
must not be flagged; a pull request that makes the model four times deeper (real extra layers in
the exported graph, a fresh job: the run directory gone, the caches restored) must fail on
latency; both comparisons say they were paired.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from harness.cli import main
from harness.zoo.base import materialize, resolve
from tests.waiting import PATIENCE

ROOT = Path(__file__).resolve().parents[1]
#: a cheap matrix: one variant on one thread (harness.toml), a short latency case and one fresh
#: process (the perf options are command-line ones: PYTEST_ADDOPTS, which a workflow's env may set too)
RUN_SETTINGS = "threads = 1\n"
ADDOPTS = "--harness-perf-samples 200 --harness-perf-warmup 10 --harness-perf-repeats 1 --harness-perf-tail-seconds 0"


def _steps(repo: Path) -> dict[str, dict[str, Any]]:
    workflow = yaml.safe_load((repo / ".github" / "workflows" / "model-harness.yml").read_text())
    return {step["name"].split(" (")[0]: step for step in workflow["jobs"]["gate"]["steps"] if "name" in step}


def _run_step(step: dict[str, Any], repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A step's script as the runner runs it (`bash -e`), in the repository, on this tree's harness."""
    return subprocess.run(["bash", "-e", "-c", step["run"]], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=PATIENCE)


def _deepen(model_dir: Path, factor: int) -> None:
    """The pull request's change: the same model, ``factor`` x the encoder layers (copies of its own)."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    layers = model.config.num_hidden_layers
    model.config.num_hidden_layers = layers * factor
    deeper = type(model)(model.config)
    state = model.state_dict()
    pattern = re.compile(r"(.*encoder\.layer\.)(\d+)(\..*)")

    def source(key: str) -> str:
        m = pattern.fullmatch(key)
        return f"{m[1]}{int(m[2]) % layers}{m[3]}" if m else key

    deeper.load_state_dict({key: state[source(key)] for key in deeper.state_dict()})
    deeper.save_pretrained(model_dir)


def test_the_scaffolded_pr_gate_is_paired_passes_a_a_and_fails_a_real_slowdown(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    shutil.copytree(materialize(resolve("bert-tiny")), repo / "models" / "intent")
    monkeypatch.chdir(repo)
    assert main(["init", "models/intent", "--precisions", "fp32", "--providers", "ort_cpu"]) == 0
    config = repo / "harness.toml"
    text = re.sub(r"(?m)^samples = \d+$", "samples = 8", config.read_text())
    config.write_text(text.replace("[run]\n", "[run]\n" + RUN_SETTINGS, 1))
    steps = _steps(repo)
    gate, compare, bless = steps["Gate"], steps["Performance vs main, paired"], steps["Bless this run as the baseline of main"]
    assert "--perf" in gate["run"] and "--keep-artifacts" in bless["run"] and "--perf" in compare["run"]
    assert compare["if"] == "github.event_name == 'pull_request'" and "refs/heads/main" in bless["if"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PYTEST_ADDOPTS": ADDOPTS}
    env.pop("GITHUB_STEP_SUMMARY", None)

    # no baseline yet: the pull request is told, not failed
    first = _run_step(compare, repo, env)
    assert first.returncode == 0 and "no blessed baseline of main yet" in first.stdout

    # push to main: gate, then bless
    for step in (gate, bless):
        done = _run_step(step, repo, env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "kept 1 artifact file(s)" in done.stdout
    assert (repo / ".harness-baseline" / "main" / "artifacts").is_dir()
    add_to_history = steps["Add this run to the run history"]
    added = _run_step(add_to_history, repo, env)
    assert added.returncode == 0 and "added run" in added.stdout, added.stdout + added.stderr
    store = repo / steps["Save the run history"]["with"]["path"]
    assert store.is_file()

    def pull_request(*, fresh: bool) -> tuple[int, dict[str, Any], str]:
        if fresh:  # a new job: its own gate run; the model cache, the baseline and the run history restored
            kept = store.read_bytes()
            shutil.rmtree(repo / "reports", ignore_errors=True)
            store.parent.mkdir(parents=True)
            store.write_bytes(kept)
            ran = _run_step(gate, repo, env)
            assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
            assert _run_step(add_to_history, repo, env).returncode == 0
        judged = _run_step(compare, repo, env)
        doc = json.loads((repo / "reports" / "gate" / "perf-vs-baseline.json").read_text())
        assert "paired: 1 variant(s)" in (repo / "reports" / "gate" / "perf-vs-baseline.md").read_text()
        return judged.returncode, doc, judged.stdout + judged.stderr

    # A/A: the pull request changed nothing (its run is the blessed one: the same bytes re-timed
    # against the kept copy; a second identical gate run would cost a minute and show nothing more)
    code, doc, out = pull_request(fresh=False)
    latency = [r for r in doc["rows"] if r["kind"] == "latency"]
    assert doc["mode"] == "paired" and doc["mode_reason"].startswith("paired: 1 variant(s) re-timed interleaved"), out
    assert latency and all(r["reason"].startswith("paired") for r in latency)
    assert code == 0 and not any(r["verdict"] == "REGRESSION" for r in latency), out

    _deepen(repo / "models" / "intent", factor=4)
    code, doc, out = pull_request(fresh=True)  # the model got four times deeper
    p50 = next(r for r in doc["rows"] if r["metric"] == "latency_ms.p50")
    assert doc["mode"] == "paired" and code == 1, out
    assert p50["verdict"] == "REGRESSION" and p50["ratio"] > 1.5, p50

    # the history carried both jobs' runs: what the next job's ETA reads as its durations, and
    # what the nightly step plots (its table beside the report, its verdict line in the log)
    from harness.results.history import run_durations

    gate_cases = {json.loads(line)["id"] for line in (repo / "reports" / "gate" / "results.jsonl").open()}
    stored = run_durations(str(store), 8)
    assert len(stored) == 2 and all(gate_cases <= set(durations) for durations in stored), stored
    (repo / "reports" / "nightly").mkdir()
    trends = _run_step(steps["Trends of the nightly runs"], repo, env)
    assert trends.returncode == 0, trends.stdout + trends.stderr
    assert len(trends.stdout.splitlines()) == 1, trends.stdout
    assert re.match(r"\d+ series of metric 'perf:latency_ms\*\.p50' over 2 run\(s\): \d+ moved", trends.stdout), trends.stdout
    assert "<svg" in (repo / "reports" / "nightly" / "trends.html").read_text()  # the plots
