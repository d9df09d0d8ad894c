"""Issue 23: what a Hugging Face model is judged as comes from transformers' task mappings,
its limits are checked before any work, and text metrics are defined on degenerate outputs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.core import Precision, UsageError
from harness.families import detect_family, family_for
from harness.families.limits import check_limits, generation_budget, learned_positions
from harness.families.tasks import tasks_of_architecture
from harness.judge.generation import gen_checks, score_rows
from harness.metrics.text import corpus_scores

# -- detection -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("arch", "encoder_decoder", "family"), [
    ("GPT2LMHeadModel", False, "causal_lm"),  # ends in "Model": the old suffix rule called it an encoder
    ("Qwen2ForCausalLM", False, "causal_lm"),
    ("MistralForCausalLM", False, "causal_lm"),
    ("BartForConditionalGeneration", True, "seq2seq"),  # listed as seq2seq LM *and* masked LM
    ("T5ForConditionalGeneration", True, "seq2seq"),
    ("MarianMTModel", True, "seq2seq"),
    ("DistilBertModel", False, "encoder"),
    ("RobertaForSequenceClassification", False, "encoder"),
    ("BertForTokenClassification", False, "token_classification"),
    ("DistilBertForQuestionAnswering", False, "question_answering"),
    ("RobertaForMaskedLM", False, "masked_lm"),
])
def test_the_head_in_transformers_mappings_picks_the_family(arch: str, encoder_decoder: bool, family: str) -> None:
    config = {"architectures": [arch], "is_encoder_decoder": encoder_decoder}
    assert detect_family(config) == family
    assert family_for(family).task(config) in family_for(family).tasks


def test_an_lm_head_is_never_judged_as_an_encoder() -> None:
    """Every causal-LM class transformers lists is detected as a generating family."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    for cls in list(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())[:200]:
        if len(tasks_of_architecture(cls)) == 1:
            name = detect_family({"architectures": [cls]})
            assert name is not None and family_for(name).generates, cls


def test_ambiguous_architecture_is_one_line_naming_the_setting() -> None:
    with pytest.raises(UsageError) as info:
        detect_family({"architectures": ["XLMWithLMHeadModel"]})
    text = str(info.value)
    assert "\n" not in text and "causal_lm and masked_lm" in text and "--family" in text


def _model_dir(tmp_path: Path, config: dict[str, object]) -> Path:
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    return d


@pytest.mark.parametrize("config", [{"architectures": ["FrobnicatorForTelepathy"], "model_type": "frob"},
                                    {"model_type": "bert"}])
