"""The decoding loops: equal to HF ``generate()`` token for token, and ORT equal to PyTorch.

The loops are only worth trusting as a reference if, on the PyTorch FP32 model, they do
exactly what ``generate()`` does with the same settings: greedy and beam, seq2seq and
decoder-only, with and without the KV cache. Then the same loop over ONNX Runtime FP32
must give the same tokens. Small synthetic steppers pin the search rules themselves
(EOS, padding of finished rows, forced EOS, repetition penalty arithmetic).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

from harness.core import UsageError
from harness.data.corpus import load_corpus
from harness.families.steppers import Start
from harness.generation import GenerationSettings, decode_texts, prompt_batch, settings_for_model
from harness.generation.decode import torch_threads
from harness.generation.processors import repetition_penalty
from harness.generation.search import beam_search, greedy
from tests.conftest import variant


def hf_tokens(model, texts, settings: GenerationSettings, batch_size: int) -> list[list[int]]:
    """``generate()`` on the FP32 model, cut like the loops cut: new tokens through the first EOS."""
    out: list[list[int]] = []
    with torch_threads(1), torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            ids, mask = prompt_batch(model, texts[i: i + batch_size])
            seqs = model.model.generate(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                                        **settings.hf_kwargs())
            prompt = 1 if model.family == "seq2seq" else ids.shape[1]
            for row in seqs[:, prompt:].tolist():
                end = next((j + 1 for j, t in enumerate(row) if t in settings.eos_token_ids), len(row))
                out.append(row[:end])
    return out


def loop_tokens(workspace, model, settings, texts, provider: str, batch_size: int) -> list[list[int]]:
    v = variant(model.name, "fp32", provider)
    return decode_texts(workspace.backend(v, model), model, workspace.family(model), v, texts, settings,
                        batch_size).tokens


CASES = [
    # (model, corpus, overrides): marian-tiny's random weights collapse onto one token, so a
    # repetition penalty makes its output vary (and tests the penalty); numbers-en-zh is
    # trained, ends sentences with EOS at different steps, and so tests finished rows.
    ("marian-tiny", "sentences_en", {"repetition_penalty": 2.0}),
    ("llama-tiny", "sentences_en", {}),
    ("llama-tiny", "sentences_en", {"repetition_penalty": 1.3}),
    ("numbers-en-zh", "numbers_en_zh", {}),
]


@pytest.mark.parametrize("cache", [True, False], ids=["cached", "uncached"])
@pytest.mark.parametrize("beams", [1, 3], ids=["greedy", "beam3"])
@pytest.mark.parametrize("name,corpus,overrides", CASES, ids=[f"{c[0]}{'-rp' if c[2] else ''}" for c in CASES])
def test_loop_equals_generate_and_ort_equals_torch(workspace, name, corpus, overrides, beams, cache):
    model = workspace.model(name)
    source = load_corpus(corpus).sources
    texts = [source[i] for i in range(0, len(source), max(1, len(source) // 12))][:12]
    settings = settings_for_model(model.model, max_new_tokens=16, num_beams=beams, use_cache=cache, **overrides)
    expected = hf_tokens(model, texts, settings, batch_size=6)
    ours = loop_tokens(workspace, model, settings, texts, "torch_cpu", batch_size=6)
    assert ours == expected
    assert len({t for row in expected for t in row}) > 3, "degenerate test: the decode collapsed onto a few tokens"
    assert loop_tokens(workspace, model, settings, texts, "ort_cpu", batch_size=6) == ours


def test_cached_and_uncached_paths_agree_on_ort(workspace):
    model = workspace.model("llama-tiny")
    texts = load_corpus("sentences_en").sources[:8]
    cached = settings_for_model(model.model, max_new_tokens=12)
    uncached = settings_for_model(model.model, max_new_tokens=12, use_cache=False)
    assert loop_tokens(workspace, model, cached, texts, "ort_cpu", 4) == loop_tokens(
        workspace, model, uncached, texts, "ort_cpu", 4)


# -- the search rules on synthetic steppers ------------------------------------------------------
class ScriptedStepper:
    """Returns scripted logits per step (rows x vocab); records what it was fed."""

    def __init__(self, steps: list[np.ndarray]) -> None:
        self.steps, self.histories, self.reorders = steps, [], []

    def step(self, history: np.ndarray) -> np.ndarray:
        self.histories.append(history.copy())
        return self.steps[min(len(self.histories) - 1, len(self.steps) - 1)].astype(np.float32)

    def reorder(self, rows: np.ndarray) -> None:
        self.reorders.append(rows.copy())


def one_hot(rows: int, vocab: int, picks: list[int]) -> np.ndarray:
    logits = np.zeros((rows, vocab), np.float32)
    logits[np.arange(rows), picks] = 5.0
    return logits


def test_greedy_stops_rows_at_eos_and_pads_finished_rows():
    eos, pad = 1, 0
    steps = [one_hot(2, 6, [4, 1]), one_hot(2, 6, [5, 3]), one_hot(2, 6, [1, 3])]
    stepper = ScriptedStepper(steps)
    settings = GenerationSettings(max_new_tokens=10, eos_token_ids=(eos,), pad_token_id=pad)
    tokens = greedy(Start(np.array([[2], [2]]), stepper), settings)
    assert tokens == [[4, 5, 1], [1]]
    # row 1 finished at step one: it is fed padding afterwards, and the loop stops when all are done
    assert stepper.histories[-1].tolist() == [[2, 4, 5], [2, 1, pad]]
    assert len(stepper.histories) == 3


def test_greedy_forced_eos_and_max_new_tokens():
    steps = [one_hot(1, 5, [3])]
    forced = GenerationSettings(max_new_tokens=4, eos_token_ids=(1,), pad_token_id=0, forced_eos_token_id=1)
    assert greedy(Start(np.array([[2]]), ScriptedStepper(steps)), forced) == [[3, 3, 3, 1]]
    plain = GenerationSettings(max_new_tokens=4, eos_token_ids=(1,), pad_token_id=0)
    assert greedy(Start(np.array([[2]]), ScriptedStepper(steps)), plain) == [[3, 3, 3, 3]]


def test_suppressed_tokens_are_never_chosen():
    settings = GenerationSettings(max_new_tokens=3, eos_token_ids=(1,), pad_token_id=0, suppress_tokens=(3,))
    assert greedy(Start(np.array([[2]]), ScriptedStepper([one_hot(1, 5, [3])])), settings) == [[0, 0, 0]]


@pytest.mark.parametrize("penalty", [0.7, 1.3])
def test_repetition_penalty_matches_transformers(penalty):
    gen = torch.Generator().manual_seed(0)
    history = torch.randint(0, 50, (4, 9), generator=gen)
    scores = torch.randn(4, 50, generator=gen)
    ignore = torch.tensor([0, 3, 0, 9])
    expected = RepetitionPenaltyLogitsProcessor(penalty, prompt_ignore_length=ignore)(history, scores.clone())
    assert torch.equal(repetition_penalty(history, scores.clone(), penalty, ignore), expected)
    assert torch.equal(repetition_penalty(history, scores, 1.0, None), scores)


def test_beam_search_keeps_the_better_finished_hypothesis_and_reorders_the_cache():
    # beam 0 greedily takes token 4 (p high) then is forced into a poor tail; the second-best
    # first token 3 leads to EOS with a much better total log-probability.
    vocab, eos = 6, 1
    first = np.full((2, vocab), -10.0, np.float32)
    first[:, 4], first[:, 3] = 0.0, -0.4
    later = np.full((2, vocab), -10.0, np.float32)
    stepper = _BranchStepper(first, later, eos)
    settings = GenerationSettings(max_new_tokens=4, num_beams=2, eos_token_ids=(eos,), pad_token_id=0)
    tokens = beam_search(Start(np.array([[2], [2]]), stepper), settings)
    assert tokens == [[3, 1]]
    assert stepper.reorders and all(set(r.tolist()) <= {0, 1} for r in stepper.reorders)


class _BranchStepper(ScriptedStepper):
    """After token 3, EOS is near certain; after token 4 every continuation is unlikely."""

    def __init__(self, first: np.ndarray, later: np.ndarray, eos: int) -> None:
        super().__init__([first])
        self.later, self.eos = later, eos

    def step(self, history: np.ndarray) -> np.ndarray:
        self.histories.append(history.copy())
        if history.shape[1] == 1:
            return self.steps[0]
        out = np.full((history.shape[0], self.later.shape[1]), -6.0, np.float32)
        out[history[:, -1] == 3, self.eos] = 0.0
        return out


# -- settings ----------------------------------------------------------------------------------
def test_settings_follow_the_model_generation_config(workspace):
    marian = settings_for_model(workspace.model("marian-tiny").model, max_new_tokens=8)
    assert marian.eos_token_ids == (1,) and marian.pad_token_id == 0 and marian.decoder_start_token_id == 0
    assert marian.forced_eos_token_id == 1 and marian.max_new_tokens == 8
    kwargs = marian.hf_kwargs()
    assert kwargs["do_sample"] is False and kwargs["forced_eos_token_id"] == 1 and kwargs["eos_token_id"] == [1]


def test_unsupported_generation_config_is_refused_not_ignored(workspace):
    model = workspace.model("marian-tiny").model
    saved = model.generation_config.no_repeat_ngram_size
    model.generation_config.no_repeat_ngram_size = 3
    try:
        with pytest.raises(UsageError, match="no_repeat_ngram_size=3"):
            settings_for_model(model)
    finally:
        model.generation_config.no_repeat_ngram_size = saved


def test_single_token_bad_words_become_suppressed_tokens(workspace):
    model = workspace.model("marian-tiny").model
    model.generation_config.bad_words_ids = [[0]]
    try:
        assert settings_for_model(model).suppress_tokens == (0,)
        model.generation_config.bad_words_ids = [[5, 6]]
        with pytest.raises(UsageError, match="multi-token"):
            settings_for_model(model)
    finally:
        model.generation_config.bad_words_ids = None


@pytest.mark.parametrize("bad", [{"max_new_tokens": 0}, {"num_beams": 0}, {"repetition_penalty": 0.0}])
def test_invalid_settings_are_usage_errors(bad):
    with pytest.raises(UsageError):
        GenerationSettings(**bad)


def test_torch_threads_are_restored():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_bench_decode_prints_cached_and_uncached_rates(capsys):
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "scripts" / "bench_decode.py"
    spec = importlib.util.spec_from_file_location("bench_decode", path)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--models", "llama-tiny", "--new-tokens", "4", "--sentences", "2", "--batch-size", "2",
                       "--repeats", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| llama-tiny")]
    assert [r.split("|")[2].strip() for r in rows] == ["torch_cpu", "ort_cpu"]
    for r in rows:
        cached, uncached, ratio = (c.strip() for c in r.split("|")[3:6])
        assert float(cached) > 0 and float(uncached) > 0
        assert float(ratio.rstrip("x")) == pytest.approx(float(cached) / float(uncached), rel=0.01, abs=0.01)
