"""Encoder heads beyond sentence classification: token classification, extractive QA, masked LM.

Each head is judged on its own outputs, not on the hidden states underneath it:

* ``token_classification``: ``logits`` (batch, position, label) at every real token -- padding
  masked -- so ``top1_agreement`` is the per-token label agreement;
* ``question_answering``: ``start_logits`` and ``end_logits`` (batch, position) of question +
  context pairs, at every real token (cosine and scale-free max error), and the answer span a
  QA pipeline extracts from them (:class:`AnswerSpan`: the best ``start <= end`` pair of context
  tokens, at most 15 tokens long), the reference's against the variant's per row
  (``span_agreement``, ``span_token_f1``);
* ``masked_lm``: ``logits`` at the positions the feeds replaced by the mask token (every
  seventh real token between the first and last, deterministic from the attention mask), the
  only positions a fill-mask model is asked about.

One graph (``model``) each, fed ``input_ids`` and ``attention_mask`` from the corpus.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.core import UsageError
from harness.families.base import Family, GraphSpec, input_token_limit, token_feeds, tokenize
from harness.families.registry import register_family
from harness.families.tasks import task
from harness.metrics.spans import MAX_ANSWER_TOKENS, best_spans, span_metrics, worst_row
from harness.metrics.spec import Scope

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from harness.families.graph_modules import GraphModule
    from harness.zoo.loading import LoadedModel

_INPUTS = ("input_ids", "attention_mask")
_AXES = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}


class _EncoderHead(Family):
    """Shared by the heads: one ``model`` graph whose outputs are all logits and all gated."""

    outputs: tuple[str, ...] = ("logits",)
    #: per output: the axes after batch (dynamic names)
    output_axes: Mapping[str, Mapping[int, str]] = {"logits": {0: "batch", 1: "sequence"}}
    detection_priority = 500

    def graphs(self, model: LoadedModel) -> list[GraphSpec]:
        outs = frozenset(self.outputs)
        return [GraphSpec("model", _INPUTS, self.outputs, {**_AXES, **self.output_axes},
                          logits_outputs=outs, gated_outputs=outs)]

    def module(self, model: LoadedModel, graph: GraphSpec, torch_model: torch.nn.Module | None = None) -> GraphModule:
        from harness.families.graph_modules import HeadModule

        return HeadModule(torch_model if torch_model is not None else model.model, self.outputs)

    def feeds(self, model: LoadedModel, graph: GraphSpec, texts: Sequence[str]) -> dict[str, np.ndarray]:
        return token_feeds(model, texts)

    def valid_masks(self, graph: GraphSpec, feeds: Mapping[str, np.ndarray],
                    outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | None]:
        mask = feeds["attention_mask"].astype(bool)
        return {name: mask for name in graph.output_names}

    implicit_inputs = ("position_ids",)
    pads_static_sequence = True


@register_family
class TokenClassificationFamily(_EncoderHead):
    name = "token_classification"
    tasks = ("token_classification",)


@register_family
class QuestionAnsweringFamily(_EncoderHead):
    """Question + context pairs from the corpus: the question is the sentence's first words."""

    name = "question_answering"
    tasks = ("question_answering",)
    outputs = ("start_logits", "end_logits")
    output_axes = {"start_logits": {0: "batch", 1: "sequence"}, "end_logits": {0: "batch", 1: "sequence"}}

    def feeds(self, model: LoadedModel, graph: GraphSpec, texts: Sequence[str]) -> dict[str, np.ndarray]:
        questions = [" ".join(t.split()[:4]) + "?" for t in texts]
        enc = model.tokenizer(questions, list(texts), padding=True, truncation="only_second",
                              max_length=input_token_limit(model), return_tensors="np")
        return {"input_ids": np.asarray(enc["input_ids"], np.int64),
                "attention_mask": np.asarray(enc["attention_mask"], np.int64)}

    # Start/end logits are judged per real token (padding masked, as every head): their last axis
    # is the sentence's positions, which differ between batches, so they are compared
    # elementwise (cosine, scale-free max error) rather than as a distribution per row. What a
    # pipeline returns -- the span -- is judged beside them (``AnswerSpan``).

    def graphs(self, model: LoadedModel) -> list[GraphSpec]:
        outs = frozenset(self.outputs)
        return [GraphSpec("model", _INPUTS, self.outputs, {**_AXES, **self.output_axes}, gated_outputs=outs,
                          derived=(answer_span(model.tokenizer),))]


def answer_span(tokenizer: Any) -> "AnswerSpan":
    """The span judge of a QA model with ``tokenizer``: its separator (``sep_token``, else
    ``eos_token`` as RoBERTa-style tokenizers end the question with) and its special tokens."""
    separator = getattr(tokenizer, "sep_token_id", None)
    if separator is None:
        separator = getattr(tokenizer, "eos_token_id", None)
    special = frozenset(int(i) for i in (getattr(tokenizer, "all_special_ids", None) or ()))
    return AnswerSpan(frozenset() if separator is None else frozenset({int(separator)}), special)


