"""Issue 23, breadth: tiny random models of common architectures judged end to end as a team's
own directories -- the CI subset of ``scripts/architecture_table.py`` (docs/architectures.md).

GPT-2 is a causal LM judged on its logits and its generation (pass at FP32, no error, 64
learned positions); a planted LM-head fault in its exported file fails ``harness check``; BART's
generation passes; every record says what it gated and gated its head's outputs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from harness.cli import main
from harness.zoo.architectures import CI_SUBSET, architecture, build_cached
from harness.zoo.base import cache_root, spec_for_directory

EXPECTED_FAMILY = {"gpt2": "causal_lm", "bart": "seq2seq", "distilbert": "question_answering",
                   "bert-token": "token_classification", "roberta": "masked_lm"}


@pytest.fixture(scope="module")
def tiny_dirs() -> dict[str, Path]:
    return {name: build_cached(architecture(name), cache_root() / "architectures") for name in CI_SUBSET}


@pytest.fixture(scope="module")
def fp32_run(tiny_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("arch-run")
    code = main(["run", "--models", *map(str, tiny_dirs.values()), "--precisions", "fp32", "--providers", "ort_cpu",
                 "--samples", "8", "--out", str(out), "-k", "logits_parity or generation_parity",
                 "--pytest-args", "--harness-gen-samples=8", "--harness-gen-max-new-tokens=8", "-p", "no:cacheprovider"])
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert code == 0, [(r["id"], r["verdict"], r["reason"]) for r in records if r["verdict"] != "pass"]
    return records


def test_ci_subset_is_detected_by_its_head(tiny_dirs: dict[str, Path]) -> None:
    for name, directory in tiny_dirs.items():
        assert spec_for_directory(directory).family == EXPECTED_FAMILY[name], name


def _records(run: list[dict[str, Any]], directory: Path) -> dict[str, dict[str, Any]]:
    return {r["suite"]: r for r in run if Path(r["model"]).name == directory.name and r["verdict"] != "skip"}


def test_gpt2_is_judged_on_logits_and_generation_and_passes(fp32_run: list[dict[str, Any]],
                                                            tiny_dirs: dict[str, Path]) -> None:
    cases = _records(fp32_run, tiny_dirs["gpt2"])
    logits, gen = cases["test_logits_parity"], cases["test_generation_parity"]
    assert logits["verdict"] == gen["verdict"] == "pass"
    assert logits["data"]["coverage"]["required"] == ["model/logits"] and "model/logits" in logits["data"]["coverage"]["gated"]
    assert logits["data"]["coverage"]["head"] == "causal_lm" and logits["data"]["coverage"]["missing"] == []
    assert "generation" in gen["data"]["coverage"]["gated"] and gen["data"]["coverage"]["missing"] == []
    budget = gen["data"]["generation"]["settings"]["budget"]
    assert budget["positions"] == 64 and budget["prompt_tokens"] + budget["new_tokens"] <= 64
    assert "model.logits.top1_agreement" in logits["metrics"]


def test_every_record_gated_its_heads_outputs(fp32_run: list[dict[str, Any]], tiny_dirs: dict[str, Path]) -> None:
    for name, directory in tiny_dirs.items():
        cases = _records(fp32_run, directory)
        assert "test_logits_parity" in cases, name
        for suite, record in cases.items():
            cov = record["data"]["coverage"]
            assert cov["passes"] and cov["required"] and not cov["missing"], (name, suite, cov)
    bart = _records(fp32_run, tiny_dirs["bart"])["test_generation_parity"]
    assert bart["verdict"] == "pass" and bart["metrics"]["gen_bleu_vs_torch"] == pytest.approx(100.0)
    masked = _records(fp32_run, tiny_dirs["roberta"])["test_logits_parity"]["data"]["coverage"]
    assert masked["head"] == "masked_lm" and masked["gated"].count("model/logits") == 1
    qa = _records(fp32_run, tiny_dirs["distilbert"])["test_logits_parity"]
    assert {"model/start_logits", "model/end_logits"} <= set(qa["data"]["coverage"]["gated"])


def _scale_lm_head(src: Path, dst: Path, factor: float) -> None:
    """Scale the weight of the MatMul / Gemm that produces ``logits`` (a private copy when the
    initializer is shared with the token embedding, as tied GPT-2 weights are)."""
    model = onnx.load(str(src))
    producers = {o: n for n in model.graph.node for o in n.output}
    inits = {i.name: i for i in model.graph.initializer}
    frontier, seen = ["logits"], set()
    while frontier:
        node = producers.get(frontier.pop())
        if node is None or node.name in seen:
            continue
        seen.add(node.name)
        if node.op_type in ("MatMul", "Gemm"):
            for k, name in enumerate(node.input):
                if name in inits:
                    weight = numpy_helper.to_array(inits[name]) * np.float32(factor)
                    scaled = numpy_helper.from_array(weight.astype(np.float32), f"{name}.scaled")
                    model.graph.initializer.append(scaled)
                    node.input[k] = scaled.name
                    onnx.save(model, str(dst))
                    return
        frontier += list(node.input)
    raise AssertionError("no weight feeds the logits")


def test_planted_lm_head_fault_fails_check_and_the_clean_export_passes(
        fp32_run: list[dict[str, Any]], tiny_dirs: dict[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``harness check`` on an optimum-layout GPT-2 (``model.onnx``): detected as a causal LM from
    the reference directory, judged on logits and generation; the fault fails, the clean file passes."""
    logits = _records(fp32_run, tiny_dirs["gpt2"])["test_logits_parity"]
    exported = Path(next(a["path"] for k, a in logits["artifacts"].items() if k.endswith("model.onnx")))
    clean, faulty = tmp_path / "clean", tmp_path / "faulty"
    clean.mkdir()
    faulty.mkdir()
    shutil.copy(exported, clean / "model.onnx")
    _scale_lm_head(exported, faulty / "model.onnx", 1.5)
    common = ["--reference", str(tiny_dirs["gpt2"]), "--samples", "8", "--gen-samples", "4"]
    assert main(["check", *common, "--onnx", str(clean), "--out", str(tmp_path / "ok")]) == 0
    ok = [json.loads(line) for line in (tmp_path / "ok" / "results.jsonl").read_text().splitlines()]
    assert {r["suite"] for r in ok} >= {"check", "check_generation"}
    numeric = next(r for r in ok if r["suite"] == "check")
    assert numeric["data"]["reference"]["family"] == "causal_lm" and numeric["data"]["coverage"]["passes"]
    assert main(["check", *common, "--onnx", str(faulty), "--out", str(tmp_path / "bad")]) == 1
    bad = next(json.loads(line) for line in (tmp_path / "bad" / "results.jsonl").read_text().splitlines()
               if json.loads(line)["suite"] == "check")
    assert bad["verdict"] == "fail" and "logits" in bad["reason"], bad["reason"]


