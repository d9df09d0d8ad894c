"""The sentences a case is judged and calibrated on: one place that reads a model's corpus.

Numeric parity, generation and ``harness check`` all take their sentences here, so the run's
``samples`` and ``batch_size`` mean the same thing everywhere, and static INT8 calibration is
always drawn from the sentences *after* the judged ones.
"""

from __future__ import annotations

from harness.core.values import Settings
from harness.data.corpus import Corpus, corpus_by_name
from harness.zoo.loading import LoadedModel


class CorpusStore:
    """A model's corpus cut to the run's sample count and batch size."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @staticmethod
    def corpus(model: LoadedModel) -> Corpus:
        """The model's corpus: a manifest name, or a user's .txt/.tsv file. The one place that
        tells them apart (numeric parity, generation and ``harness check`` all read it here)."""
        return corpus_by_name(model.spec.corpus)

    def texts(self, model: LoadedModel) -> list[str]:
        return list(self.corpus(model).sources[: self.settings.samples])

    def batches(self, model: LoadedModel, size: int | None = None) -> list[list[str]]:
        """The corpus sentences in batches of ``size`` (default: the run's batch size)."""
        texts, size = self.texts(model), size or self.settings.batch_size
        return [texts[i: i + size] for i in range(0, len(texts), size)]

    def calibration_texts(self, model: LoadedModel) -> list[str]:
        """Static INT8 calibration sentences: the corpus sentences *after* the judged ones, so
        calibration never sees what parity is measured on (``int8_calibration_samples`` of them,
        or what the corpus has left). Empty when nothing is left: the artifact build then says so."""
        sources = self.corpus(model).sources
        start = self.settings.samples
        return list(sources[start: start + self.settings.int8_calibration_samples])


__all__ = ["CorpusStore"]
