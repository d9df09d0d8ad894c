"""The accuracy gate against a blessed baseline, margins, and calibration, on records written here.

Cheap: no model runs (``tests/test_accuracy_baseline_e2e.py`` runs the real thing). Records are
shaped like the suites' (``model.logits.norm_max_abs``, ``model.sentence_embedding.embedding_cosine``,
bare ``gen_*`` keys), with settings and env.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core import UsageError
from harness.gate.accuracy import compare_accuracy, judge
from harness.gate.calibrate import bound, calibrate
from harness.gate.compare import Verdict
from harness.metrics.margins import EffectiveMargin, MarginRule, MarginTable, parse_cli_margin
from harness.metrics.registry import METRICS, TOLERANCE_SCOPES

ENV = {"fingerprint": "f00d", "cpu": "Test CPU", "versions": {"onnxruntime": "1.32.0", "torch": "2.13.0"},
       "threads": {"torch_num_threads": 1}}
SETTINGS = {"opset": 17, "exporter": "torchscript", "batch_size": 8, "num_samples": 8, "int8_per_channel": False,
            "fp16_op_block_list": []}


def record(variant: str, metrics: dict[str, float], *, suite: str = "test_logits_parity", verdict: str = "pass",
           thresholds: dict[str, Any] | None = None, env: dict[str, Any] | None = None,
           settings: dict[str, Any] | None = None, artifacts: dict[str, Any] | None = None) -> dict[str, Any]:
    model, precision, provider = variant.rsplit("-", 2)
    return {"schema": "harness.result/1", "id": f"{suite}[{variant}]", "variant": variant, "model": model,
            "precision": precision, "provider": provider, "backend": "onnxruntime" if "ort" in provider else "pytorch",
            "verdict": verdict, "metrics": metrics, "thresholds": thresholds or {}, "env": env or ENV,
            "settings": settings or SETTINGS, "artifacts": artifacts or {}}


def rows_by(comparison, verdict: Verdict) -> dict[tuple[str, str], Any]:
    return {(r.variant, r.metric): r for r in comparison.rows if r.verdict is verdict}


# -- the registry declares a margin for every metric the gate can see ----------------------------------
def test_every_judged_metric_declares_a_margin():
    missing = [s.name for s in METRICS.of(*TOLERANCE_SCOPES) if s.margin is None and not s.context]
    assert missing == [], f"declare a Margin in harness/metrics/registry.py for: {missing}"
    assert all(s.margin is None for s in METRICS if s.context), "context metrics are listed, never judged"
    for spec in METRICS:
        if spec.margin is not None and spec.higher_is_better and spec.margin.ideal is not None:
            assert spec.badness(spec.margin.ideal) == 0.0


# -- judging one metric ---------------------------------------------------------------------------------
def margin(rel: float = 0.25, floor: float = 0.0, exact: bool = False) -> EffectiveMargin:
    return EffectiveMargin(rel, floor, exact, advisory=False)


def test_error_doubling_is_a_regression_and_noise_is_not():
    spec = METRICS["norm_max_abs"]
    assert judge(spec, 0.0155, 0.031, margin()).verdict is Verdict.REGRESSION
    assert judge(spec, 0.0155, 0.0155 * 1.2, margin()).verdict is Verdict.PASS
    assert judge(spec, 0.0155, 0.0155 / 2, margin()).verdict is Verdict.IMPROVEMENT
    # the floor: a tiny FP32 error may triple without tripping a relative margin
    assert judge(spec, 2e-7, 6e-7, margin(floor=1e-6)).verdict is Verdict.PASS
    assert judge(spec, 2e-7, 6e-7, margin(floor=0.0)).verdict is Verdict.REGRESSION


def test_similarity_is_judged_on_its_distance_from_one():
    """MiniLM INT8 sentence cosine 0.993 (per-channel) -> 0.966 (per-tensor): 25% of a score of
    0.993 would allow anything; 25% of its gap to 1 (0.007) does not."""
    spec = METRICS["embedding_cosine"]
    j = judge(spec, 0.993, 0.966, margin(floor=2e-3))
    assert j.verdict is Verdict.REGRESSION and j.allowed == pytest.approx(2e-3)
    assert "0.993 -> 0.966" in j.reason and "worse by 0.027" in j.reason
    assert judge(spec, 0.993, 0.992, margin(floor=2e-3)).verdict is Verdict.PASS


def test_exact_metrics_must_stay_exact_and_nan_is_worse_than_anything():
    spec = METRICS["gen_token_exact_match"]
    j = judge(spec, 1.0, 31 / 32, margin(rel=0.25, floor=0.07, exact=True))
    assert j.verdict is Verdict.REGRESSION and "must stay exact" in j.reason
    assert judge(spec, 1.0, 31 / 32, margin(rel=0.25, floor=0.07, exact=False)).verdict is Verdict.PASS
    assert judge(spec, 1.0, 1.0, margin(exact=True)).verdict is Verdict.PASS
    cos = METRICS["cosine"]
    assert judge(cos, 0.99, math.nan, margin()).verdict is Verdict.REGRESSION
    assert judge(cos, math.nan, 0.99, margin()).verdict is Verdict.IMPROVEMENT
    assert judge(cos, math.nan, math.nan, margin()).verdict is Verdict.PASS


def test_a_target_metric_is_as_wrong_above_as_below():
    spec = METRICS["gen_length_ratio_vs_torch"]
    assert spec.badness(0.9) == pytest.approx(0.1) and spec.badness(1.1) == pytest.approx(0.1)


# -- comparing runs ---------------------------------------------------------------------------------------
def fp16_run(scale: float = 1.0, **kw: Any) -> list[dict[str, Any]]:
    base = {"model.logits.norm_max_abs": 6.7e-4, "model.logits.rel_l2": 5.4e-4, "model.logits.cosine": 1 - 1.3e-7,
            "model.logits.top1_agreement": 1.0}
    metrics = {k: (v * scale if "norm" in k or "l2" in k else v) for k, v in base.items()}
    return [record("bert-tiny-fp16-ort_cpu", metrics, **kw),
            record("bert-tiny-fp32-ort_cpu", {"model.logits.norm_max_abs": 2.3e-7, "model.logits.cosine": 1.0}, **kw)]


def test_fp16_error_doubling_regresses_and_names_the_metric():
    result = compare_accuracy(fp16_run(), fp16_run(scale=2.0))
    regressed = rows_by(result, Verdict.REGRESSION)
    assert set(regressed) == {("bert-tiny-fp16-ort_cpu", "norm_max_abs"), ("bert-tiny-fp16-ort_cpu", "rel_l2")}
    assert result.exit_code == 1 and "norm_max_abs" in result.headline()
    row = regressed[("bert-tiny-fp16-ort_cpu", "norm_max_abs")]
    declared = METRICS["norm_max_abs"].margin
    assert row.delta == pytest.approx(6.7e-4)
    assert row.allowed == pytest.approx(max(declared.rel * 6.7e-4, declared.floor_at("fp16")))
    assert compare_accuracy(fp16_run(), fp16_run()).exit_code == 0


def test_the_cause_is_named_where_it_plausibly_explains_the_change():
    emb = "model.sentence_embedding.embedding_cosine"
    base = [record("minilm-l6-int8-ort_cpu", {emb: 0.993}, suite="test_embedding_parity",
                   settings={**SETTINGS, "int8_per_channel": True},
                   artifacts={"model/model.onnx": {"sha256": "aa"}})]
    env = {**ENV, "versions": {"onnxruntime": "1.33.0", "torch": "2.13.0", "sacrebleu": "9"}}
    cand = [record("minilm-l6-int8-ort_cpu", {emb: 0.966}, suite="test_embedding_parity", env=env,
                   artifacts={"model/model.onnx": {"sha256": "bb"}})]
    result = compare_accuracy(base, cand)
    (row,) = result.rows
    assert row.verdict is Verdict.REGRESSION and row.metric == "embedding_cosine"
    assert "int8_per_channel: true -> false" in row.reason
    assert "artifact model/model.onnx rebuilt" in row.reason and "versions.onnxruntime: 1.32.0 -> 1.33.0" in row.reason
    assert not any("sacrebleu" in c for c in row.explained_by), "text libraries do not move an embedding"
    assert any("int8_per_channel" in n for n in result.notes()) and any("onnxruntime" in n for n in result.notes())
    # an FP16 setting never explains an INT8 case
    fp16 = [record("minilm-l6-int8-ort_cpu", {emb: 0.966}, suite="test_embedding_parity",
                   settings={**SETTINGS, "int8_per_channel": True, "fp16_op_block_list": ["Softmax"]})]
    assert compare_accuracy(base, fp16).rows[0].explained_by == ()


def test_missing_cases_are_listed_and_fail_unless_allowed():
    base = fp16_run()
    cand = fp16_run()[:1] + [record("bert-tiny-int8-ort_cpu", {"model.logits.norm_max_abs": 0.0155})]
    result = compare_accuracy(base, cand)
    assert result.missing == ["test_logits_parity[bert-tiny-fp32-ort_cpu]"]
    assert result.new == ["test_logits_parity[bert-tiny-int8-ort_cpu]"]
    assert result.exit_code == 1 and result.headline().startswith("FAIL: 1 missing in candidate")
    result.allow_missing = True
    assert result.exit_code == 0 and "(--allow-missing: 1 missing in candidate" in result.headline()


def test_context_and_perf_numbers_are_not_judged():
    base = [record("marian-tiny-fp16-ort_cpu", {"gen_sentences": 32, "gen_bleu_vs_torch": 95.0, "perf.p50_ms": 1.0},
                   suite="test_generation_parity")]
    cand = [record("marian-tiny-fp16-ort_cpu", {"gen_sentences": 16, "gen_bleu_vs_torch": 80.0, "perf.p50_ms": 9.0},
                   suite="test_generation_parity")]
    result = compare_accuracy(base, cand)
    assert [r.metric for r in result.rows] == ["gen_bleu_vs_torch"] and result.unjudged == 1
    assert result.rows[0].verdict is Verdict.REGRESSION  # 5 -> 20 BLEU points from PyTorch's text


def test_outputs_render_the_same_rows():
    result = compare_accuracy(fp16_run(), fp16_run(scale=2.0))
    md = result.to_markdown()
    assert "| bert-tiny-fp16-ort_cpu | model.logits.norm_max_abs |" in md and "**REGRESSION**" in md
    doc = json.loads(result.to_json())
    assert doc["schema"] == "harness.accuracy-compare/1" and doc["exit_code"] == 1
    assert {r["verdict"] for r in doc["rows"]} == {"PASS", "REGRESSION"}
    from io import StringIO

    from rich.console import Console

    buffer = StringIO()
    result.render_table(Console(file=buffer, width=240))
    assert "accuracy vs baseline" in buffer.getvalue() and "FAIL: 2 accuracy regression(s)" in buffer.getvalue()


# -- margins: defaults, overrides, parsing ---------------------------------------------------------------
def test_overrides_resolve_most_specific_first():
    spec = METRICS["norm_max_abs"]
    table = MarginTable([
        parse_cli_margin("norm_max_abs=50%"),
        parse_cli_margin("bert-tiny:norm_max_abs=rel=10%"),
        parse_cli_margin("int8:norm_max_abs=abs=0.01"),
        parse_cli_margin("bert-tiny:int8:norm_max_abs=rel=5%,exact"),
    ])
    assert table.resolve(spec, "other", "fp16").rel == 0.5
    assert table.resolve(spec, "bert-tiny", "fp16").rel == 0.1
    got = table.resolve(spec, "bert-tiny", "int8")
    assert (got.rel, got.floor, got.exact) == (0.05, 0.01, True)
    default = MarginTable().resolve(spec, "x", "int8")
    assert default is not None and default.source == "default" and default.floor == spec.margin.floor_at("int8")
    assert MarginTable().resolve(METRICS["gen_sentences"], "x", "fp32") is None


@pytest.mark.parametrize("text, message", [
    ("norm_max_abs", "expected [MODEL:][PRECISION:]METRIC=REL[,ABS]"),
    ("norm_max_ab=10%", "did you mean 'norm_max_abs'"),
    ("bert-tiny:int9:norm_max_abs=10%", "unknown precision 'int9'"),
    ("norm_max_abs=ten", "not a number"),
    ("norm_max_abs=-1", ">= 0"),
    ("norm_max_abs=1,2,3", "too many values"),
    ("norm_max_abs=rell=1", "unknown field"),
    ("gen_sentences=10%", "without an accuracy margin"),
])
def test_bad_margins_are_one_line_usage_errors(text, message):
    with pytest.raises(UsageError) as info:
        parse_cli_margin(text)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_config_margins_are_validated_and_layered(tmp_path):
    from harness.settings.config_file import load_config

    path = tmp_path / "harness.toml"
    path.write_text("[margins]\nnorm_max_abs = { rel = 0.5 }\n[margins.int8]\nembedding_cosine = { abs = 0.001 }\n"
                    "[models.bert-tiny.margins.fp16]\nnorm_max_abs = { rel = 0.1, exact = true }\n")
    rules = load_config(path).margin_rules()
    assert [(r.metric, r.model, r.precision) for r in rules] == [
        ("norm_max_abs", None, None), ("embedding_cosine", None, "int8"), ("norm_max_abs", "bert-tiny", "fp16")]
    got = MarginTable(rules).resolve(METRICS["norm_max_abs"], "bert-tiny", "fp16")
    assert got is not None and (got.rel, got.exact) == (0.1, True) and "harness.toml" in got.source
    path.write_text("[margins.int8]\nembeding_cosine = { abs = 0.001 }\n")
    with pytest.raises(UsageError, match=r"harness.toml: margins.int8.embeding_cosine: unknown metric .*did you mean"):
        load_config(path)
    path.write_text("[models.bert-tiny.margins]\ncosine = { rel = 'lots' }\n")
    with pytest.raises(UsageError, match=r"models.bert-tiny.margins.cosine.rel: 'lots' is not a number"):
        load_config(path)


def test_effective_margin_describes_itself():
    rule = MarginRule("cosine", parse_cli_margin("cosine=10%").override, source="--accuracy-margin cosine=10%")
    got = MarginTable([rule]).resolve(METRICS["cosine"], "m", "int8")
    assert got is not None and got.describe().startswith("rel 10%, abs ") and "--accuracy-margin" in got.describe()


# -- calibration --------------------------------------------------------------------------------------------
def gated(variant: str, metrics: dict[str, float], thresholds: dict[str, float], verdict: str = "pass") -> dict:
    ops = {k: {"threshold": v, "op": METRICS[k.rsplit(".", 1)[-1]].symbol} for k, v in thresholds.items()}
    return record(variant, metrics, thresholds=ops, verdict=verdict)


def test_calibration_tightens_to_observed_times_headroom_never_looser():
    key, cos = "model.logits.norm_max_abs", "model.logits.cosine"
    records = [
        gated("bert-tiny-int8-ort_cpu", {key: 0.0155, cos: 0.99995}, {key: 0.15, cos: 0.99}),
        gated("bert-tiny-int8-torch_cpu", {key: 0.0256, cos: 0.99986}, {key: 0.15, cos: 0.99}),
        gated("minilm-l6-int8-ort_cpu", {key: 0.125}, {key: 0.25}),  # x2 = 0.25: nothing to tighten
        gated("bert-tiny-fp16-ort_cpu", {key: 0.5}, {key: 0.01}, verdict="fail"),  # not calibrated on
    ]
    result = calibrate(records, source="run")
    got = {(p.model, p.precision, p.metric): p for p in result.proposals}
    assert set(got) == {("bert-tiny", "int8", "norm_max_abs"), ("bert-tiny", "int8", "cosine")}
    p = got[("bert-tiny", "int8", "norm_max_abs")]
    assert p.observed == 0.0256 and "torch_cpu" in p.where and p.proposed == pytest.approx(0.052)
    assert got[("bert-tiny", "int8", "cosine")].proposed == pytest.approx(1 - 0.00028)
    assert result.unchanged == 1 and result.skipped == ["test_logits_parity[bert-tiny-fp16-ort_cpu] (fail)"]
    text = result.to_toml()
    assert "[models.bert-tiny.tolerances.int8]" in text and "norm_max_abs = 0.052" in text


def test_calibration_snippet_is_a_valid_config(tmp_path):
    from harness.settings.config_file import load_config

    key = "model.logits.norm_max_abs"
    snippet = calibrate([gated("bert-tiny-int8-ort_cpu", {key: 0.0155}, {key: 0.15}),
                         gated("bert-tiny-fp32-torch_cpu", {key: 0.0}, {key: 1e-4})], source="run").to_toml()
    path = tmp_path / "harness.toml"
    path.write_text(snippet)
    entry = load_config(path).entries["bert-tiny"]
    assert entry.tolerances["int8"]["norm_max_abs"] == pytest.approx(0.031)
    # observed 0 still gets a bound its noise cannot cross: the FP32 floor
    assert entry.tolerances["fp32"]["norm_max_abs"] == pytest.approx(METRICS["norm_max_abs"].margin.floor_at("fp32"))


def test_bound_rounds_outward():
    spec = METRICS["norm_max_abs"]
    assert bound(spec, 0.0155, 0.0, 2.0) == 0.031 and bound(spec, 0.01551, 0.0, 2.0) == 0.032
    assert bound(METRICS["cosine"], 0.9993, 0.0, 2.0) == pytest.approx(0.9986)
    with pytest.raises(UsageError, match="headroom"):
        calibrate([], headroom=0.5)


# -- the CLI ------------------------------------------------------------------------------------------------
def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from harness.cli import baseline
    from harness.cli import calibrate as calibrate_cli

    parser = argparse.ArgumentParser(prog="harness")
    sub = parser.add_subparsers(dest="command", required=True)
    baseline.register(sub)
    calibrate_cli.register(sub)
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except UsageError as exc:
        assert "\n" not in str(exc)
        print(f"harness: error: {exc}", file=sys.stderr)
        code = 2
    out, err = capsys.readouterr()
    return code, out, err


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_baseline_blesses_accuracy_and_compare_gates_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "240")
    monkeypatch.chdir(tmp_path)  # no harness.toml here
    store = str(tmp_path / "store")
    code, out, _ = cli(["baseline", "save", str(write(tmp_path / "a", fp16_run())), "--name", "rel",
                        "--baseline-store", store], capsys)
    assert code == 0 and "0 perf record(s), 2 accuracy record(s)" in out
    meta = json.loads((tmp_path / "store" / "rel" / "baseline.json").read_text())
    assert meta["accuracy_records"] == 2 and meta["versions"]["onnxruntime"] == "1.32.0"
    assert meta["settings"]["batch_size"] == 8
    code, out, _ = cli(["baseline", "compare", str(write(tmp_path / "b", fp16_run())), "--name", "rel",
                        "--baseline-store", store], capsys)
    assert code == 0 and "OK: no accuracy regression" in out
    js, md = tmp_path / "c.json", tmp_path / "c.md"
    code, out, _ = cli(["baseline", "compare", str(write(tmp_path / "c", fp16_run(scale=2.0))), "--name", "rel",
                        "--baseline-store", store, "--json", str(js), "--markdown", str(md)], capsys)
    assert code == 1 and "REGRESSION" in out and "norm_max_abs" in out
    doc = json.loads(js.read_text())
    assert doc["exit_code"] == 1 and doc["accuracy"]["counts"]["REGRESSION"] == 2
    assert "### Accuracy" in md.read_text()
    # a margin override on the command line loosens it (per precision and metric)
    code, out, _ = cli(["baseline", "compare", str(tmp_path / "c"), "--name", "rel", "--baseline-store", store,
                        "--accuracy-margin", "fp16:norm_max_abs=150%", "--accuracy-margin", "fp16:rel_l2=150%"],
                       capsys)
    assert code == 0, out
    code, _, err = cli(["baseline", "compare", str(tmp_path / "c"), "--name", "rel", "--baseline-store", store,
                        "--accuracy-margin", "fp16:norm_max=1"], capsys)
    assert code == 2 and "did you mean 'norm_max_abs'" in err


def test_calibrate_cli_writes_the_snippet(tmp_path, capsys):
    key = "model.logits.norm_max_abs"
    run = write(tmp_path / "run", [gated("bert-tiny-int8-ort_cpu", {key: 0.0155}, {key: 0.15})])
    code, out, _ = cli(["calibrate", str(run), "--min-runs", "1"], capsys)
    assert code == 0 and "[models.bert-tiny.tolerances.int8]" in out
    code, _, err = cli(["calibrate", str(run), "--min-runs", "1", "--out", str(tmp_path / "cal.toml")], capsys)
    assert code == 0 and "wrote 1 tightened tolerance(s)" in err
    assert "norm_max_abs = 0.031" in (tmp_path / "cal.toml").read_text()
    code, _, err = cli(["calibrate", str(run), "--models", "nope"], capsys)
    assert code == 2 and "no gated accuracy metrics for nope" in err
    code, _, err = cli(["calibrate", str(tmp_path / "missing")], capsys)
    assert code == 2 and "run directory not found" in err