# -- extractive QA: the answer span is judged, not only the logits ------------------------------------------
class _MovedEnd:
    """A candidate QA file whose end logit at the best span's end is lowered just below the
    runner-up pair's score in the ``rows`` rows where the two are closest: there the span a
    pipeline returns moves, while the logits stay as close to the reference's as those gaps (a
    fault injected at the outputs of the real exported file, where quantization error lands)."""

    def __init__(self, runner: Any, span: Any, rows: int) -> None:
        self.runner, self.span, self.moved = runner, span, rows
        self.input_names, self.output_names = runner.input_names, runner.output_names

    def file_view(self) -> Any:
        return self.runner.file_view()  # the clean file: what a repro bundle re-runs

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from harness.metrics.spans import best_spans

        out = dict(self.runner.run(feeds))
        start, end = out["start_logits"], out["end_logits"].copy()
        context = self.span.context(feeds)
        gaps: dict[int, tuple[float, int]] = {}
        for row, (s, e) in enumerate(self.span.rows(feeds, out)):
            others = context[row:row + 1].copy()
            others[0, e] = False  # the best pair that does not use position e at all
            s2, e2 = best_spans(start[row:row + 1], end[row:row + 1], others)[0]
            if s >= 0 and s2 >= 0:
                gaps[row] = (float(start[row, s] + end[row, e] - start[row, s2] - end[row, e2]), int(e))
        for row in sorted(gaps, key=lambda r: gaps[r][0])[: self.moved]:
            gap, e = gaps[row]
            end[row, e] -= np.float32(gap + 1e-4 + 1e-3 * abs(end[row, e]))
        out["end_logits"] = end
        return out


