"""No silent pass: a verdict that compared less than it claims is never green.

One test per quiet wrong verdict found before this rule (each failed on the code before it):
a baseline from another model set (accuracy and perf), ``compare`` with nothing in common or a
runtime setting that renamed every case, ``merge`` of shards run with different settings,
thresholds outside the metric's range, and the wording of tools that claim a property.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from report_fixture import logits, record, write_run

from harness.cli import main
from harness.core import UsageError


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")


def _latency(variant: str, base: float, run_id: str = "r") -> dict[str, Any]:
    samples = [base + 0.002 * (i % 11) for i in range(400)]
    return record("test_latency", variant, run_id=run_id, perf={
        "latency_ms": {"samples": samples, "summary": {"p50": base, "n": 400}}})


# -- (2) nothing compared is never OK -----------------------------------------------------------------
def test_baseline_of_another_model_set_fails_accuracy_and_perf(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``OK: no accuracy regression; 0 accuracy metrics of 0 cases: nothing compared``,
    exit 0; the perf side printed "missing in candidate" and passed."""
    store = tmp_path / "baselines"
    blessed = write_run(tmp_path / "blessed", [logits("bert-fp32-ort_cpu", 2e-7), _latency("bert-fp32-ort_cpu", 1.0)])
    other = write_run(tmp_path / "other", [logits("gpt-fp32-ort_cpu", 2e-7), _latency("gpt-fp32-ort_cpu", 1.0)])
    assert main(["baseline", "save", str(blessed), "--name", "release", "--baseline-store", str(store)]) == 0
    capsys.readouterr()
    assert main(["baseline", "compare", str(other), "--name", "release", "--baseline-store", str(store)]) == 1
    out = capsys.readouterr().out
    assert "OK:" not in out
    assert re.search(r"FAIL: nothing compared \(0 accuracy metrics\); missing in candidate: "
                     r"test_logits_parity\[bert-fp32-ort_cpu\]", out)
    assert re.search(r"FAIL: nothing compared \(0 perf rows\); missing in candidate: bert-fp32-ort_cpu", out)
    # the allowance is explicit and shows in the verdict line
    assert main(["baseline", "compare", str(other), "--name", "release", "--baseline-store", str(store),
                 "--allow-missing"]) == 0
    out = capsys.readouterr().out
    assert "OK: no accuracy regression" in out and "(--allow-missing: nothing compared (0 accuracy metrics)" in out
    # a candidate that lacks one of the baseline's cases fails too, naming it
    partial = write_run(tmp_path / "partial", [logits("bert-fp32-ort_cpu", 2e-7)])
    store2 = tmp_path / "b2"
    both = write_run(tmp_path / "both", [logits("bert-fp32-ort_cpu", 2e-7), logits("bert-int8-ort_cpu", 0.05)])
    assert main(["baseline", "save", str(both), "--name", "acc", "--baseline-store", str(store2)]) == 0
    capsys.readouterr()
    assert main(["baseline", "compare", str(partial), "--name", "acc", "--baseline-store", str(store2)]) == 1
    assert "FAIL: 1 missing in candidate: test_logits_parity[bert-int8-ort_cpu]" in capsys.readouterr().out


