"""``harness baseline save|compare|list`` end to end on run directories written here.

The parser is built from ``harness.cli.baseline.register`` alone and errors are mapped
the way ``harness.cli.main`` maps them (UsageError -> one line, exit 2), so these tests
do not depend on the rest of the CLI.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.cli import baseline as cli
from harness.core import UsageError
from tests.perf_records import measured_processes

ENV = {"fingerprint": "f00d", "cpu": "Test CPU", "cores": 2, "versions": {"onnxruntime": "1.20.0"}}


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables are asserted on by column text; other tests (pytester) may leave a narrow COLUMNS."""
    monkeypatch.setenv("COLUMNS", "200")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Parse and dispatch like harness.cli.main; returns (exit code, stdout, stderr)."""
    parser = argparse.ArgumentParser(prog="harness")
    cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except UsageError as exc:
        message = str(exc)
        assert "\n" not in message, f"error message must be one line: {message!r}"
        print(f"harness: error: {message}", file=sys.stderr)
        code = 2
    out, err = capsys.readouterr()
    return code, out, err


def write_run(path: Path, *, scale: float = 1.0, seed: int = 0, env: dict[str, Any] | None = None,
              rss: int = 600 * 2**20) -> Path:
    rng = np.random.default_rng(seed)
    records = [
        {"schema": "harness.result/1", "id": "test_accuracy[enc-fp32-ort_cpu]", "variant": "enc-fp32-ort_cpu",
         "suite": "accuracy", "verdict": "pass", "metrics": {"cosine": 0.9999}, "env": env or ENV},
    ]
    for variant in ("enc-fp32-ort_cpu", "enc-int8-ort_cpu"):
        samples = (1.5 * scale * rng.lognormal(0, 0.08, 600)).tolist()
        records.append({
            "schema": "harness.result/1", "id": f"test_latency[{variant}]", "variant": variant, "suite": "perf",
            "verdict": "pass", "metrics": {}, "env": env or ENV,
            "perf": {"latency_ms": {"samples": samples, "warmup": 20, "summary": {}}, "peak_rss_bytes": rss,
                     "baseline_rss_bytes": 300 * 2**20, "artifact_bytes": 4_000_000, "throughput": 600.0,
                     "cold_start_ms": {"load": 80.0, "first_inference": 4.0},
                     "cold_start_runs": measured_processes()},
        })
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "baselines"


def test_save_copies_only_perf_records_with_metadata(tmp_path: Path, store: Path, capsys) -> None:
    run_dir = write_run(tmp_path / "run1")
    code, out, _ = run(["baseline", "save", str(run_dir), "--name", "nightly", "--baseline-store", str(store)], capsys)
    assert code == 0 and "nightly" in out
    saved = [json.loads(line) for line in (store / "nightly" / "results.jsonl").read_text().splitlines()]
    # the perf records, and (issue 17) the accuracy record next to them for the accuracy gate
    assert len(saved) == 3 and sum("perf" in r for r in saved) == 2
    assert [r["id"] for r in saved if "perf" not in r] == ["test_accuracy[enc-fp32-ort_cpu]"]
    meta = json.loads((store / "nightly" / "baseline.json").read_text())
    assert meta["fingerprint"] == "f00d" and meta["records"] == 3
    assert meta["perf_records"] == 2 and meta["accuracy_records"] == 1
    assert meta["source"] == str(run_dir.resolve()) and meta["harness_version"] and meta["created"]


def test_save_refuses_to_overwrite_without_force(tmp_path: Path, store: Path, capsys) -> None:
    run_dir = write_run(tmp_path / "run1")
    argv = ["baseline", "save", str(run_dir), "--name", "main", "--baseline-store", str(store)]
    assert run(argv, capsys)[0] == 0
    code, _, err = run(argv, capsys)
    assert code == 2 and "already exists" in err and "--baseline-force" in err
    write_run(tmp_path / "run1", rss=700 * 2**20)
    assert run(argv + ["--baseline-force"], capsys)[0] == 0
    saved = [json.loads(line) for line in (store / "main" / "results.jsonl").read_text().splitlines()]
    assert next(r for r in saved if "perf" in r)["perf"]["peak_rss_bytes"] == 700 * 2**20
    assert sorted(p.name for p in store.iterdir()) == ["main"]  # no temporary leftovers


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "", "spaces here"])
def test_save_rejects_unsafe_names(tmp_path: Path, store: Path, name: str, capsys) -> None:
    run_dir = write_run(tmp_path / "run1")
    code, _, err = run(["baseline", "save", str(run_dir), "--name", name, "--baseline-store", str(store)], capsys)
    assert code == 2 and "invalid baseline name" in err
    assert not (tmp_path / "escape").exists()


def test_compare_same_run_passes_and_slow_run_fails(tmp_path: Path, store: Path, capsys) -> None:
    run(["baseline", "save", str(write_run(tmp_path / "base")), "--name", "b", "--baseline-store", str(store)], capsys)
    same = write_run(tmp_path / "same", seed=1)
    code, out, _ = run(["baseline", "compare", str(same), "--name", "b", "--baseline-store", str(store)], capsys)
    assert code == 0 and "OK" in out and "latency_ms.p50" in out

    slow = write_run(tmp_path / "slow", scale=1.3, seed=2)
    js, md = tmp_path / "out" / "cmp.json", tmp_path / "out" / "cmp.md"
    code, out, _ = run(["baseline", "compare", str(slow), "--name", "b", "--baseline-store", str(store),
                        "--json", str(js), "--markdown", str(md)], capsys)
    assert code == 1 and "REGRESSION" in out
    data = json.loads(js.read_text())
    assert data["exit_code"] == 1
    assert {r["variant"] for r in data["rows"] if r["verdict"] == "REGRESSION"} == {"enc-fp32-ort_cpu", "enc-int8-ort_cpu"}
    assert md.read_text().startswith("**FAIL")


def test_threshold_option_loosens_the_gate(tmp_path: Path, store: Path, capsys) -> None:
    run(["baseline", "save", str(write_run(tmp_path / "base")), "--name", "b", "--baseline-store", str(store)], capsys)
    slow = str(write_run(tmp_path / "slow", scale=1.3, seed=2))
    loose = [f"--baseline-threshold={m}=40%" for m in ("p50", "p90", "p95")]
    code, out, _ = run(["baseline", "compare", slow, "--name", "b", "--baseline-store", str(store), *loose], capsys)
    assert code == 0 and "below the +40% threshold" in out
    code, _, err = run(["baseline", "compare", slow, "--name", "b",
                       "--baseline-store", str(store), "--baseline-threshold", "p500=1%"], capsys)
    assert code == 2 and "did you mean 'p50'" in err


def test_compare_refuses_other_environment_unless_forced(tmp_path: Path, store: Path, capsys) -> None:
    run(["baseline", "save", str(write_run(tmp_path / "base")), "--name", "b", "--baseline-store", str(store)], capsys)
    other = write_run(tmp_path / "other", seed=1, env={**ENV, "fingerprint": "beef", "cores": 16})
    code, _, err = run(["baseline", "compare", str(other), "--name", "b", "--baseline-store", str(store)], capsys)
    assert code == 2 and "cores: 2 -> 16" in err and "--baseline-force-env" in err
    code, out, _ = run(["baseline", "compare", str(other), "--name", "b",
                       "--baseline-store", str(store), "--baseline-force-env"], capsys)
    assert code == 0 and "environment forced" in out


def test_unknown_baseline_suggests_a_name(tmp_path: Path, store: Path, capsys) -> None:
    run(["baseline", "save", str(write_run(tmp_path / "base")), "--name", "nightly", "--baseline-store", str(store)], capsys)
    code, _, err = run(["baseline", "compare", str(tmp_path / "base"), "--name", "nightyl",
                       "--baseline-store", str(store)], capsys)
    assert code == 2 and "unknown baseline 'nightyl'" in err and "did you mean 'nightly'" in err


def test_list_shows_saved_baselines(tmp_path: Path, store: Path, capsys) -> None:
    code, out, _ = run(["baseline", "list", "--baseline-store", str(store)], capsys)
    assert code == 0 and "no baselines" in out
    run_dir = write_run(tmp_path / "base")
    for name in ("alpha", "beta"):
        run(["baseline", "save", str(run_dir), "--name", name, "--baseline-store", str(store)], capsys)
    code, out, _ = run(["baseline", "list", "--baseline-store", str(store)], capsys)
    assert code == 0 and "alpha" in out and "beta" in out and "f00d" in out


def test_missing_run_dir_is_one_line_error(tmp_path: Path, store: Path, capsys) -> None:
    code, out, err = run(["baseline", "save", str(tmp_path / "nope"), "--name", "x", "--baseline-store", str(store)], capsys)
    assert code == 2
    assert err.strip() == f"harness: error: run directory not found: {tmp_path / 'nope'}"
    assert "Traceback" not in out + err


def test_run_dir_without_results_is_explained(tmp_path: Path, store: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    code, _, err = run(["baseline", "save", str(tmp_path / "empty"), "--name", "x", "--baseline-store", str(store)], capsys)
    assert code == 2 and "no results.jsonl" in err


def test_corrupt_results_line_is_reported_by_number(tmp_path: Path, store: Path, capsys) -> None:
    run_dir = write_run(tmp_path / "run")
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    lines[1] = lines[1][: len(lines[1]) // 2]  # a record cut off mid-write
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    code, out, err = run(["baseline", "save", str(run_dir), "--name", "x", "--baseline-store", str(store)], capsys)
    assert code == 2 and "results.jsonl:2:" in err and "corrupt JSON" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
    assert not (store / "x").exists()


def test_run_without_perf_records_is_refused(tmp_path: Path, store: Path, capsys) -> None:
    run_dir = tmp_path / "acc"
    run_dir.mkdir()
    (run_dir / "results.jsonl").write_text(json.dumps({"id": "t[a]", "variant": "a", "verdict": "pass"}) + "\n")
    code, _, err = run(["baseline", "save", str(run_dir), "--name", "x", "--baseline-store", str(store)], capsys)
    assert code == 2 and "no performance records" in err


def test_real_entry_point_maps_errors_and_exit_codes(tmp_path: Path, store: Path, capsys) -> None:
    from harness.cli import main

    assert main(["baseline", "save", str(tmp_path / "nope"), "--name", "x", "--baseline-store", str(store)]) == 2
    assert capsys.readouterr().err.strip() == f"harness: error: run directory not found: {tmp_path / 'nope'}"
    assert main(["baseline", "save", str(write_run(tmp_path / "b")), "--name", "x", "--baseline-store", str(store)]) == 0
    assert main(["baseline", "compare", str(write_run(tmp_path / "s", scale=1.3, seed=3)), "--name", "x",
                 "--baseline-store", str(store)]) == 1


def test_name_is_required(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        run(["baseline", "save", str(tmp_path)], capsys)
    assert info.value.code == 2