@dataclass(frozen=True)
class AnswerSpan:
    """The answer span of each question + context row, as transformers' QuestionAnsweringPipeline
    extracts it (``harness.metrics.spans.best_spans``), judged as the pseudo-output ``answer_span``.

    The context is what the pair encoding puts after the question: the real (unmasked) tokens
    after the row's first ``separators`` token that are not ``special`` tokens -- the layout
    every pair template writes (``[CLS] q [SEP] c [SEP]``, ``<s> q </s></s> c </s>``), read from
    ``input_ids`` alone, so the span is computed from the same feeds the graph ran on (a static
    file's cut or padded ones included). A row without such a token asks nothing (and a corpus
    without any is NaN: never a pass)."""

    separators: frozenset[int]
    special: frozenset[int]
    max_answer_len: int = MAX_ANSWER_TOKENS
    name: str = "answer_span"
    needs: tuple[str, ...] = ("start_logits", "end_logits")
    scope: Scope = Scope.SPAN

    def recipe(self) -> dict[str, Any]:
        """What a repro bundle records to derive the span again (``from_recipe`` reads it)."""
        return {"separators": sorted(self.separators), "special": sorted(self.special),
                "max_answer_len": self.max_answer_len, "from": list(self.needs)}

    @classmethod
    def from_recipe(cls, recipe: Mapping[str, Any]) -> "AnswerSpan":
        """The span judge a bundle recorded; ValueError for a malformed recipe."""
        try:
            start, end = (str(n) for n in recipe["from"])
            made = cls(frozenset(int(i) for i in recipe["separators"]), frozenset(int(i) for i in recipe["special"]),
                       int(recipe["max_answer_len"]), needs=(start, end))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not an answer-span recipe ({exc!r})") from None
        if made.max_answer_len < 1:
            raise ValueError(f"max_answer_len must be >= 1, got {made.max_answer_len}")
        return made

    def context(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        """(rows, positions) bool: the context tokens of each row."""
        ids = np.asarray(feeds["input_ids"])
        real = np.asarray(feeds["attention_mask"]).astype(bool)
        sep = np.isin(ids, sorted(self.separators)) & real
        after = (np.cumsum(sep, axis=1) - sep) > 0  # strictly after the first separator
        context: np.ndarray = after & real & ~np.isin(ids, sorted(self.special))
        return context

    def rows(self, feeds: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        start, end = self.needs
        return best_spans(outputs[start], outputs[end], self.context(feeds), self.max_answer_len)

    def score(self, ref: np.ndarray, got: np.ndarray) -> tuple[dict[str, float], int, str]:
        metrics, asked = span_metrics(ref, got)
        if not asked:
            return metrics, 0, "no row has a context token after a separator: no span to extract"
        row = worst_row(ref, got)
        if row is None:
            return metrics, asked, "n/a"
        rs, re_, gs, ge = (int(v) for v in (*ref[row], *got[row]))
        differ = int(np.sum(np.any(ref != got, axis=1) & (ref[:, 0] >= 0)))
        return metrics, asked, (f"batch={row}: reference span tokens {rs}-{re_}, variant {gs}-{ge} "
                                f"({differ} of {asked} rows differ)")


#: every how-many-th real token the masked-LM feeds replace by the mask token
MASK_EVERY = 7


@register_family
class MaskedLMFamily(_EncoderHead):
    name = "masked_lm"
    tasks = ("masked_lm",)

    def feeds(self, model: LoadedModel, graph: GraphSpec, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Corpus batches with the ``masked_positions`` replaced by the mask token."""
        enc = tokenize(model, texts)
        ids, mask = enc["input_ids"].copy(), enc["attention_mask"]
        mask_id = getattr(model.tokenizer, "mask_token_id", None)
        if mask_id is None:
            raise UsageError(f"{model.path}: a masked LM whose tokenizer has no mask token")
        ids[masked_positions(mask)] = mask_id
        return {"input_ids": ids, "attention_mask": mask}

    def valid_masks(self, graph: GraphSpec, feeds: Mapping[str, np.ndarray],
                    outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | None]:
        """Only the masked positions: what a fill-mask model is asked about."""
        at_mask = masked_positions(feeds["attention_mask"])
        return {name: at_mask for name in graph.output_names}


def masked_positions(attention_mask: np.ndarray) -> np.ndarray:
    """Which positions the masked-LM feeds mask: every ``MASK_EVERY``-th real token from the
    second one, never a row's first or last real token (where tokenizers put their special
    tokens), at least one per row. From the attention mask alone, so feeds and the judged
    positions agree without carrying anything beside the graph's inputs."""
    out = np.zeros(attention_mask.shape, dtype=bool)
    for row in range(attention_mask.shape[0]):
        real = np.flatnonzero(attention_mask[row])
        inner = real[1:-1] if len(real) > 2 else real
        chosen = inner[::MASK_EVERY] if len(inner) else inner
        out[row, chosen] = True
    return out


def head_summary(family: Family) -> str:
    """One phrase: what a family's graphs are judged on (for docs and the coverage table)."""
    return "; ".join(task(t).description for t in getattr(family, "tasks", ()))
