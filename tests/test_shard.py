"""``harness run --shard K/N`` and ``harness merge``: the split is deterministic, complete and
balanced; merge refuses shards that do not form one run; and a real run split into 3 shards and
merged has the same case ids, verdicts and metrics as the unsplit run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.core import UsageError
from harness.results.rundir import read_results
from harness.shard.merge import MergeError, merge_shards
from harness.shard.plan import ShardSpec, assign, digest, write_shard_file


@pytest.mark.parametrize("text", ["3", "0/3", "4/3", "a/b", "1/0", "-1/2"])
def test_bad_shard_spec_is_one_line(text: str) -> None:
    with pytest.raises(UsageError, match="--shard: expected K/N"):
        ShardSpec.parse(text)


def test_split_is_complete_disjoint_deterministic_and_balanced() -> None:
    ids = [f"test_x[m{i}]" for i in range(40)]
    durations = {case: float(1 + (i * 7) % 13) for i, case in enumerate(ids)}
    shards, load = assign(reversed(ids), 3, durations)  # input order does not matter
    assert shards == assign(ids, 3, durations)[0]
    assert sorted(c for s in shards for c in s) == sorted(ids)
    assert max(load) - min(load) <= max(durations.values())  # LPT: within one case of each other
    by_count, _ = assign(ids, 3)
    assert sorted(len(s) for s in by_count) == [13, 13, 14]
    assert digest(ids, 3, durations) == digest(list(reversed(ids)), 3, durations) != digest(ids, 3, None)


def test_unknown_durations_take_the_median() -> None:
    shards, load = assign(["a", "b", "c", "d"], 2, {"a": 10.0, "b": 2.0})
    assert load == [12.0, 12.0] and shards == [["a", "b"], ["c", "d"]]  # c and d weigh median(10, 2) = 6


def _shard_dir(root: Path, k: int, n: int, ids: list[str], records: dict[str, dict[str, Any]], *,
               fingerprint: str = "f1", skip: set[str] = frozenset()) -> Path:  # type: ignore[assignment]
    path = root / f"shard{k}-{fingerprint}"
    write_shard_file(path, ShardSpec(k, n), ids, None, None)
    mine = json.loads((path / "shard.json").read_text())["cases"]
    lines = [json.dumps({**records[c], "run_id": f"r{k}", "env": {"fingerprint": fingerprint}}) + "\n"
             for c in mine if c not in skip]
    (path / "results.jsonl").write_text("".join(lines))
    return path


@pytest.fixture
def split(tmp_path: Path) -> tuple[list[str], dict[str, dict[str, Any]]]:
    ids = [f"test_logits_parity[m{i}-fp32-ort_cpu]" for i in range(7)]
    records = {c: {"schema": "harness.result/1", "id": c, "verdict": "pass", "metrics": {"a.b.cosine": 1.0}}
               for c in ids}
    return ids, records


def test_merge_combines_and_refuses(tmp_path: Path, split: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ids, records = split
    dirs = [_shard_dir(tmp_path, k, 3, ids, records) for k in (1, 2, 3)]
    merged = merge_shards(dirs)
    assert sorted(r.id for r in merged.records) == sorted(ids) and len({r.run_id for r in merged.records}) == 1
    assert {r.data["shard"]["index"] for r in merged.records} == {1, 2, 3}

    with pytest.raises(MergeError, match=r"missing shard\(s\) 3/3"):
        merge_shards(dirs[:2])
    with pytest.raises(MergeError, match="overlapping shards: 2/3 given twice"):
        merge_shards([*dirs, dirs[1]])
    other_env = _shard_dir(tmp_path, 3, 3, ids, records, fingerprint="f2")
    with pytest.raises(MergeError, match="mixed environments"):
        merge_shards([dirs[0], dirs[1], other_env])
    unfinished = _shard_dir(tmp_path / "u", 3, 3, ids, records, skip=set(ids))
    with pytest.raises(MergeError, match="did not finish"):
        merge_shards([dirs[0], dirs[1], unfinished])
    (tmp_path / "plain").mkdir()
    with pytest.raises(MergeError, match="not a shard run directory"):
        merge_shards([tmp_path / "plain"])
    other_split = tmp_path / "four"
    write_shard_file(other_split, ShardSpec(3, 3), [*ids, "test_logits_parity[extra]"], None, None)
    (other_split / "results.jsonl").write_text("")
    with pytest.raises(MergeError, match="different splits"):
        merge_shards([dirs[0], dirs[1], other_split])

    # the CLI: one line, exit 2; --force merges what there is and says what it overrode
    assert main(["merge", str(dirs[0]), str(dirs[1]), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing shard(s) 3/3" in err and "--force" in err
    assert main(["merge", str(dirs[0]), str(dirs[1]), "--force", "--out", str(tmp_path / "m")]) == 0
    meta = json.loads((tmp_path / "m" / "merge.json").read_text())
    assert meta["forced"] == ["missing shard(s) 3/3"]
    assert (tmp_path / "m" / "summary.md").is_file() and (tmp_path / "m" / "report.html").is_file()
    assert "<testsuites" in (tmp_path / "m" / "junit.xml").read_text()


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def test_three_shards_merged_equal_the_unsplit_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real pipeline on a small matrix (CI budget); the same check on the default run is in
    docs/sharding.md. Shard 2 and 3 are balanced by the unsplit run's durations."""
    monkeypatch.chdir(tmp_path)
    matrix = ["--models", "bert-tiny", "--precisions", "fp32", "int8", "--providers", "ort_cpu", "torch_cpu",
              "--samples", "8", "--batch-size", "4"]
    whole = tmp_path / "whole"
    assert main(["run", *matrix, "--out", str(whole)]) == 0
    shards = []
    for k in (1, 2, 3):
        out = tmp_path / f"shard{k}"
        assert main(["run", *matrix, "--shard", f"{k}/3", "--shard-durations", str(whole), "--out", str(out)]) == 0
        shards.append(str(out))
    assert main(["merge", *shards, "--out", str(tmp_path / "merged")]) == 0
    a = {r.id: r for r in read_results(whole)}
    b = {r.id: r for r in read_results(tmp_path / "merged")}
    assert len(a) == 4 and sorted(a) == sorted(b)
    assert {i: r.verdict for i, r in a.items()} == {i: r.verdict for i, r in b.items()}
    for case, record in a.items():
        assert sorted(record.metrics) == sorted(b[case].metrics)
        assert all(_same(v, b[case].metrics[k]) for k, v in record.metrics.items()), case
    sizes = [len(read_results(s)) for s in shards]
    assert sorted(sizes) == [1, 1, 2]


