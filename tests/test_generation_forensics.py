"""Generation forensics (issue 14): the first divergent step of a planted divergence, both
sides' top-k there, and the near-tie call on a constructed near-tie and a constructed clear case.

The decoders are constructed: a stepper whose next-token logits are a table indexed by the
step, decoded by the harness's own greedy search, so the divergence is exactly where it was
planted and the margins are known numbers."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pytest

from harness.families.steppers import Start
from harness.generation import Decoded, GenerationSettings, greedy
from harness.generation.forensics import NEAR_TIE_MARGIN, TOP_K, investigate, near_tie, pick_rows
from harness.judge.generation import make_rows

VOCAB, EOS = 8, 1
#: what both decoders emit per step for row 0 (row 1 always emits the same)
PATH = [2, 3, 4, 5, EOS]
PLANTED_STEP = 2


class _TableStepper:
    """Logits of the step after ``history``: a peaked distribution on PATH[step], with a
    planted competitor at PLANTED_STEP whose score ``edit`` sets (row 0 only)."""

    def __init__(self, edit: dict[int, float]) -> None:
        self.edit = edit

    def step(self, history: np.ndarray) -> np.ndarray:
        step = history.shape[1] - 1  # the prompt is one start token
        out = np.zeros((history.shape[0], VOCAB), np.float32)
        for r in range(history.shape[0]):
            out[r] = np.linspace(0.0, 0.3, VOCAB)  # a defined order for the tail of the top-k
            out[r, PATH[min(step, len(PATH) - 1)]] = 5.0
            if r == 0 and step == PLANTED_STEP:
                for token, score in self.edit.items():
                    out[r, token] = score
        return out

    def reorder(self, rows: np.ndarray) -> None:
        pass


class _Starter:
    def __init__(self, edit: dict[int, float]) -> None:
        self.edit = edit

    def start(self, input_ids: np.ndarray, attention_mask: np.ndarray, expand: int, use_cache: bool) -> Start:
        return Start(np.zeros((input_ids.shape[0], 1), np.int64), _TableStepper(self.edit))


SETTINGS = GenerationSettings(max_new_tokens=8, eos_token_ids=(EOS,), pad_token_id=0)


def _prompts(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    return np.ones((len(texts), 3), np.int64), np.ones((len(texts), 3), np.int64)


def _forensics(reference: dict[int, float], variant: dict[int, float]):
    texts = ["a", "b"]
    decoded = {}
    for name, edit in (("ref", reference), ("var", variant)):
        starter = _Starter(edit)
        decoded[name] = Decoded(greedy(starter.start(*_prompts(texts), 1, True), SETTINGS), ["", ""])
    rows = make_rows([10, 11], texts, None, decoded["ref"], decoded["var"])
    found = investigate(_Starter(reference), _Starter(variant), _prompts, texts, rows, SETTINGS, 2, lambda t: f"t{t}")
    return rows, found


def test_near_tie_divergence_is_found_at_its_step_with_both_top_k():
    # the reference prefers PATH's 4 over 6 by 0.2; the variant's numbers flip them by 0.1
    rows, found = _forensics({4: 5.0, 6: 4.8}, {4: 4.9, 6: 5.0})
    assert rows[0]["variant_tokens"][PLANTED_STEP] == 6 and rows[1]["first_divergence"] is None
    assert pick_rows(rows) == [0]
    (f,) = found
    assert f.index == 10 and f.step == PLANTED_STEP and list(f.prefix) == PATH[:PLANTED_STEP]
    assert len(f.reference.top) == len(f.variant.top) == TOP_K
    assert [c.id for c in f.reference.top[:2]] == [4, 6] and [c.id for c in f.variant.top[:2]] == [6, 4]
    assert f.reference.chosen == 4 and f.variant.chosen == 6 and f.faithful
    assert f.reference_margin == pytest.approx(0.2, abs=1e-5) and f.near_tie
    assert f.logit_error == pytest.approx(0.2, abs=1e-5)  # 6: 4.8 -> 5.0 (and 4: 5.0 -> 4.9)
    ref_lp = f.reference.top[0]
    assert ref_lp.logprob < 0 and ref_lp.logit == pytest.approx(5.0)
    text = f.describe()
    assert "step 2" in text and "near-tie" in text and "4 't4'" in text and "6 't6'" in text


def test_clear_divergence_is_not_a_near_tie():
    # the reference is sure of 4 (5.0 vs 1.0); the variant's numbers push 6 over it anyway
    _, (f,) = _forensics({4: 5.0, 6: 1.0}, {4: 2.0, 6: 5.5})
    assert f.step == PLANTED_STEP and f.reference_margin == pytest.approx(4.0, abs=1e-5)
    assert not f.near_tie and "clear decision" in f.describe()
    assert f.logit_error == pytest.approx(4.5, abs=1e-5)


def test_near_tie_threshold_is_the_declared_constant():
    assert near_tie(NEAR_TIE_MARGIN - 1e-6) and not near_tie(NEAR_TIE_MARGIN)


def test_no_divergence_no_forensics():
    rows, found = _forensics({}, {})
    assert all(r["first_divergence"] is None for r in rows) and found == []


def test_a_failing_replay_leaves_the_verdict_a_failure(workspace, monkeypatch):
    """Forensics are evidence for a verdict already reached: if gathering them fails, the case
    still fails on its gate (not an error) and says why it has none."""
    from harness.core import Check
    from harness.judge import generation
    from harness.judge.numeric import GateFailure
    from tests.conftest import variant

    monkeypatch.setattr(generation, "gen_checks", lambda *a, **k: (Check("gen_token_exact_match", 1.0, True),))

    def broken(*args, **kwargs):
        raise RuntimeError("session died")

    monkeypatch.setattr(generation, "divergence_forensics", broken)
    result = generation.generation_parity(workspace, variant("llama-tiny", "int8", "ort_cpu"),
                                          generation.GenerationRequest(samples=8, max_new_tokens=8))
    assert not result.passed and result.forensics == []
    with pytest.raises(GateFailure, match="forensics unavailable: .*session died"):
        result.assert_ok()
