"""The generation gate fails when it must: a decoder exported without its cross-attention mask.

PITFALLS #4: without ``encoder_attention_mask`` the decoder attends to the encoder's
padding. Only padded batches reveal it, and only as changed *text* if the model's output
depends on its input, so this uses the trained numbers-en-zh translator (the random-weight
marian-tiny decodes the same tokens whatever the source). The correct export must pass
under the same conditions, so the failure is the fault's, not the setup's.
"""

from __future__ import annotations

import json

import pytest

from harness.core import RunOptions
from harness.families.seq2seq import Seq2SeqFamily
from harness.judge.generation import GenerationRequest, generation_parity
from harness.judge.numeric import GateFailure
from harness.judge.workspace import Workspace
from tests.conftest import variant

#: 64 sentences in batches of 16: every batch mixes lengths, so rows are padded
PADDED = GenerationRequest(samples=64, batch_size=16)

FAULTY_SUITE = '''
import pytest
from harness.families.seq2seq import Seq2SeqFamily
from harness.testing import GenerationRequest, judge

REQUEST = GenerationRequest(samples=64, batch_size=16)


@pytest.mark.harness(generates=True)
def test_correct_export(variant, harness):
    judge(harness, REQUEST).assert_ok()


@pytest.mark.harness(generates=True)
def test_decoder_without_encoder_mask(variant, harness):
    judge(harness, REQUEST, family=Seq2SeqFamily(encoder_mask=False)).assert_ok()
'''


def test_missing_encoder_mask_changes_the_text_and_fails_the_gate(workspace):
    v = variant("numbers-en-zh", "fp32", "ort_cpu")
    good = generation_parity(workspace, v, PADDED)
    assert good.passed and good.metrics["gen_token_exact_match"] == 1.0
    bad = generation_parity(workspace, v, PADDED, family=Seq2SeqFamily(encoder_mask=False))
    assert bad.metrics["gen_token_exact_match"] < 1.0
    assert bad.metrics["gen_bleu_vs_ref"] < good.metrics["gen_bleu_vs_ref"]
    with pytest.raises(GateFailure, match=r"gen_token_exact_match = [\d.]+ \(must be >= 1\)[\s\S]*"
                                          r"gen_bleu_vs_ref = [\d.]+ \(must be >= 99\)[\s\S]*"
                                          r"first divergence: sentence \d+ at token \d+ "
                                          r"\(pytorch \d+ '.+' vs variant \d+ '.+'\)"):
        bad.assert_ok()


def test_missing_encoder_mask_is_invisible_without_padding():
    """One sentence per batch: nothing is padded, so the faulty decoder decodes the same text."""
    ws = Workspace(RunOptions())
    unpadded = GenerationRequest(samples=12, batch_size=1)
    result = generation_parity(ws, variant("numbers-en-zh", "fp32", "ort_cpu"), unpadded,
                               family=Seq2SeqFamily(encoder_mask=False))
    assert result.passed and result.metrics["gen_token_exact_match"] == 1.0


def test_verdicts_in_records_fail_for_the_fault_and_pass_for_the_correct_export(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_gen_faults=FAULTY_SUITE)
    out = tmp_path / "run"
    result = pytester.runpytest_inprocess("--harness-models=numbers-en-zh", "--harness-precisions=fp32",
                                          "--harness-providers=ort_cpu", f"--harness-out={out}",
                                          "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    records = {r["id"].split("[")[0]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    good, bad = records["test_correct_export"], records["test_decoder_without_encoder_mask"]
    assert good["verdict"] == "pass" and good["metrics"]["gen_token_exact_match"] == 1.0
    assert bad["verdict"] == "fail"  # a gate failure, not an error
    assert "gen_token_exact_match" in bad["reason"] and "first divergence: sentence" in bad["reason"]
    assert bad["metrics"]["gen_token_exact_match"] < 1.0 and bad["thresholds"]["gen_token_exact_match"]["op"] == ">="
    assert bad["data"]["worst_pairs"] and bad["data"]["worst_pairs"][0]["reference"]