def test_shard_durations_needs_shard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--models", "bert-tiny", "--shard-durations", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "--shard-durations: has no effect without --shard" in capsys.readouterr().err
    assert main(["run", "--models", "bert-tiny", "--shard", "4/3", "--out", str(tmp_path / "o")]) == 2


def test_an_empty_shard_writes_empty_results_and_merges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """More shards than cases: the empty shard exits 0 with an empty results.jsonl, summary.md and
    junit.xml (CI's artifact steps and ``harness merge`` find them); a run that selected nothing
    at all stays a usage error, split or not."""
    monkeypatch.chdir(tmp_path)
    matrix = ["--models", "bert-tiny", "--precisions", "fp32", "--providers", "ort_cpu", "--samples", "4",
              "--batch-size", "4"]
    empty = tmp_path / "shard2"
    assert main(["run", *matrix, "-k", "logits_parity", "--shard", "2/2", "--out", str(empty)]) == 0
    assert "shard 2/2 was assigned none of the run's 1 case(s)" in capsys.readouterr().err
    assert (empty / "results.jsonl").read_text() == "" and read_results(empty) == []
    assert "**EMPTY SHARD**" in (empty / "summary.md").read_text()
    assert 'tests="0"' in (empty / "junit.xml").read_text()
    full = tmp_path / "shard1"
    assert main(["run", *matrix, "-k", "logits_parity", "--shard", "1/2", "--out", str(full)]) == 0
    assert main(["merge", str(full), str(empty), "--out", str(tmp_path / "merged")]) == 0
    merged = read_results(tmp_path / "merged")
    assert [r.id for r in merged] == [r.id for r in read_results(full)] and len(merged) == 1
    capsys.readouterr()
    assert main(["run", *matrix, "-k", "no_such_case", "--shard", "1/2", "--out", str(tmp_path / "none")]) == 2
    assert "no cases selected" in capsys.readouterr().err
    assert not (tmp_path / "none" / "results.jsonl").exists()