def test_compare_with_no_common_case_is_not_identical(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "every metric of every common case is identical" with no common case, exit 0."""
    a = write_run(tmp_path / "a", [logits("bert-fp32-ort_cpu", 2e-7)])
    b = write_run(tmp_path / "b", [logits("gpt-fp32-ort_cpu", 2e-7)])
    md = tmp_path / "c.md"
    assert main(["compare", str(a), str(b), "--markdown", str(md)]) == 1
    out = capsys.readouterr().out
    assert "identical" not in out and "identical" not in md.read_text()
    assert "FAIL: nothing compared (0 cases paired)" in out
    assert main(["compare", str(a), str(b), "--allow-missing"]) == 0
    assert "(--allow-missing: nothing compared" in capsys.readouterr().out


def test_merge_of_shards_with_no_case_is_not_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.shard.plan import ShardSpec, write_shard_file

    dirs = []
    for k in (1, 2):
        path = tmp_path / f"s{k}"
        write_shard_file(path, ShardSpec(k, 2), [], None, None)
        (path / "results.jsonl").write_text("")
        dirs.append(str(path))
    assert main(["merge", *dirs, "--out", str(tmp_path / "m")]) == 1
    assert "nothing compared (0 cases)" in capsys.readouterr().out
    assert main(["merge", *dirs, "--out", str(tmp_path / "m2"), "--allow-missing"]) == 0
    assert "(--allow-missing: nothing compared (0 cases))" in capsys.readouterr().out


# -- (3) compare pairs like with like ---------------------------------------------------------------------
def _runtime(level: str) -> dict[str, Any]:
    return {"runtime": {"graph_optimization": level, "intra_op_threads": 1}}


def test_compare_pairs_a_runtime_setting_change_and_counts_new_failures(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """B ran every case with ``-opt_disabled`` ids: before, nothing paired ("N verdict change(s)
    (0 worse)") while B failed cases, shown "— -> fail" and not counted as worse."""
    models = ("m1", "m2", "m3")
    a = write_run(tmp_path / "a", [logits(f"{m}-fp32-ort_cpu", 2e-7, settings=_runtime("all")) for m in models])
    b_rows = []
    for m in models:
        row = logits(f"{m}-fp32-ort_cpu", 2e-7 if m != "m2" else 0.3, "fail" if m == "m2" else "pass",
                     settings=_runtime("disabled"), reason="norm_max_abs 0.3" if m == "m2" else "")
        row["id"] = row["id"].replace("]", "-opt_disabled]")
        row["variant"] += "-opt_disabled"
        b_rows.append(row)
    b_rows.append(logits("m4-fp32-ort_cpu", 0.3, "fail", reason="new and failing"))  # a new failing case
    b = write_run(tmp_path / "b", b_rows)

    from harness.compare.diff import compare
    from harness.results.rundir import read_results

    cmp = compare(read_results(a), read_results(b))
    assert cmp.paired == 3 and not cmp.gone
    rows = {v.case: v for v in cmp.verdicts}
    changed = rows["test_logits_parity[m2-fp32-ort_cpu-opt_disabled]"]
    assert (changed.before, changed.after, changed.worse, changed.case_a) == (
        "pass", "fail", True, "test_logits_parity[m2-fp32-ort_cpu]")
    assert changed.settings == "graph_optimization: all -> disabled"
    assert rows["test_logits_parity[m1-fp32-ort_cpu-opt_disabled]"].settings  # a setting change is a row
    new = rows["test_logits_parity[m4-fp32-ort_cpu]"]
    assert (new.before, new.after, new.worse) == (None, "fail", True)
    assert cmp.regressed
    # the accuracy numbers pair too: m2's error moved, the others did not
    assert {d.case for d in cmp.accuracy} == {"test_logits_parity[m2-fp32-ort_cpu]"}

    md = tmp_path / "c.md"
    assert main(["compare", str(a), str(b), "--markdown", str(md), "--strict"]) == 1
    banner = capsys.readouterr().out
    n = cmp.counts()
    assert (n["rows"], n["verdict"], n["worse"], n["settings"], n["new"], n["gone"]) == (4, 1, 2, 3, 1, 0)
    text = md.read_text()
    table = [line for line in text.split("## Verdict changes")[1].split("##")[0].splitlines()
             if line.startswith("| `")]
    assert len(table) == n["rows"] and sum("**fail**" in line for line in table) == n["worse"]
    assert sum("->" in line for line in table) == n["settings"]
    for words in ("3 case(s) paired", "4 case row(s)", "1 verdict change(s)", "2 worse", "3 setting change(s)",
                  "1 new", "0 gone"):
        assert words in banner.replace("\n", " ") and words in text
    assert main(["compare", str(a), str(b)]) == 0  # informational without --strict: every case of A paired


# -- (4) merge refuses shards whose result-changing settings differ -----------------------------------------
def test_merge_refuses_shards_run_with_different_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.shard.plan import ShardSpec, write_shard_file

    ids = [f"test_logits_parity[m{i}-fp32-ort_cpu]" for i in range(4)]
    dirs = []
    for k, samples in ((1, 8), (2, 4)):
        path = tmp_path / f"shard{k}"
        write_shard_file(path, ShardSpec(k, 2), ids, None, None)
        mine = json.loads((path / "shard.json").read_text())["cases"]
        rows = [{**logits(c.split("[")[1].rstrip("]"), 2e-7), "run_id": f"r{k}",
                 "settings": {"options": {"samples": samples}, "samples_requested": samples}} for c in mine]
        write_run(path, rows)
        dirs.append(str(path))
    assert main(["merge", *dirs, "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert re.search(r"shards ran with different samples: 8 in shard 1/2 \(.*shard1\) but 4 in shard 2/2", err)
    assert main(["merge", *dirs, "--out", str(tmp_path / "m2"), "--force"]) == 0


# -- (5) thresholds inside the metric's range ----------------------------------------------------------------
@pytest.mark.parametrize("text, words", [
    ("cosine=2", "outside cosine's range [0, 1]"),
    ("top1_agreement=-0.1", "outside top1_agreement's range [0, 1]"),
    ("norm_max_abs=-1", "an error bound must be >= 0"),
])
def test_out_of_range_tolerance_is_exit_2_on_the_cli(text: str, words: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"not read: the tolerance is judged first")
    assert main(["check", "--onnx", str(onnx), "--tolerance", text]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_bleu_threshold_range_and_config_file(tmp_path: Path) -> None:
    from harness.metrics.registry import METRICS
    from harness.settings.config_file import load_config

    assert METRICS["gen_bleu_vs_torch"].threshold_problem(101.0) == "101 is outside gen_bleu_vs_torch's range [0, 100]"
    assert METRICS["gen_bleu_vs_torch"].threshold_problem(85.0) is None
    assert METRICS["embedding_cosine"].value_range == (0.0, 1.0)
    for spec in METRICS:  # every metric has a range a threshold is judged against
        lo, hi = spec.value_range
        assert lo < hi and lo == 0.0, spec.name
    config = tmp_path / "harness.toml"
    config.write_text("[tolerances.fp16]\ncosine = 2\n")
    with pytest.raises(UsageError, match=r"tolerances\.fp16\.cosine.*outside cosine's range \[0, 1\]"):
        load_config(config)


def test_model_spec_tolerance_out_of_range_is_refused() -> None:
    from harness.zoo.base import ModelSpec

    with pytest.raises(ValueError, match=r"tolerances\.fp16\.cosine: 2 is outside cosine's range"):
        ModelSpec(name="x", family="encoder", description="d", path="/nowhere", tolerances={"fp16": {"cosine": 2.0}})


# -- (7) not-run cases visible to CI --------------------------------------------------------------------------
def test_interrupted_run_lists_every_selected_case_in_junit_and_html(tmp_path: Path) -> None:
    """Before: an interrupted run's junit.xml said ``tests=50 failures=0`` with the cases that
    never ran absent, and the HTML tally said "0 not-run"."""
    import signal
    import xml.etree.ElementTree as ET

    from harness.core.interrupts import MARKER, Interruption, read_marker, write_marker
    from harness.report.html import render_report
    from harness.report.junit import render_junit
    from harness.results import Record
    from harness.results.notrun import not_run_records

    finished = [Record.coerce(logits("bert-fp32-ort_cpu", 2e-7))]
    later = [f"suites/test_x.py::test_logits_parity[bert-{p}-ort_cpu]" for p in ("fp16", "int8")]
    cases = {later[0]: {"variant": "bert-fp16-ort_cpu", "model": "bert", "precision": "fp16",
                        "provider": "ort_cpu", "suite": "test_logits_parity"}}
    write_marker(tmp_path, Interruption(signal.SIGTERM, tuple(later), 3, cases))
    stopped = read_marker(tmp_path)
    assert stopped is not None and (tmp_path / MARKER).is_file() and stopped.cases == cases
    root = ET.fromstring(render_junit(finished + not_run_records(stopped)))
    assert (root.get("tests"), root.get("errors"), root.get("failures")) == ("3", "2", "0")
    errors = {c.get("name"): c.find("error") for c in root.iter("testcase") if c.find("error") is not None}
    assert set(errors) == {"test_logits_parity[bert-fp16-ort_cpu]", "test_logits_parity[bert-int8-ort_cpu]"}
    assert all(e is not None and "interrupted by SIGTERM (exit 143)" in (e.get("message") or "")
               for e in errors.values())
    page = render_report(finished, interruption=stopped)
    assert '<span class="v-not-run">2 not-run</span>' in page
    assert page.count('data-verdict="not-run"') >= 1  # the fp16 case's cell in bert's row


# -- (6) honest wording --------------------------------------------------------------------------------------
def test_suggest_snippet_says_verified_only_when_the_rebuilt_variant_passed() -> None:
    """Before: "found and verified by harness bisect --suggest" above a set whose rebuild still
    failed (suggest.json: "fixed": false)."""
    from harness.core import Precision
    from harness.debug.suggest import toml_snippet

    failing = toml_snippet("m", "fp16_node_block_list", ["/a"], Precision.FP16, {}, verified=False)
    assert "verified by" not in failing and "NOT verified" in failing and '"fixed": false' in failing
    passing = toml_snippet("m", "fp16_node_block_list", ["/a"], Precision.FP16, {}, verified=True)
    assert passing.startswith("# nodes kept in FP32 by the FP16 conversion: found and verified")
    import inspect

    from harness.cli import bisect

    assert "verified=found.fixed" in inspect.getsource(bisect)  # the CLI passes the search's verdict


def _cosine_run(path: Path, value: float) -> Path:
    key = "model.logits.cosine"
    row = logits("bert-fp32-ort_cpu", 2e-7)
    row["metrics"] = {key: value}
    row["thresholds"] = {key: {"threshold": 0.99999, "op": ">="}}
    return write_run(path, [row])


def test_calibrate_needs_several_runs_and_respects_their_spread(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``cosine = 0.99999999999989`` proposed from a single 32-sample run, exit 0."""
    one = _cosine_run(tmp_path / "r1", 1 - 1e-14)
    assert main(["calibrate", str(one)]) == 1
    out, err = capsys.readouterr()
    assert "cosine =" not in out and "NOT proposed: 1 run(s) < --min-runs 3" in out
    assert "bert fp32 cosine: worst 1 - 9.99e-15 .. 1 - 9.99e-15 over 1 run(s)" in out and "nothing proposed" in err
    runs = [one, _cosine_run(tmp_path / "r2", 1 - 4e-7), _cosine_run(tmp_path / "r3", 1 - 2e-7)]
    assert main(["calibrate", *map(str, runs)]) == 0
    out = capsys.readouterr().out
    proposed = float(re.search(r"^cosine = ([0-9.e-]+)", out, re.M).group(1))  # type: ignore[union-attr]
    worst, spread = 1 - 4e-7, 4e-7 - 1e-14
    assert proposed <= worst - spread  # the bound keeps at least the measured spread from the worst run
    assert proposed > 0.99999  # and still tightens the default


# -- (1) closed-loop cached decoding ------------------------------------------------------------------------
def _reroute(path: Path, make: Any) -> None:
    """Rewrite the decoder_with_past file's decoder presents: each is renamed ``<name>__inner``
    and ``make(graph, inner_names)`` adds the nodes that produce the outputs again."""
    import onnx

    model = onnx.load(str(path))
    graph = model.graph
    names = [o.name for o in graph.output if o.name.startswith("present.") and ".decoder." in o.name]
    rename = {n: n + "__inner" for n in names}
    for node in graph.node:
        node.output[:] = [rename.get(n, n) for n in node.output]
        node.input[:] = [rename.get(n, n) for n in node.input]
    make(graph, names)
    onnx.save(model, str(path))


def _swap_key_value(graph: Any, names: list[str]) -> None:
    from onnx import helper

    for name in names:
        other = name.replace(".key", ".value") if name.endswith(".key") else name.replace(".value", ".key")
        graph.node.append(helper.make_node("Identity", [other + "__inner"], [name]))


def _drop_last_step(graph: Any, names: list[str]) -> None:
    from onnx import TensorProto, helper

    for value, key in ((0, "starts"), (-1, "ends"), (2, "axes")):
        graph.initializer.append(helper.make_tensor(f"drop__{key}", TensorProto.INT64, [1], [value]))
    for name in names:
        graph.node.append(helper.make_node("Slice", [name + "__inner", "drop__starts", "drop__ends", "drop__axes"],
                                           [name]))


@pytest.fixture(scope="module")
def faulty_marian(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Marian-tiny in optimum's layout with one planted cache fault each."""
    import shutil

    import torch
    from test_check import _marian, _marian_dir

    root = tmp_path_factory.mktemp("cache-faults")
    good = _marian_dir(root / "good")
    out = {}
    for name, edit in (("swapped", _swap_key_value), ("dropped", _drop_last_step)):
        shutil.copytree(good, root / name)
        _reroute(root / name / "decoder_with_past_model.onnx", edit)
        out[name] = root / name
    # positions that ignore the past length: every cached step embeds position 0
    import test_check

    model = _marian()
    embed = model.get_decoder().embed_positions
    original = embed.forward

    def from_zero(shape: Any, past: int = 0, position_ids: Any = None) -> Any:
        return original(shape, 0, position_ids=torch.arange(shape[1]))

    embed.forward = from_zero  # type: ignore[method-assign]
    try:
        real = test_check._marian
        test_check._marian = lambda: model  # type: ignore[assignment]
        positions = _marian_dir(root / "positions-export")
    finally:
        test_check._marian = real  # type: ignore[assignment]
        embed.forward = original  # type: ignore[method-assign]
    shutil.copytree(good, root / "positions")
    shutil.copy(positions / "decoder_with_past_model.onnx", root / "positions" / "decoder_with_past_model.onnx")
    out["positions"] = root / "positions"
    return out


@pytest.mark.parametrize("fault", ["swapped", "positions", "dropped"])
def test_harness_check_fails_a_wrong_cache_naming_the_cached_decoding_check(
        fault: str, faulty_marian: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a decoder_with_past with swapped present key/value exited 0 (the step check fed
    the reference's past; the presents were measured, not gated; greedy tokens did not flip)."""
    from test_check import _dir, _records

    out = tmp_path / "run"
    code = main(["check", "--reference", str(_dir("marian-tiny")), "--onnx", str(faulty_marian[fault]),
                 "--samples", "8", "--gen-samples", "8", "--out", str(out)])
    captured = capsys.readouterr()
    gen = {r["suite"]: r for r in _records(out)}["check_generation"]
    assert code == 1, captured.out[-2000:]
    assert gen["verdict"] == "fail" and "cached_decoding." in gen["reason"], gen["reason"]
    assert "cached-decoding check failed" in gen["reason"]
    assert gen["thresholds"]["cached_decoding.logits.cosine"]["op"] == ">="
    assert gen["thresholds"]["cached_decoding.logits.kl"]["op"] == "<="
    assert gen["metrics"]["cached_decoding.logits.cosine"] < gen["thresholds"]["cached_decoding.logits.cosine"]["threshold"]
    assert "cached_decoding" in gen["data"]["coverage"]["gated"]  # recorded as gated coverage


def test_history_trend_of_a_single_run_compares_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``history show`` / ``changes`` over series of one run printed a table and exited 0."""
    from test_history import night

    db = tmp_path / "h.sqlite"
    assert main(["history", "add", str(night(tmp_path, 1)), "--history-db", str(db)]) == 0
    capsys.readouterr()
    for command, least in (("show", 2), ("changes", 4)):  # changes: what the series rule needs to judge
        assert main(["history", command, "--history-db", str(db), "--metric", "perf:latency_ms.p50"]) == 1
        out = capsys.readouterr().out
        assert "FAIL:" in out and f"nothing compared (0 series with {least} or more runs)" in out
        assert main(["history", command, "--history-db", str(db), "--metric", "perf:latency_ms.p50", "--allow-missing"]) == 0
        assert "(--allow-missing: nothing compared" in capsys.readouterr().out
    assert main(["history", "add", str(night(tmp_path, 2)), "--history-db", str(db)]) == 0
    assert main(["history", "show", "--history-db", str(db), "--metric", "perf:latency_ms.p50"]) == 0
