"""The history store (``harness.results.history``) and ``harness history add|show|list`` on three
synthetic nightly runs written here."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.cli import main
from harness.core import UsageError
from harness.results import history

ENV = {"fingerprint": "f00d", "cpu": "Test CPU", "cores": 2}
VARIANTS = ("bert-fp32-ort_cpu", "bert-int8-ort_cpu")
P50 = {  # night -> variant -> p50 latency (ms)
    1: {"bert-fp32-ort_cpu": 2.0, "bert-int8-ort_cpu": 1.0},
    2: {"bert-fp32-ort_cpu": 2.2, "bert-int8-ort_cpu": 1.0},
    3: {"bert-fp32-ort_cpu": 3.0, "bert-int8-ort_cpu": 0.5},
}


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "220")


def night(root: Path, n: int) -> Path:
    """Run directory of night ``n``: a parity case and a perf case per variant."""
    records: list[dict[str, Any]] = []
    for variant in VARIANTS:
        common = {"schema": "harness.result/1", "run_id": f"night{n}", "variant": variant, "env": ENV,
                  "finished": f"2026-01-0{n}T02:00:00+0000", "harness_version": "0.1.0"}
        records.append({**common, "id": f"test_logits_parity[{variant}]", "suite": "test_logits_parity",
                        "verdict": "pass" if n < 3 else "fail", "reason": "" if n < 3 else "too far\ndetail",
                        "metrics": {"model.logits.max_abs": 0.001 * n, "nan_metric": float("nan")}})
        records.append({**common, "id": f"test_latency[{variant}]", "suite": "test_perf", "verdict": "pass",
                        "metrics": {}, "perf": {"latency_ms": {"samples": [1.0] * 3,
                                                               "summary": {"p50": P50[n][variant], "p90": 5.0}},
                                                "peak_rss_bytes": 1000 * n}})
    run = root / f"nightly-{n}"
    run.mkdir(parents=True)
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return run


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    db = tmp_path / "hist" / "history.sqlite"  # parent does not exist yet: add creates it
    for n in (1, 2, 3):
        history.ingest(night(tmp_path, n), db)
    return db


def count(db: Path, table: str) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_ingest_is_idempotent_per_run_id(tmp_path: Path, stored: Path) -> None:
    before = {t: count(stored, t) for t in ("runs", "cases", "metric_values")}
    assert before == {"runs": 3, "cases": 12, "metric_values": 3 * 2 * (2 + 3)}
    again = history.ingest(tmp_path / "nightly-2", stored)
    assert [(i.run_id, i.added) for i in again] == [("night2", False)]
    assert {t: count(stored, t) for t in before} == before


def test_ingest_stores_verdicts_and_nan_as_null(stored: Path) -> None:
    with sqlite3.connect(stored) as conn:
        verdicts = conn.execute("SELECT run_id, verdict, reason FROM cases WHERE suite = 'test_logits_parity'"
                                " ORDER BY run_id").fetchall()
        nan = conn.execute("SELECT value FROM metric_values WHERE metric = 'metric:nan_metric'").fetchall()
    assert verdicts[-1] == ("night3", "fail", "too far")
    assert nan and all(v == (None,) for v in nan)


def test_trend_shape_and_values(stored: Path) -> None:
    wide = history.trend(stored, metric_glob="perf:latency_ms.p50")
    assert wide.shape == (3, 2)
    assert list(wide.index.get_level_values("run_id")) == ["night1", "night2", "night3"]
    assert wide[("bert-fp32-ort_cpu", "perf:latency_ms.p50")].tolist() == [2.0, 2.2, 3.0]
    assert wide[("bert-int8-ort_cpu", "perf:latency_ms.p50")].tolist() == [1.0, 1.0, 0.5]

    one = history.trend(stored, variant="bert-int8-ort_cpu", metric_glob="perf:*", last=2)
    assert one.shape == (2, 3)  # p50, p90, peak_rss_bytes
    assert list(one.index.get_level_values("run_id")) == ["night2", "night3"]
    assert one[("bert-int8-ort_cpu", "perf:peak_rss_bytes")].tolist() == [2000.0, 3000.0]


def test_trend_of_nan_only_metric_is_empty_and_show_still_works(stored: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert history.trend(stored, metric_glob="metric:nan_metric").empty
    # it still renders, and says it compared nothing (exit 1: "nothing compared" is never OK)
    assert main(["history", "show", "--metric", "metric:nan_metric", "--history-db", str(stored)]) == 1
    out = capsys.readouterr().out
    assert "night1" not in out and "nothing compared (0 series with 2 or more runs)" in out


def test_show_ends_with_what_moved_in_the_newest_run(stored: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Under the table, one line a nightly log can show alone: the series compared, how many moved
    10 % or more in the newest run against the one before, the largest named. A single stored run
    compares nothing: its verdict line names the series as too short, not as a candidate's gaps."""
    assert main(["history", "show", "--metric", "perf:latency_ms.p50", "--history-db", str(stored)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    # night 3 against night 2: fp32 2.2 -> 3.0 ms (+36.4 %), int8 1.0 -> 0.5 ms (-50 %)
    assert last == ("2 series of metric 'perf:latency_ms.p50' over 3 run(s): 2 moved by 10% or more in the "
                    "newest run against the one before (the most: bert-int8-ort_cpu perf:latency_ms.p50 -50.0%)"), last
    one = tmp_path / "one.sqlite"
    history.ingest(night(tmp_path / "alone", 1), one)
    assert main(["history", "show", "--metric", "perf:latency_ms.p50", "--allow-missing", "--history-db", str(one)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("OK: 2 series") and "--allow-missing: nothing compared" in last, last
    assert "with fewer than 2 runs: bert-fp32-ort_cpu perf:latency_ms.p50" in last and "candidate" not in last, last


def test_changes_vs_previous_and_median() -> None:
    found = history.changes(pd.Series([2.0, 2.2, 3.0]))
    assert found["vs_previous"].round(6).tolist()[1:] == [0.1, round(3.0 / 2.2 - 1, 6)]
    assert pd.isna(found["vs_previous"].iloc[0])
    assert found["vs_median"].round(6).tolist() == [round(2 / 2.2 - 1, 6), 0.0, round(3 / 2.2 - 1, 6)]


def test_trend_unknown_variant_and_metric_suggest(stored: Path) -> None:
    with pytest.raises(UsageError, match=r"unknown variant 'bert-fp32-ort_cp'.*did you mean 'bert-fp32-ort_cpu'"):
        history.trend(stored, variant="bert-fp32-ort_cp")
    with pytest.raises(UsageError, match=r"did you mean 'perf:latency_ms.p50'"):
        history.trend(stored, metric_glob="perf:latency_ms.p5O")


def test_cli_add_show_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    runs = [str(night(tmp_path, n)) for n in (1, 2, 3)]
    assert main(["history", "add", *runs, "--history-db", str(db)]) == 0
    assert capsys.readouterr().out.count("added run") == 3
    assert main(["history", "add", runs[0], "--history-db", str(db)]) == 0
    assert "already stored" in capsys.readouterr().out

    csv = tmp_path / "out" / "trend.csv"
    assert main(["history", "show", "--history-db", str(db), "--variant", "bert-fp32-ort_cpu",
                 "--metric", "perf:latency_ms.p50", "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "night3" in out and "+36.4%" in out and "+10.0%" in out  # 3.0 vs 2.2 (previous and median)
    rows = pd.read_csv(csv)
    assert rows["value"].tolist() == [2.0, 2.2, 3.0]
    assert rows["run_id"].tolist() == ["night1", "night2", "night3"]

    assert main(["history", "list", "--history-db", str(db)]) == 0
    listing = capsys.readouterr().out
    assert all(f"night{n}" in listing for n in (1, 2, 3))


@pytest.mark.parametrize("argv, message", [
    (["history", "show", "--variant", "bert-fp32-ort_cp"], "did you mean 'bert-fp32-ort_cpu'"),
    (["history", "show", "--metric", "nope:*"], "no stored metric matches 'nope:*'"),
    (["history", "show", "--last", "0"], "--last: must be >= 1, got 0"),
])
def test_cli_show_usage_errors(stored: Path, argv: list[str], message: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--history-db", str(stored)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: error: ") and err.count("\n") == 1 and message in err


def test_cli_bad_db_paths(tmp_path: Path, stored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    typo = stored.with_name("history.sqlit")
    assert main(["history", "list", "--history-db", str(typo)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"did you mean '{stored}'" in err and not typo.exists()

    assert main(["history", "show", "--history-db", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err

    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database " * 100)
    assert main(["history", "add", str(tmp_path / "nightly-1"), "--history-db", str(junk)]) == 2
    err = capsys.readouterr().err
    assert "not a usable history database" in err and err.count("\n") == 1


def test_cli_add_bad_run_dir_still_adds_the_good_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    good = night(tmp_path, 1)
    assert main(["history", "add", str(tmp_path / "missing"), str(good), "--history-db", str(db)]) == 2
    out, err = capsys.readouterr()
    assert "added run night1" in out and count(db, "runs") == 1
    assert err.startswith("harness: error: 1 of 2 run directories not added: run directory not found")
    assert err.count("\n") == 1