def test_unknown_architecture_is_exit_2_with_one_line(tmp_path: Path, config: dict[str, object],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    directory = _model_dir(tmp_path, config)
    assert main(["init", str(directory), "--dir", str(tmp_path), "--ci", "none"]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "--family" in lines[0] and str(config.get("architectures", "no architectures"))[:12] in lines[0]


# -- limits ------------------------------------------------------------------------------------------


class _Tok(SimpleNamespace):
    def __len__(self) -> int:
        return int(self.size)


def test_pad_equals_eos_when_the_tokenizer_has_no_pad() -> None:
    tok = _Tok(size=100, pad_token=None, eos_token="<|endoftext|>", pad_token_id=None, eos_token_id=7,
               bos_token_id=7, padding_side="right")

    limits = check_limits("m", {"vocab_size": 100, "n_positions": 64}, _PadSetter(tok), generates=True,
                          encoder_decoder=False)
    assert limits.pad_is_eos and limits.pad_token_id == 7 and limits.positions == 64


class _PadSetter:
    """A tokenizer whose ``pad_token`` setter fills ``pad_token_id`` as transformers' does."""

    def __init__(self, tok: _Tok) -> None:
        self.__dict__["_tok"] = tok

    def __getattr__(self, name: str) -> object:
        return getattr(self._tok, name)

    def __setattr__(self, name: str, value: object) -> None:
        setattr(self._tok, name, value)
        if name == "pad_token":
            self._tok.pad_token_id = self._tok.eos_token_id

    def __len__(self) -> int:
        return len(self._tok)


@pytest.mark.parametrize(("config", "tok", "needle"), [
    ({"vocab_size": 100, "is_encoder_decoder": True, "decoder_start_token_id": 150}, dict(size=100),
     "decoder_start_token_id 150 is outside"),
    ({"vocab_size": 100, "is_encoder_decoder": True}, dict(size=100), "decoder_start_token_id"),
    ({"vocab_size": 100}, dict(size=100, pad_token_id=None, eos_token=None, eos_token_id=None), "neither a pad"),
])
def test_model_limits_refused_before_work(config: dict[str, object], tok: dict[str, object], needle: str) -> None:
    base = dict(pad_token="<pad>", pad_token_id=0, eos_token="</s>", eos_token_id=1, bos_token_id=None,
                padding_side="right")
    with pytest.raises(UsageError) as info:
        check_limits("dir", config, _Tok(**{**base, **tok}), generates=True,
                     encoder_decoder=bool(config.get("is_encoder_decoder")))
    assert needle in str(info.value) and str(info.value).startswith("dir: ")


def test_roberta_positions_leave_out_the_padding_offset() -> None:
    assert learned_positions({"model_type": "roberta", "max_position_embeddings": 66, "pad_token_id": 1}) == 64
    assert learned_positions({"model_type": "gpt2", "n_positions": 128}) == 128
    assert learned_positions({"model_type": "t5"}) is None


def test_prompt_plus_new_tokens_fit_the_position_table() -> None:
    model = SimpleNamespace(config={"n_positions": 64})
    budget = generation_budget(model, 32, shares_positions=True, input_limit=64)  # type: ignore[arg-type]
    assert budget.new_tokens + budget.prompt_tokens <= 64 and budget.new_tokens == 32
    assert budget.prompt_tokens == 32
    seq2seq = generation_budget(model, 32, shares_positions=False, input_limit=64)  # type: ignore[arg-type]
    assert seq2seq.new_tokens == 32 and seq2seq.prompt_tokens is None


# -- text metrics on degenerate outputs --------------------------------------------------------------

DEGENERATE = {
    "empty": [""] * 48,  # BART's 48 identical empty outputs
    "whitespace": [" ", "\t"],
    "single_token": ["a", "b", "c"],
    "no_4grams": ["one two three", "four five"],
    "mixed_empty": ["", "the cat sat on the mat", ""],
}
IDENTICAL = {"bleu": 100.0, "chrf": 100.0, "exact_match": 1.0, "char_edit_distance": 0.0,
             "norm_edit_distance": 0.0, "length_ratio": 1.0}


@pytest.mark.parametrize("case", sorted(DEGENERATE))
@pytest.mark.parametrize("metric", sorted(IDENTICAL))
def test_identical_degenerate_outputs_score_identical(case: str, metric: str) -> None:
    texts = DEGENERATE[case]
    scores = corpus_scores(texts, list(texts), lang=None)
    assert scores.metrics[metric] == pytest.approx(IDENTICAL[metric]), (case, scores.metrics)


def test_differing_empty_output_still_scores_low() -> None:
    """The identical rule never hides a difference: empty against text is no agreement."""
    scores = corpus_scores(["", ""], ["the cat sat", "on the mat"], lang=None).metrics
    assert scores["bleu"] == 0.0 and scores["exact_match"] == 0.0 and scores["norm_edit_distance"] == 1.0


def test_bart_identical_empty_generations_pass_every_generation_gate() -> None:
    rows = [{"source": f"sentence {i}", "reference": None, "pytorch": "", "variant": "",
             "pytorch_tokens": [2], "variant_tokens": [2]} for i in range(48)]
    metrics, _ = score_rows(rows, None)
    for precision in Precision:
        failed = [c.metric for c in gen_checks(precision, has_references=False)
                  if not c.passes(metrics.get(c.metric, float("nan")))]
        assert not failed, (precision, failed, metrics)
