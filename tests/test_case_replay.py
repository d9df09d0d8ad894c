"""A warm rerun replays finished cases (harness/plugins/replay.py): same verdicts, metrics and
evidence, without loading what judging needs -- and a changed input is judged again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--models", "bert-tiny", "--precisions", "fp32", "int8", "--providers", "ort_cpu", "--samples", "2"]


def harness_run(cwd: Path, out: str, *extra: str) -> tuple[int, list[dict], str]:
    """(exit code, records, modules loaded when it exited) of ``harness run`` in a fresh interpreter
    (``sys.modules`` at exit: ``-X importtime`` would miss what pytest's capture swallows)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    modules = cwd / f"{out}.modules"
    program = ("import atexit, sys\n"
               f"atexit.register(lambda: open({str(modules)!r}, 'w').write('\\n'.join(sorted(sys.modules))))\n"
               "from harness.cli import entrypoint\nentrypoint()")
    proc = subprocess.run([sys.executable, "-c", program, "run", "--out", out, *ARGS, *extra], cwd=cwd, env=env,
                          capture_output=True, text=True)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in (cwd / out / "results.jsonl").read_text().splitlines() if line.strip()]
    return proc.returncode, records, modules.read_text()


def by_id(records: list[dict]) -> dict[str, dict]:
    return {r["id"]: r for r in records}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, list[dict], str]]:
    """The same run twice (fp32 held to a bound it cannot meet, so one case fails a gate), then
    once more with another bound: the config's content is part of every case's key."""
    cwd = tmp_path_factory.mktemp("replay")
    (cwd / "harness.toml").write_text("[tolerances.fp32]\nnorm_max_abs = 1e-12\n")
    first = harness_run(cwd, "first")
    second = harness_run(cwd, "second")
    (cwd / "harness.toml").write_text("[tolerances.fp32]\nnorm_max_abs = 1e-11\n")
    changed = harness_run(cwd, "changed")
    return {"first": first, "second": second, "changed": changed, "cwd": cwd}  # type: ignore[dict-item]


def test_warm_rerun_replays_every_case_with_the_same_verdicts(runs):
    code1, first, _ = runs["first"]
    code2, second, imported = runs["second"]
    assert code1 == code2 == 1  # the fp32 case fails its bound both times
    a, b = by_id(first), by_id(second)
    assert sorted(a) == sorted(b) and len(b) == 2
    for case_id, record in b.items():
        assert record["data"].get("replayed_case"), f"{case_id} was judged again"
        assert (record["verdict"], record["reason"], record["metrics"], record["thresholds"]) == \
            (a[case_id]["verdict"], a[case_id]["reason"], a[case_id]["metrics"], a[case_id]["thresholds"])
        assert record["run_id"] != a[case_id]["run_id"]
    assert {r["verdict"] for r in b.values()} == {"pass", "fail"}
    # nothing of the judging machinery was loaded: no workspace, no runtime session, no tokenizer, no torch
    # (the families and zoo models are declared without it: harness.families.graph_modules)
    for module in ("harness.judge.workspace", "onnxruntime", "transformers", "tokenizers", "torch"):
        assert module not in imported.splitlines(), f"the warm rerun imported {module}"


def test_replayed_failure_brings_its_evidence_into_the_new_run(runs):
    cwd = runs["cwd"]
    _, second, _ = runs["second"]
    failed = next(r for r in second if r["verdict"] == "fail")
    case_dir = cwd / "second" / "cases" / failed["id"].replace(" ", "_")
    kept = sorted(p.relative_to(case_dir).as_posix() for p in case_dir.rglob("*") if p.is_file())
    original = cwd / "first" / "cases" / failed["id"].replace(" ", "_")
    assert kept and kept == sorted(p.relative_to(original).as_posix() for p in original.rglob("*") if p.is_file())
    assert str(cwd / "first") not in json.dumps(failed), "a replayed record points into the run it came from"


def test_a_changed_input_is_judged_again(runs):
    _, changed, imported = runs["changed"]
    assert not any(r["data"].get("replayed_case") for r in changed)
    for module in ("harness.judge.workspace", "torch"):  # negative control of the import check
        assert module in imported.splitlines(), f"a case judged afresh did not import {module}"
