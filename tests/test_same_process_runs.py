"""Two ``harness run``s in one process never collide, and a run that cannot collect still writes
its records and summary (docs/reliability.md, "Untrusted inputs"). Everything here runs in this
one process, as a notebook, a script or two tests on one pytest-xdist worker do."""

from __future__ import annotations

import json
from pathlib import Path

from harness.cli import main

SUITE = '''
import pytest


@pytest.mark.harness(families=["encoder"])
def test_{name}(variant, harness):
    assert variant.model == "bert-tiny"
'''


def _suite(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True)
    path = folder / "test_fixed_positions.py"
    path.write_text(SUITE.format(name=name))
    return path


def _run(out: Path, *suites: Path) -> int:
    return main(["run", "--suites", *map(str, suites), "--models", "bert-tiny", "--precisions", "fp32",
                 "--providers", "ort_cpu", "--out", str(out)])


def _ids(out: Path) -> list[str]:
    return [json.loads(line)["id"] for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]


def test_same_named_suites_from_two_folders_run_one_after_the_other_and_together(tmp_path: Path) -> None:
    first, second = _suite(tmp_path / "team-a", "first"), _suite(tmp_path / "team-b", "second")
    assert _run(tmp_path / "run-a", first) == 0
    assert _run(tmp_path / "run-b", second) == 0  # before: "import file mismatch", exit 1, no results.jsonl
    assert _ids(tmp_path / "run-b") == ["test_second[bert-tiny-fp32-ort_cpu]"]
    assert _run(tmp_path / "run-ab", first, second) == 0  # one run, both files of that basename
    assert sorted(_ids(tmp_path / "run-ab")) == ["test_first[bert-tiny-fp32-ort_cpu]",
                                                 "test_second[bert-tiny-fp32-ort_cpu]"]


def test_a_run_that_cannot_collect_still_writes_its_records_and_summary(tmp_path: Path) -> None:
    broken = tmp_path / "broken" / "test_broken.py"
    broken.parent.mkdir()
    broken.write_text("def test_x(:\n")
    out = tmp_path / "run"
    assert _run(out, broken) == 1
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["verdict"] == "error" and record["id"].endswith("test_broken.py")
    assert "could not collect" in record["reason"] and "SyntaxError: invalid syntax" in record["reason"]
    summary = (out / "summary.md").read_text()
    assert "**FAILED**" in summary and "could not collect" in summary
    assert "test_broken.py" in (out / "junit.xml").read_text()
