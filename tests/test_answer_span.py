"""The answer span of an extractive-QA head: extracted as transformers' QuestionAnsweringPipeline
extracts it, from the context tokens only, and judged as declared in the registry.

The end-to-end cases (a tiny DistilBERT QA model at FP32: span_agreement 1.0; a candidate whose
end logits moved the span fails although its logits' cosine stays high; ``harness check`` reports
the span) are in tests/test_architectures.py, on the model its module fixture already builds.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from harness.core import Precision
from harness.families.heads import AnswerSpan, answer_span
from harness.metrics.registry import METRICS, Scope
from harness.metrics.spans import NO_SPAN, best_spans, span_f1, span_metrics, worst_row


def _brute_force(start: np.ndarray, end: np.ndarray, context: np.ndarray, max_len: int) -> tuple[int, int]:
    """The pipeline's rule written out: softmax products over allowed pairs, first best wins."""
    ps, pe = np.exp(start - start.max()), np.exp(end - end.max())
    ps, pe = ps / ps.sum(), pe / pe.sum()
    best, where = -1.0, NO_SPAN
    for i, j in itertools.product(range(len(start)), repeat=2):
        if context[i] and context[j] and i <= j < i + max_len and ps[i] * pe[j] > best:
            best, where = ps[i] * pe[j], (i, j)
    return where


def test_best_spans_is_the_pipelines_choice_inside_the_context():
    rng = np.random.default_rng(7)
    start, end = rng.normal(size=(40, 30)), rng.normal(size=(40, 30))
    context = np.zeros((40, 30), bool)
    for row in range(40):  # a question, a context of varying length, then padding
        q, c = rng.integers(2, 8), rng.integers(1, 20)
        context[row, q + 1: q + 1 + c] = True
    for max_len in (1, 4, 15):
        got = best_spans(start, end, context, max_len)
        assert [tuple(r) for r in got] == [_brute_force(start[r], end[r], context[r], max_len) for r in range(40)]
        assert np.all(got[:, 1] - got[:, 0] < max_len) and np.all(got[:, 1] >= got[:, 0])


def test_question_special_tokens_padding_and_non_finite_logits_never_win():
    start = np.array([[9.0, 0.1, 0.2, 0.3, 9.0], [np.nan] * 5])
    end = np.array([[9.0, 0.3, 0.2, 0.1, 9.0], [0.0] * 5])
    context = np.array([[False, True, True, True, False], [True] * 5])
    spans = best_spans(start, end, context)
    assert tuple(spans[0]) == (1, 1)  # position 0 (CLS / the question) and 4 (padding) are never chosen
    assert tuple(spans[1]) == NO_SPAN  # NaN logits: nothing extracted, so it cannot agree by accident
    assert tuple(best_spans(start[:1], end[:1], np.zeros((1, 5), bool))[0]) == NO_SPAN
    with pytest.raises(ValueError, match="max_answer_len"):
        best_spans(start, end, context, 0)


def test_span_metrics_agreement_f1_and_the_worst_row():
    ref = np.array([[3, 5], [2, 2], [4, 9], list(NO_SPAN)])
    got = np.array([[3, 5], [2, 3], [10, 12], [1, 1]])
    assert span_f1(ref, got).round(4).tolist() == [1.0, round(2 * 1 / 3, 4), 0.0, 0.0]
    metrics, asked = span_metrics(ref, got)
    assert asked == 3  # the row without a reference span asks nothing
    assert metrics["span_agreement"] == pytest.approx(1 / 3)
    assert metrics["span_token_f1"] == pytest.approx((1 + 2 / 3) / 3)
    assert worst_row(ref, got) == 2 and worst_row(ref, ref) is None
    nan, none = span_metrics(np.array([list(NO_SPAN)]), np.array([[1, 1]]))
    assert none == 0 and all(np.isnan(v) for v in nan.values())  # nothing compared is never a pass


@pytest.mark.parametrize("style", ["bert", "roberta"])
def test_the_context_is_what_the_tokenizers_pair_encoding_calls_the_second_sequence(style):
    """``AnswerSpan.context`` reads the [SEP] layout from ``input_ids``; it must be exactly the
    tokenizer's own ``sequence_ids == 1`` on the QA feeds' padded pairs."""
    from harness.zoo.tokenizer import train_tokenizer

    texts = ["The release gate checks every exported model.", "Short one here.", "A longer context sentence "
             "about models that ship to production after review."]
    tok = train_tokenizer(texts * 4, style, vocab_size=300)
    questions = [" ".join(t.split()[:4]) + "?" for t in texts]
    enc = tok(questions, texts, padding=True, return_tensors="np")
    feeds = {"input_ids": np.asarray(enc["input_ids"]), "attention_mask": np.asarray(enc["attention_mask"])}
    expected = np.array([[s == 1 for s in enc.sequence_ids(r)] for r in range(len(texts))])
    assert np.array_equal(answer_span(tok).context(feeds), expected)


def test_the_span_metrics_are_declared_once_and_gate_exactly_at_fp32():
    from harness.judge.tolerances import scope_tolerance

    ref = np.array([[1, 2], [3, 4]])
    metrics, _, _ = AnswerSpan(frozenset({1}), frozenset({1})).score(ref, ref)
    assert set(metrics) == set(METRICS.names(Scope.SPAN))
    checks = {c.metric: c for c in scope_tolerance(Scope.SPAN, Precision.FP32).checks}
    assert checks["span_agreement"].threshold == 1.0 and checks["span_agreement"].higher_is_better
    for p in (Precision.FP16, Precision.INT8):
        assert 0.5 < METRICS["span_agreement"].threshold(p) < 1.0  # type: ignore[operator]
    lowered = scope_tolerance(Scope.SPAN, Precision.INT8, {"int8": {"span_agreement": 0.5, "cosine": 0.1}})
    assert {c.metric: c.threshold for c in lowered.checks} == {"span_agreement": 0.5}


def test_a_qa_graph_whose_span_was_not_judged_is_not_a_pass():
    """Coverage requires the derived span beside the logits: judged logits alone leave it missing."""
    from harness.core import Tolerance
    from harness.families import family_for
    from harness.families.base import GraphSpec
    from harness.judge.coverage import numeric_coverage
    from harness.judge.numeric import OutputResult

    family = family_for("question_answering")
    graph = GraphSpec("model", ("input_ids", "attention_mask"), ("start_logits", "end_logits"), {},
                      gated_outputs=frozenset({"start_logits", "end_logits"}),
                      derived=(AnswerSpan(frozenset({3}), frozenset({1, 3})),))
    gate = Tolerance((METRICS["cosine"].check(0.99),))
    logits = [OutputResult("model", name, {"cosine": 1.0}, None, (), gate, 10) for name in graph.output_names]
    coverage = numeric_coverage(family, [graph], logits)
    assert coverage.missing == ("model/answer_span",) and coverage.problem()
    span = OutputResult("model", "answer_span", {"span_agreement": 1.0}, None, (),
                        Tolerance((METRICS["span_agreement"].check(1.0),)), 4)
    assert numeric_coverage(family, [graph], [*logits, span]).problem() is None
