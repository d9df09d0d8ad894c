"""``records_frame`` and its CSV/HTML renderers, and ``harness report`` end to end, on
synthetic results.jsonl files written here."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.cli import main
from harness.report.tables import BASE_COLUMNS, VERDICT_COLOURS, records_frame, to_csv, to_html

ENV = {"fingerprint": "f00d", "cpu": "Test CPU", "cores": 2, "versions": {"onnxruntime": "1.20.0"}}


def record(case: str, variant: str, verdict: str = "pass", **extra: Any) -> dict[str, Any]:
    model, precision, provider = variant.rsplit("-", 2)
    base = {"schema": "harness.result/1", "id": f"{case}[{variant}]", "run_id": "run1", "suite": case,
            "variant": variant, "model": model, "precision": precision, "backend": "onnxruntime",
            "provider": provider, "verdict": verdict, "reason": "", "metrics": {}, "env": ENV,
            "duration_s": 1.25, "finished": "2026-01-01T00:00:00+0000"}
    base.update(extra)
    return base


def sample_records() -> list[dict[str, Any]]:
    return [
        record("test_logits_parity", "bert-fp32-ort_cpu", metrics={"model.logits.max_abs": 1e-6, "flag": True}),
        record("test_logits_parity", "bert-int8-ort_cpu", "fail",
               reason="model.logits.max_abs 0.5 > 0.1 <script>alert(1)</script>\nsecond line",
               metrics={"model.logits.max_abs": 0.5, "model.logits.top1_agreement": 0.97}),
        record("test_perf", "bert-fp32-ort_cpu", perf={
            "latency_ms": {"samples": [1.0, 2.0], "summary": {"p50": 1.5, "p90": 1.9, "n": 2,
                                                              "low_confidence": {"p50": True}}},
            "peak_rss_bytes": 123456789, "cold_start_ms": {"load": 40.5, "first_inference": 3.25},
            "artifact_bytes": 4_000_000, "settings": {"warmup": 20}, "artifact_files": ["model.onnx"]}),
        record("test_generation_parity", "bert-fp16-ort_cpu", "skip", reason="no CUDA"),
    ]


def write_run(path: Path, records: list[dict[str, Any]]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_frame_columns_and_values() -> None:
    frame = records_frame(sample_records())
    assert list(frame.columns[: len(BASE_COLUMNS)]) == list(BASE_COLUMNS)
    assert list(frame.columns[len(BASE_COLUMNS):]) == [
        "metric:model.logits.max_abs", "metric:model.logits.top1_agreement",
        "perf:artifact_bytes", "perf:cold_start_ms.first_inference", "perf:cold_start_ms.load",
        "perf:latency_ms.n", "perf:latency_ms.p50", "perf:latency_ms.p90", "perf:peak_rss_bytes"]
    assert len(frame) == 4
    fail = frame.iloc[1]
    assert fail["reason"] == "model.logits.max_abs 0.5 > 0.1 <script>alert(1)</script>"  # first line only
    assert fail["metric:model.logits.top1_agreement"] == 0.97
    assert fail["fingerprint"] == "f00d" and fail["model"] == "bert" and fail["precision"] == "int8"
    perf = frame.iloc[2]
    assert perf["perf:latency_ms.p50"] == 1.5 and perf["perf:peak_rss_bytes"] == 123456789
    assert perf["perf:cold_start_ms.load"] == 40.5
    assert pd.isna(perf["metric:model.logits.max_abs"])  # not measured by a perf case
    assert pd.isna(frame.iloc[0]["perf:latency_ms.p50"])


def test_empty_frame_has_base_columns() -> None:
    frame = records_frame([])
    assert list(frame.columns) == list(BASE_COLUMNS) and frame.empty


def test_csv_round_trip_keeps_values() -> None:
    frame = records_frame(sample_records())
    back = pd.read_csv(io.StringIO(to_csv(frame)), keep_default_na=False, na_values=[""])
    assert list(back.columns) == list(frame.columns)
    assert back["metric:model.logits.max_abs"].tolist()[:2] == [1e-6, 0.5]
    assert back.loc[2, "perf:peak_rss_bytes"] == 123456789
    assert back["verdict"].tolist() == ["pass", "fail", "pass", "skip"]
    assert back.loc[1, "reason"] == frame.loc[1, "reason"]


def test_html_escapes_text_and_colours_verdicts() -> None:
    page = to_html(records_frame(sample_records()))
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "http" not in page and "<link" not in page  # self-contained
    # the fail row (row 1) and only it gets the fail colour
    rule = re.search(r"([^{}]*)\{\s*background-color: " + VERDICT_COLOURS["fail"], page)
    assert rule, "no CSS rule with the fail colour"
    rows = set(re.findall(r"_row(\d+)_", rule.group(1)))
    assert rows == {"1"}
    assert VERDICT_COLOURS["pass"] in page and VERDICT_COLOURS["skip"] in page


def test_cli_report_writes_all_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "run", sample_records())
    out = tmp_path / "out"
    code = main(["report", str(run), "--csv", str(out / "r.csv"), "--html", str(out / "r.html"),
                 "--markdown", str(out / "summary.md")])
    assert code == 0, capsys.readouterr().err
    assert len(pd.read_csv(out / "r.csv")) == 4
    assert "&lt;script&gt;" in (out / "r.html").read_text()
    summary = (out / "summary.md").read_text()
    assert "**FAILED**" in summary and "`test_logits_parity[bert-int8-ort_cpu]`" in summary


def test_cli_report_prints_table_without_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    run = write_run(tmp_path / "run", sample_records())
    assert main(["report", str(run)]) == 0
    assert "test_perf[bert-fp32-ort_cpu]" in capsys.readouterr().out


@pytest.mark.parametrize("make", ["missing", "no_results", "corrupt"])
def test_cli_report_bad_run_dir_is_one_line_exit_2(make: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    if make != "missing":
        run.mkdir()
    if make == "corrupt":
        (run / "results.jsonl").write_text(json.dumps(record("t", "m-fp32-ort_cpu")) + "\n{not json\n"
                                           + json.dumps(record("u", "m-fp32-ort_cpu")) + "\n")
    assert main(["report", str(run), "--csv", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: error: ") and err.count("\n") == 1
    assert not (tmp_path / "x.csv").exists()
    if make == "corrupt":
        assert "results.jsonl:2" in err
