"""The typed ``harness.result/1`` record: tolerant reading, strict JSON, one composer, one failure text."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.results import (
    SCHEMA,
    VERDICTS,
    CaseIdentity,
    CheckResult,
    GateFailure,
    MetricKey,
    Record,
    ResultsFileError,
    ResultsWriter,
    compose,
    compose_standalone,
    failure_text,
    iter_records,
    latest_records,
    new_run_id,
    raise_failures,
    read_records,
    read_typed,
    record_line,
)

KEYS = ["schema", "id", "nodeid", "run_id", "suite", "variant", "model", "model_sha256", "precision", "backend",
        "provider", "execution_provider", "verdict", "reason", "metrics", "thresholds", "artifacts", "settings", "env",
        "rerun", "duration_s", "finished", "harness_version", "data"]


def full_record(**extra: object) -> dict:
    raw = {"schema": SCHEMA, "id": "test_logits_parity[m-int8-ort_cpu]",
           "nodeid": "suites/test_logits_parity.py::test_logits_parity[m-int8-ort_cpu]", "run_id": "abc123abc123",
           "suite": "test_logits_parity", "variant": "m-int8-ort_cpu", "model": "m", "model_sha256": "f" * 64,
           "precision": "int8", "backend": "onnxruntime", "provider": "ort_cpu",
           "execution_provider": "CPUExecutionProvider", "verdict": "pass", "reason": "",
           "metrics": {"decoder.logits.cosine": 0.9999}, "thresholds": {"decoder.logits.cosine":
                                                                        {"threshold": 0.99, "op": ">="}},
           "artifacts": {}, "settings": {"opset": 17}, "env": {"fingerprint": "fp"}, "rerun": "harness run ...",
           "duration_s": 1.5, "finished": "2026-01-01T00:00:00+0000", "harness_version": "0.1", "data": {}}
    raw.update(extra)
    return raw


def _refuse(token: str) -> float:
    raise ValueError(f"bare {token} in a record: not JSON")


# -- the type ------------------------------------------------------------------------------------------
def test_round_trip_keeps_keys_order_and_unknown_fields() -> None:
    raw = full_record(perf={"latency_ms": {"samples": [1.0, 2.0]}}, future_field=[1, 2])
    record = Record.from_dict(raw)
    assert record.extra == {"future_field": [1, 2]}
    out = record.to_dict()
    assert out == raw
    assert list(out) == [*KEYS, "perf", "future_field"]


def test_older_record_with_missing_fields_loads_with_defaults() -> None:
    record = Record.from_dict({"id": "test_x[v]", "verdict": "fail", "reason": "r"})
    assert (record.schema, record.metrics, record.rerun, record.perf, record.fingerprint) == (SCHEMA, {}, None, {}, None)
    assert record.failed and record.first_reason_line == "r"
    assert "rerun" not in record.to_dict() and "perf" not in record.to_dict()


def test_unknown_verdict_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(full_record()) + "\n" + json.dumps(full_record(verdict="maybe")) + "\n")
    with pytest.raises(ResultsFileError, match=r"results.jsonl:2: unknown verdict 'maybe'"):
        read_typed(path)
    assert len(read_records(path)) == 2  # the dict path stays as tolerant as before


def test_verdicts_are_the_five_of_the_schema() -> None:
    """``not-run`` (issue 9): a variant asked for by name that could not run here fails the run."""
    from harness.results.record import FAILING

    assert VERDICTS == ("pass", "fail", "skip", "error", "not-run")
    assert FAILING == {"fail", "error", "not-run"}


# -- strict JSON ---------------------------------------------------------------------------------------
def nonfinite_record() -> Record:
    return Record.from_dict(full_record(
        verdict="fail",
        metrics={"decoder.logits.max_abs": math.inf, "decoder.logits.cosine": math.nan,
                 "decoder.logits.min": -math.inf, "encoder.h.cosine": 0.5},
        thresholds={"decoder.logits.max_abs": {"threshold": 0.01, "op": "<="},
                    "decoder.logits.cosine": {"threshold": 0.99, "op": ">="},
                    "encoder.h.cosine": {"threshold": -math.inf, "op": ">="}},
        perf={"latency_ms": {"samples": [1.0, math.nan, 2.0], "summary": {"p50": math.inf}}},
        data={"text": "NaN", "seconds": {"run": 0.1}}))


def test_nonfinite_values_round_trip_as_strict_json(tmp_path: Path) -> None:
    ResultsWriter(tmp_path).append(nonfinite_record())
    line = (tmp_path / "results.jsonl").read_text().strip()
    raw = json.loads(line, parse_constant=_refuse)  # a standard parser: no bare NaN/Infinity
    assert raw["metrics"] == {"decoder.logits.max_abs": "Infinity", "decoder.logits.cosine": "NaN",
                              "decoder.logits.min": "-Infinity", "encoder.h.cosine": 0.5}
    assert raw["thresholds"]["encoder.h.cosine"]["threshold"] == "-Infinity"
    (back,) = read_typed(tmp_path)
    assert back.metrics["decoder.logits.max_abs"] == math.inf
    assert math.isnan(back.metrics["decoder.logits.cosine"])
    assert back.metrics["decoder.logits.min"] == -math.inf
    assert back.thresholds["encoder.h.cosine"]["threshold"] == -math.inf
    assert math.isnan(back.perf["latency_ms"]["samples"][1]) and back.perf["latency_ms"]["summary"]["p50"] == math.inf
    assert back.data["text"] == "NaN"  # free text stays text
    (as_dict,) = read_records(tmp_path)
    assert math.isnan(as_dict["metrics"]["decoder.logits.cosine"])


def test_nonfinite_metric_still_fails_its_check(tmp_path: Path) -> None:
    from harness.report.checks import format_checks, worst_checks

    ResultsWriter(tmp_path).append(nonfinite_record())
    (back,) = read_typed(tmp_path)
    outcomes = {(o.subject, o.metric): o.passed for o in back.checks()}
    assert outcomes == {("decoder/logits", "max_abs"): False, ("decoder/logits", "cosine"): False,
                        ("encoder/h", "cosine"): True}
    worst = {name: ok for name, _, _, _, ok in worst_checks(back)}
    assert worst == {"max_abs": False, "cosine": False}  # the NaN is the worst cosine, and fails
    assert "cosine NaN >= 0.99 ✗" in format_checks(back)


def test_the_checks_cell_puts_failing_metrics_first_and_counts_what_it_leaves_out() -> None:
    """summary.md's and the terminal's checks cell shows at most four metrics: a failing fifth one
    used to vanish behind four passing ones."""
    from harness.report.checks import format_checks

    names = ["cosine", "max_abs", "mean_abs", "top1_agreement", "norm_max_abs", "kl"]
    metrics = {f"model/logits.{n}": 0.5 for n in names}
    thresholds = {f"model/logits.{n}": {"op": ">=" if n in ("cosine", "top1_agreement") else "<=",
                                        "threshold": 1.0 if n != "norm_max_abs" else 0.15} for n in names}
    record = {"schema": "harness.result/1", "id": "t[m-int8-ort_cpu]", "verdict": "fail", "metrics": metrics,
              "thresholds": thresholds}
    cell = format_checks(record)
    failing = [n for n in names if (n in ("cosine", "top1_agreement")) or n == "norm_max_abs"]
    assert cell.split("; ")[0].startswith(tuple(failing)) and "✗" in cell.split("; ")[0]
    assert all(f"{n} " in cell for n in failing)  # every failing metric is shown...
    assert cell.endswith("+2 more")  # ...and the passing ones left out are counted
    assert format_checks(record, limit=2).endswith("+4 more (1 failing)")


@pytest.mark.parametrize("tool", ["node", "jq"])
def test_other_languages_parse_every_line(tmp_path: Path, tool: str) -> None:
    exe = shutil.which(tool)
    if exe is None:
        pytest.skip(f"{tool} is not installed")
    writer = ResultsWriter(tmp_path)
    writer.append(nonfinite_record())
    writer.append(Record.from_dict(full_record()))
    path = tmp_path / "results.jsonl"
    if tool == "node":
        script = ("const lines = require('fs').readFileSync(process.argv[1], 'utf8').trim().split('\\n');"
                  "for (const l of lines) { const r = JSON.parse(l); console.log(r.metrics['decoder.logits.cosine']); }")
        out = subprocess.run([exe, "-e", script, str(path)], capture_output=True, text=True, check=True).stdout
    else:
        out = subprocess.run([exe, "-r", '.metrics["decoder.logits.cosine"]', str(path)], capture_output=True,
                             text=True, check=True).stdout
    assert out.split() == ["NaN", "0.9999"]


def test_bare_nan_of_older_files_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "t[v]", "verdict": "fail", "metrics": {"a.b.c": NaN, "a.b.d": Infinity}}\n')
    (record,) = read_typed(path)
    assert math.isnan(record.metrics["a.b.c"]) and record.metrics["a.b.d"] == math.inf


def test_numpy_values_are_written_as_plain_json() -> None:
    import numpy as np

    line = record_line({"id": "t", "verdict": "pass", "metrics": {"x": np.float32("nan"), "y": np.float64(2.0)},
                        "data": {"arr": np.arange(2), "path": Path("/a")}})
    assert json.loads(line, parse_constant=_refuse)["metrics"] == {"x": "NaN", "y": 2.0}
    assert json.loads(line)["data"] == {"arr": [0, 1], "path": "/a"}


def test_latest_records_for_records_and_dicts() -> None:
    first, second = full_record(reason="old"), full_record(reason="new")
    assert latest_records([first, second]) == [second]
    typed = latest_records([Record.from_dict(first), Record.from_dict(second)])
    assert [r.reason for r in typed] == ["new"]


def test_iter_records_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ResultsFileError, match="no such results file"):
        list(iter_records(tmp_path / "nope.jsonl"))


# -- metric keys ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("key", "parsed"), [
    ("decoder.logits.max_abs", MetricKey("max_abs", "decoder", "logits")),
    ("decoder_with_past.present.0.key.cosine", MetricKey("cosine", "decoder_with_past", "present.0.key")),
    ("perf.p50_ms", MetricKey("p50_ms", "perf")),
    ("bleu", MetricKey("bleu")),
])
def test_metric_key_format_and_parse(key: str, parsed: MetricKey) -> None:
    assert MetricKey.parse(key) == parsed
    assert str(parsed) == key


def test_perf_metric_key() -> None:
    key = MetricKey.perf("p99_ms")
    assert str(key) == "perf.p99_ms" and key.is_perf and not MetricKey.parse("decoder.logits.x").is_perf
    assert MetricKey.parse("decoder.present.0.key.cosine").subject == "decoder/present.0.key"


# -- failure text --------------------------------------------------------------------------------------
def test_failure_text_is_byte_identical_to_the_old_builders() -> None:
    outcome = CheckResult("cosine", 0.95, ">=", 0.99, "decoder/logits", "batch=3, position=1, index=7")
    assert not outcome.passed
    text = failure_text("m-int8-ort_cpu", [outcome.message()])
    assert text == ("m-int8-ort_cpu: 1 check(s) failed\n"
                    "  decoder/logits: cosine = 0.95 (must be >= 0.99); worst element at batch=3, position=1, index=7")
    gen = failure_text("v", [CheckResult("bleu", math.nan, ">=", 40.0).message()], "generation check(s) failed",
                       trailer=["first divergence: none"])
    assert gen == "v: 1 generation check(s) failed\n  bleu = NaN (must be >= 40)\n  first divergence: none"


def test_raise_failures_raises_gate_failure_only_when_something_failed() -> None:
    raise_failures("v", [])
    with pytest.raises(GateFailure, match=r"^v: 2 performance budget\(s\) exceeded\n  a\n  b$"):
        raise_failures("v", ["a", "b"], "performance budget(s) exceeded")


def test_parity_failure_of_a_nan_metric_is_a_gate_failure() -> None:
    from harness.core import Check, Tolerance
    from harness.judge.numeric import OutputResult, ParityResult

    output = OutputResult("decoder", "logits", {"cosine": math.nan}, None, (), Tolerance((Check("cosine", 0.99, True),)),
                          1, where="n/a")
    result = ParityResult("m-fp16-ort_cpu", [output])
    assert result.metrics() == {"decoder.logits.cosine": result.metrics()["decoder.logits.cosine"]}
    with pytest.raises(GateFailure) as info:
        result.assert_ok()
    assert str(info.value) == ("m-fp16-ort_cpu: 1 check(s) failed\n"
                               "  decoder/logits: cosine = NaN (must be >= 0.99); worst element at n/a")


# -- one composer --------------------------------------------------------------------------------------
def test_collector_and_check_compose_the_same_record_shape(tmp_path: Path) -> None:
    from harness.case.collector import RecordCollector
    from harness.core import Precision, Variant
    from harness.runners import PROVIDERS

    payload = {"model_sha256": "s", "metrics": {"a.b.c": 1.0}, "thresholds": {}, "artifacts": {}, "data": {},
               "perf": {}, "env": {"fingerprint": "fp"}, "settings": {"opset": 17}}
    variant = Variant("m", Precision.INT8, PROVIDERS["ort_cpu"])
    collector = RecordCollector(ResultsWriter(tmp_path))
    nodeid = "suites/test_logits_parity.py::test_logits_parity[m-int8-ort_cpu]"
    ok = SimpleNamespace(passed=True, longrepr=None, outcome="passed", duration=0.5, user_properties=[
        ("harness_case", CaseIdentity.of_variant(variant, "test_logits_parity").as_dict()),
        ("harness_record", payload)])
    for when in ("setup", "call", "teardown"):
        collector.on_report(SimpleNamespace(**vars(ok), nodeid=nodeid, when=when))
    (suite_record,) = collector.records
    case = SimpleNamespace(variant=variant, workspace=SimpleNamespace(), payload=lambda: payload)
    check_record = compose_standalone(case, suite="check", run_id="r1", verdict="pass", reason="", duration_s=1.0,
                                      settings={"x": 1}).to_dict()
    assert list(suite_record.to_dict()) == KEYS
    assert list(check_record) == [k for k in KEYS if k != "rerun"]  # harness check has no rerun command
    assert suite_record.run_id == collector.run_id and suite_record.duration_s == 1.5
    assert suite_record.verdict == "pass" and suite_record.id == "test_logits_parity[m-int8-ort_cpu]"
    assert check_record["id"] == "check[m-int8-ort_cpu]" and check_record["nodeid"] == "harness check::check[m-int8-ort_cpu]"
    assert check_record["settings"] == {"x": 1} and check_record["run_id"] == "r1"
    assert json.loads((tmp_path / "results.jsonl").read_text())["run_id"] == collector.run_id


def test_run_id_is_per_session_not_per_module() -> None:
    import harness.case.collector
    from harness.case.collector import RecordCollector

    assert not hasattr(harness.case.collector, "RUN_ID")
    first, second = RecordCollector(ResultsWriter(Path("unused"))), RecordCollector(ResultsWriter(Path("unused")))
    assert first.run_id != second.run_id and len(new_run_id()) == 12


def test_compose_defaults_env_and_rounds_duration() -> None:
    record = compose(case_id="t[v]", nodeid="n", run_id="r", identity=CaseIdentity(variant="v"), payload={},
                     verdict="error", reason="boom", duration_s=1.234567)
    assert record.duration_s == 1.2346 and record.env.get("fingerprint") and record.rerun is None


def test_compare_results_script_finds_a_changed_metric() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("compare_results", Path(__file__).parents[1] / "scripts" /
                                                  "compare_results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    before = [Record.from_dict(full_record())]
    assert module.differences(before, [Record.from_dict(full_record(finished="later", run_id="other"))]) == []
    changed = [Record.from_dict(full_record(metrics={"decoder.logits.cosine": 0.5}))]
    assert module.differences(before, changed) == [
        "test_logits_parity[m-int8-ort_cpu]: metric decoder.logits.cosine 0.9999 -> 0.5"]


def test_a_signal_while_a_record_is_written_leaves_disk_and_summary_agreeing(tmp_path: Path) -> None:
    """The interrupt test met it at load 8: SIGINT landed between the line reaching
    results.jsonl and the collector counting it (4 records on disk, "3 finished" in summary.md).
    Here the signal is sent from inside the write itself: the record must be finished, on disk
    and counted when the KeyboardInterrupt arrives, right after the write."""
    import os
    import signal

    from harness.case.collector import RecordCollector
    from harness.core import Precision, Variant
    from harness.core.interrupts import signals_held
    from harness.runners import PROVIDERS

    class SignalledWriter(ResultsWriter):
        def append(self, record):  # type: ignore[no-untyped-def]
            super().append(record)
            os.kill(os.getpid(), signal.SIGINT)  # arrives mid-bookkeeping
            for _ in range(10_000):  # plenty of bytecode boundaries for it to land on
                pass

    variant = Variant("m", Precision.FP32, PROVIDERS["ort_cpu"])
    collector = RecordCollector(SignalledWriter(tmp_path))
    nodeid = "suites/test_logits_parity.py::test_logits_parity[m-fp32-ort_cpu]"
    ok = SimpleNamespace(passed=True, longrepr=None, outcome="passed", duration=0.5, user_properties=[
        ("harness_case", CaseIdentity.of_variant(variant, "test_logits_parity").as_dict()),
        ("harness_record", {"metrics": {}})])
    for when in ("setup", "call"):
        collector.on_report(SimpleNamespace(**vars(ok), nodeid=nodeid, when=when))
    # Python's own SIGINT handler for this test, whatever the process had (an xdist worker's, a
    # session guard): signals_held hands the signal back with raise_signal, which runs the
    # handler before it returns -- the KeyboardInterrupt is synchronous, no timing to bet on
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            collector.on_report(SimpleNamespace(**vars(ok), nodeid=nodeid, when="teardown"))
    finally:
        signal.signal(signal.SIGINT, outer)
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 1
    assert len(collector.records) == 1  # counted for summary.md, as it is on disk
    assert nodeid in collector.finished and nodeid not in collector.not_run()
    # the holder restores what was there and delivers nothing when nothing came
    before = signal.getsignal(signal.SIGINT)
    with signals_held():
        pass
    assert signal.getsignal(signal.SIGINT) is before
