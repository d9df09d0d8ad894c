"""``harness check`` on files the mainstream exporters write, faithful and with planted faults.

Every file comes from the real tool (tests/exporters.py: optimum-onnx's CLI, ORTOptimizer and
ORTQuantizer, onnxruntime-genai's model builder, ``onnxruntime.transformers.optimizer``,
onnxslim), run on the trained decoder ``numbers-llama`` and on ``bert-tiny``, each saved with
``save_pretrained`` as a team would hand it over. A faithful file must pass with generation judged
on many padded prompts (not one sentence at batch 1); a planted fault (tests/plant.py) must fail
with a message naming the check that caught it. docs/check.md's exporter table is these verdicts.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.cli import main
from tests import exporters, plant
from tests.exporters import Tool

_OPTIMUM = ("-m", "optimum.commands.optimum_cli", "export", "onnx", "--model", "{src}")
_ORT_OPT = ("-m", "onnxruntime.transformers.optimizer", "--input", "{src}/model.onnx", "--output",
            "{out}/model.onnx", "--model_type", "bert", "--num_heads", "0", "--hidden_size", "0")
_OPTIMIZE = ("from optimum.onnxruntime import AutoOptimizationConfig as C, ORTOptimizer as O; "
             "O.from_pretrained('{src}').optimize(C.{level}(), save_dir='{out}')")
_QUANTIZE = ("from optimum.onnxruntime import ORTQuantizer as Q; "
             "from optimum.onnxruntime.configuration import AutoQuantizationConfig as C; "
             "Q.from_pretrained('{src}', file_name='model.onnx').quantize("
             "C.avx2(is_static=False, per_channel=False, reduce_range=True), save_dir='{out}')")
#: avx2 with 7-bit weights: optimum's avx512_vnni config (full 8 bits) saturates ONNX Runtime's u8s8 kernels
#: on a CPU without VNNI (this one; docs/pitfalls.md)

TOOLS = {
    "optimum-with-past": Tool("optimum-with-past", (*_OPTIMUM, "--task", "text-generation-with-past", "{out}")),
    "optimum-no-past": Tool("optimum-no-past", (*_OPTIMUM, "--task", "text-generation", "{out}")),
    "optimum-O2": Tool("optimum-O2", ("-c", _OPTIMIZE.replace("{level}", "O2"))),
    "optimum-O3": Tool("optimum-O3", ("-c", _OPTIMIZE.replace("{level}", "O3"))),
    "optimum-int8": Tool("optimum-int8", ("-c", _QUANTIZE)),
    "optimum-bert": Tool("optimum-bert", (*_OPTIMUM, "--task", "text-classification", "{out}")),
    **{f"genai-{p}": Tool(f"genai-{p}", ("-m", "onnxruntime_genai.models.builder", "-i", "{src}", "-o", "{out}",
                                          "-p", p, "-e", "cpu", "-c", "{out}/.cache"), in_venv=False)
       for p in ("fp32", "int8", "int4")},
    "ort-optimizer": Tool("ort-optimizer", _ORT_OPT, in_venv=False),
    "ort-optimizer-fp16": Tool("ort-optimizer-fp16", (*_ORT_OPT, "--float16"), in_venv=False),
    "onnxslim": Tool("onnxslim", ("-m", "onnxslim", "{src}/model.onnx", "{out}/model.onnx")),
}


@pytest.fixture(scope="session")
def tools_available() -> None:
    try:
        exporters.venv()
    except exporters.Unavailable as exc:
        if exporters.required():
            pytest.fail(f"{exporters.REQUIRE_ENV}=1: {exc}")
        pytest.skip(str(exc))


def _saved(name: str, root: Path) -> Path:
    """The zoo model ``name`` as a team hands it over: loaded and ``save_pretrained`` into a folder."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    from harness.zoo.base import materialize, resolve

    spec = resolve(name)
    auto = {"causal_lm": AutoModelForCausalLM, "encoder": AutoModelForSequenceClassification}.get(spec.family, AutoModel)
    src = materialize(spec)
    out = root / name
    auto.from_pretrained(str(src)).save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(src)).save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def sources(tools_available, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("exporter-sources")
    return {"decoder": _saved("numbers-llama", root), "bert": _saved("bert-tiny", root)}


@dataclass(frozen=True)
class Case:
    """One artifact: the tool chain that writes it (each tool reads the previous one's output),
    the file judged inside the last output, and the reference it is judged against."""

    chain: tuple[str, ...]
    file: str = "model.onnx"
    reference: str = "numbers-llama"

    @property
    def id(self) -> str:
        return "+".join(self.chain)


def artifact(case: Case, sources: dict[str, Path]) -> Path:
    src = sources["bert" if case.reference == "bert-tiny" else "decoder"]
    for name in case.chain:
        src = exporters.export(TOOLS[name], src)
    return src / case.file


@dataclass(frozen=True)
class Verdict:
    exit: int
    output: str
    records: tuple[dict, ...]

    @property
    def failures(self) -> str:
        """Every failing or erroring record's id and reason, one block each."""
        return "\n".join(f"{r['id']}: {r.get('verdict')}: {r.get('reason') or ''}" for r in self.records
                         if r.get("verdict") not in ("pass", "skip"))


def check(reference: str, onnx: Path, out: Path, capsys) -> Verdict:
    """``harness check`` as a user runs it; a decoder's generation on 16 prompts, 2 left-padded batches of 8."""
    args = ["check", "--reference", reference, "--onnx", str(onnx), "--out", str(out)]
    if reference != "bert-tiny":
        args += ["--samples", "16", "--gen-samples", "16"]
    code = main(args)
    captured = capsys.readouterr()
    lines = (out / "results.jsonl").read_text().splitlines() if (out / "results.jsonl").is_file() else []
    return Verdict(code, captured.out + captured.err, tuple(json.loads(line) for line in lines))


#: false reds of faithful decoder exports that the artifact I/O protocol work removes (issue "judge the
#: exports teams really ship"): while one of these is the cause, a faithful file's failure is expected
#: and reported as such; once judging is fixed the test passes, and any other failure fails it
KNOWN_FALSE_REDS = {
    "batch_size must be 1 when sequence_length > 1": "GroupQueryAttention (ORT CPU) needs right-padded prompts "
                                                     "and batch 1 for multi-token steps; the harness left-pads 8",
    "presents.cosine": "K/V compared at left-pad positions no query reads (exports write other values there)",
    "tied_axes": "one sequence name for input_ids and attention_mask is right for a cacheless export",
}


def known_false_red(verdict: Verdict) -> str | None:
    failures = verdict.failures
    causes = [why for sign, why in KNOWN_FALSE_REDS.items() if sign in failures]
    return "; ".join(causes) or None


DECODER = [Case(("optimum-with-past",)), Case(("optimum-no-past",)), Case(("optimum-with-past", "optimum-O2"),
           file="model_optimized.onnx"), Case(("optimum-with-past", "optimum-O3"), file="model_optimized.onnx"),
           Case(("genai-fp32",)), Case(("genai-int8",)), Case(("genai-int4",)),
           Case(("optimum-with-past", "onnxslim")), Case(("optimum-with-past", "ort-optimizer"))]
BERT = [Case(("optimum-bert",), reference="bert-tiny"),
        Case(("optimum-bert", "ort-optimizer-fp16"), reference="bert-tiny")]


@pytest.mark.parametrize("case", DECODER + BERT, ids=lambda c: f"{c.reference}:{c.id}")
def test_a_faithful_export_passes(case: Case, sources, tmp_path, capsys):
    verdict = check(case.reference, artifact(case, sources), tmp_path / "out", capsys)
    if verdict.exit == 1 and case.reference != "bert-tiny" and (cause := known_false_red(verdict)):
        pytest.xfail(f"known false red: {cause}")
    assert verdict.exit == 0, verdict.failures or verdict.output[-3000:]
    assert verdict.records and all(r["verdict"] == "pass" for r in verdict.records)


FAULTS: dict[str, Callable[[Path, Path], Path]] = {
    "weight x1.05": plant.scale_weight, "swapped K/V": plant.swap_kv, "mask ignored": plant.ignore_mask,
    "positions not offset": plant.positions_not_offset}
#: (case, fault, the check the failure must name)
FAULTY = [(Case(("optimum-with-past",)), "weight x1.05", "model_prefill/logits: cosine"),
          (Case(("optimum-with-past",)), "swapped K/V", "cached_decoding"),
          (Case(("optimum-with-past",)), "mask ignored", "model_prefill/logits"),
          (Case(("optimum-with-past",)), "positions not offset", "model_step/logits"),
          (Case(("genai-fp32",)), "weight x1.05", "model_prefill/logits: cosine"),
          (Case(("genai-int4",)), "swapped K/V", "cached_decoding"),
          (Case(("optimum-bert", "onnxslim"), reference="bert-tiny"), "weight x1.05", "model/logits: norm_max_abs")]


@pytest.mark.parametrize(("case", "fault", "named"), FAULTY,
                         ids=[f"{c.reference}:{c.id}:{f}" for c, f, _ in FAULTY])
def test_a_planted_fault_fails_naming_the_check(case: Case, fault: str, named: str, sources, tmp_path, capsys):
    faulty = FAULTS[fault](artifact(case, sources), tmp_path / "faulty")
    verdict = check(case.reference, faulty, tmp_path / "out", capsys)
    assert verdict.exit == 1, verdict.output[-3000:]
    assert named in verdict.failures, verdict.failures
    shutil.rmtree(tmp_path / "faulty")


def test_optimum_int8_is_judged_at_int8_decodes_like_pytorch_and_its_extra_drift_is_named(sources, tmp_path, capsys):
    """ORTQuantizer's dynamic INT8 also quantizes the attention's activation x activation MatMuls
    (29 MatMulInteger; the harness's own INT8 of the same model keeps those 6 in float): on
    numbers-llama its logits drift norm_max_abs 0.28 / KL 0.07, past INT8's gates (0.15 / 0.02), while
    every prompt still decodes as PyTorch's. The gate reports that real extra error by name; it is
    not a judging error, and ``--tolerance`` is the user's way to accept it."""
    case = Case(("optimum-with-past", "optimum-int8"), file="model_quantized.onnx")
    verdict = check(case.reference, artifact(case, sources), tmp_path / "out", capsys)
    by_kind = {r["id"].split("[")[0]: r for r in verdict.records}
    assert {r["precision"] for r in verdict.records} == {"int8"}
    assert by_kind["check_generation"]["verdict"] == "pass"
    assert by_kind["check_generation"]["metrics"]["gen_token_exact_match"] == 1.0
    assert by_kind["check"]["verdict"] == "fail" and "model_prefill/logits: norm_max_abs" in by_kind["check"]["reason"]
