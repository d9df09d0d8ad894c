"""Which head a Hugging Face architecture has, from transformers' own auto-class task mappings.

The architecture named in ``config.json`` (``GPT2LMHeadModel``, ``BertForTokenClassification``)
is looked up in the mappings transformers' ``AutoModelFor...`` classes load from
(``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` and its siblings), never guessed from the name: a
suffix rule called ``GPT2LMHeadModel`` an encoder (it ends in ``Model``) and judged only its
hidden states. The *task* found decides the family (``Family.tasks``) and so what is judged.

A class listed under several tasks (``BartForConditionalGeneration`` is a seq2seq LM and a
masked LM) resolves to the generative one its config supports (an encoder-decoder config is a
seq2seq LM); what stays ambiguous (``XLMWithLMHeadModel``: causal or masked LM) is an error
naming what was found and the setting that decides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping


@dataclass(frozen=True)
class Task:
    """One head kind: its name here, the transformers mapping that lists its classes, the
    auto class that loads it."""

    name: str
    mapping: str
    auto_class: str
    description: str


#: in resolution order: the first task an architecture is listed under wins a tie it may win
TASKS: tuple[Task, ...] = (
    Task("seq2seq_lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "AutoModelForSeq2SeqLM",
         "encoder-decoder LM: logits of every graph and generated text"),
    Task("causal_lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "AutoModelForCausalLM",
         "decoder-only LM: logits (prefill and cached step) and generated text"),
    Task("masked_lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES", "AutoModelForMaskedLM",
         "masked LM: logits at the mask positions and the top-1 token there"),
    Task("sequence_classification", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
         "AutoModelForSequenceClassification", "classifier: logits per sentence and the top-1 label"),
    Task("token_classification", "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES", "AutoModelForTokenClassification",
         "token classifier: logits and the label of every real token (padding masked)"),
    Task("question_answering", "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES", "AutoModelForQuestionAnswering",
         "extractive QA: start/end logits at every real token and the answer span extracted from them "
         "(span_agreement)"),
    Task("feature_extraction", "MODEL_MAPPING_NAMES", "AutoModel",
         "base model: hidden states (and their cosine)"),
)
_BY_NAME = {t.name: t for t in TASKS}
#: tasks a non-encoder-decoder config cannot have, and the ones an encoder-decoder one prefers
_GENERATIVE = ("seq2seq_lm", "causal_lm")


def task(name: str) -> Task:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; known: {', '.join(_BY_NAME)}") from None


@lru_cache(maxsize=1)
def _index() -> dict[str, tuple[str, ...]]:
    """class name -> the tasks whose mapping lists it, in ``TASKS`` order."""
    from transformers.models.auto import modeling_auto

    found: dict[str, list[str]] = {}
    for t in TASKS:
        mapping: Mapping[str, Any] = getattr(modeling_auto, t.mapping, {}) or {}
        for value in mapping.values():
            for cls in value if isinstance(value, (tuple, list)) else (value,):
                found.setdefault(str(cls), [])
                if t.name not in found[str(cls)]:
                    found[str(cls)].append(t.name)
    return {cls: tuple(tasks) for cls, tasks in found.items()}


def tasks_of_architecture(architecture: str) -> tuple[str, ...]:
    """Every task whose transformers mapping lists ``architecture`` (empty: none does)."""
    return _index().get(architecture, ())


def task_of_architecture(architecture: str, config: Mapping[str, Any] | None = None) -> str | None:
    """The one task of ``architecture`` (None: unknown to transformers, or ambiguous)."""
    try:
        return resolve(architecture, config or {})
    except AmbiguousTask:
        return None


class AmbiguousTask(ValueError):
    """An architecture transformers lists under several heads that its config does not decide."""

    def __init__(self, architecture: str, tasks: tuple[str, ...]) -> None:
        super().__init__(f"{architecture} is listed by transformers as {' and '.join(tasks)}")
        self.architecture, self.tasks = architecture, tasks


def resolve(architecture: str, config: Mapping[str, Any]) -> str | None:
    """The task of one ``architectures`` entry: its only mapping, or -- listed under several --
    the generative task its config supports (``is_encoder_decoder``: seq2seq LM, otherwise
    causal LM) when exactly one fits; else :class:`AmbiguousTask`. None: no mapping lists it."""
    tasks = tasks_of_architecture(architecture)
    if not tasks:
        return None
    if len(tasks) == 1:
        return tasks[0]
    preferred = "seq2seq_lm" if config.get("is_encoder_decoder") else None
    if preferred in tasks:
        return preferred
    if not config.get("is_encoder_decoder"):
        narrowed = tuple(t for t in tasks if t != "seq2seq_lm")
        if len(narrowed) == 1:
            return narrowed[0]
    raise AmbiguousTask(architecture, tasks)


def auto_class(task_name: str) -> Any:
    """The transformers auto class that loads a model with this head."""
    import transformers

    return getattr(transformers, task(task_name).auto_class)


def architecture_task(config: Mapping[str, Any]) -> str | None:
    """The task of a config's first ``architectures`` entry that transformers knows (None: none)."""
    for arch in [str(a) for a in (config.get("architectures") or [])]:
        found = task_of_architecture(arch, config)
        if found is not None:
            return found
    return None