def test_qa_answer_span_is_gated_and_a_moved_span_fails_while_the_logits_cosine_stays_high(
        fp32_run: list[dict[str, Any]], tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    from harness.core import Precision, RunOptions, Settings, Variant
    from harness.judge.numeric import run_graph_parity
    from harness.judge.workspace import Workspace
    from harness.repro.bundle import load_bundle, rejudge, write_bundle
    from harness.runners import PROVIDERS
    from harness.runners.ort_runner import OrtGraphRunner
    from harness.zoo.base import register

    qa = _records(fp32_run, tiny_dirs["distilbert"])["test_logits_parity"]
    assert "model/answer_span" in qa["data"]["coverage"]["required"]
    assert "model/answer_span" in qa["data"]["coverage"]["gated"]
    assert qa["metrics"]["model.answer_span.span_agreement"] == 1.0  # FP32: every row's span is PyTorch's
    assert qa["thresholds"]["model.answer_span.span_agreement"] == {"threshold": 1.0, "op": ">="}
    exported = next(a["path"] for k, a in qa["artifacts"].items() if k.endswith("model.onnx"))
    ws = Workspace(RunOptions(settings=Settings(samples=8, batch_size=8)))
    model = ws.model(register(spec_for_directory(tiny_dirs["distilbert"])).name)
    family = ws.family(model)
    (graph,) = family.graphs(model)
    batches = ws.refs.parity_batches(model, family, graph)
    clean = OrtGraphRunner(exported, "CPUExecutionProvider")
    moved = _MovedEnd(clean, graph.derived[0], 2)
    try:
        outputs = run_graph_parity(moved, graph, batches, Precision.INT8)
        bundle = write_bundle(tmp_path / "repro", variant=Variant(model.name, Precision.INT8, PROVIDERS["ort_cpu"]),
                              graph=graph, runner=moved, batches=batches, judged=outputs, runtime=None, threads=1)
    finally:
        clean.close()
    judged = {o.output: o for o in outputs}
    end, span = judged["end_logits"], judged["answer_span"]
    assert end.metrics["cosine"] > 0.999 and not end.failures()  # every INT8 logits gate passes ...
    assert not judged["start_logits"].failures()
    assert span.metrics["span_agreement"] == 0.75 and span.n_compared == 8  # ... and two of 8 spans moved
    assert span.metrics["span_token_f1"] < 1.0
    (failure,) = span.failures()
    assert failure.metric == "span_agreement" and "reference span tokens" in failure.where
    # the span-only failure is bundled with its recipe and re-derived from the file's own outputs:
    # the clean file does not reproduce the fault injected after it
    assert bundle is not None
    again = rejudge(load_bundle(bundle))
    assert again.recorded == [("answer_span", "span_agreement")] and not again.reproduces
    assert {o.output: o.metrics for o in again.outputs}["answer_span"]["span_agreement"] == 1.0


def test_check_reports_the_answer_span_of_a_qa_file(fp32_run: list[dict[str, Any]], tiny_dirs: dict[str, Path],
                                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qa = _records(fp32_run, tiny_dirs["distilbert"])["test_logits_parity"]
    exported = Path(next(a["path"] for k, a in qa["artifacts"].items() if k.endswith("model.onnx")))
    files = tmp_path / "qa"
    files.mkdir()
    shutil.copy(exported, files / "model.onnx")
    assert main(["check", "--reference", str(tiny_dirs["distilbert"]), "--onnx", str(files), "--samples", "4",
                 "--out", str(tmp_path / "out")]) == 0
    assert "span_agreement" in capsys.readouterr().out
    (record,) = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert record["metrics"]["model.answer_span.span_agreement"] == 1.0
    assert "model/answer_span" in record["data"]["coverage"]["gated"]
