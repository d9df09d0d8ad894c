"""What a model family exports and how its graphs are fed.

A family turns a loaded model into one or more *graphs* (encoder, decoder step, LM step...).
For each graph it provides: the I/O contract (``GraphSpec``), a torch module computing
exactly that graph (the thing exported, and the thing PyTorch runners execute), real
feeds from a corpus batch, and which positions of each output are meaningful (padding
is excluded from every metric).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Protocol, Sequence

import numpy as np

from harness.families.limits import generation_budget, learned_positions
from harness.families.tasks import architecture_task, auto_class

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from harness.families.graph_modules import GraphModule
    from harness.families.steppers import Starter
    from harness.metrics.spec import Scope
    from harness.runners.base import GraphRunner
    from harness.zoo.loading import LoadedModel


class DerivedOutput(Protocol):
    """What a deployment computes from a graph's outputs and returns instead of them (the answer
    span a QA pipeline extracts from start/end logits), judged as one more output of the graph:
    ``rows`` derives it per corpus row from the feeds and the outputs it ``needs`` (the
    reference's and the variant's alike), ``score`` compares the two derivations with the
    metrics of its ``scope`` (declared in ``harness.metrics.registry``)."""

    @property
    def name(self) -> str: ...

    @property
    def needs(self) -> tuple[str, ...]: ...

    @property
    def scope(self) -> "Scope": ...

    def rows(self, feeds: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """One derived value per batch row (rows along axis 0)."""

    def score(self, ref: np.ndarray, got: np.ndarray) -> tuple[dict[str, float], int, str]:
        """(metrics, rows compared, where the worst row is) over the corpus's rows."""


@dataclass(frozen=True)
class GraphSpec:
    """The I/O contract of one exported graph. ``variant_tag`` marks deliberate deviations
    (fault injection such as ``no_encoder_mask``) so they never share a cache entry."""

    name: str
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: Mapping[str, Mapping[int, str]]
    logits_outputs: frozenset[str] = frozenset()
    #: outputs judged by the gate; the others are reported but not gated
    gated_outputs: frozenset[str] | None = None
    variant_tag: str = ""
    #: outputs derived from this graph's outputs and judged beside them (not part of the file,
    #: so not part of ``key``): the head's answer where a deployment returns that, not the logits
    derived: tuple[DerivedOutput, ...] = ()

    def is_gated(self, output: str) -> bool:
        return self.gated_outputs is None or output in self.gated_outputs

    def key(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "inputs": list(self.input_names),
            "outputs": list(self.output_names),
            "dynamic_axes": {k: {str(a): n for a, n in v.items()} for k, v in self.dynamic_axes.items()},
            "tag": self.variant_tag,
        }


class CheckMode(NamedTuple):
    """One way a pre-built file is judged: against reference ``graph`` in ``mode``
    (``model``, ``prefill``, ``step``...), named ``key`` in metric keys."""

    graph: str
    mode: str
    key: str


#: optimum's file names and the role each file plays for the reference's graphs (``Family.artifact_role``
#: reads a file's role; ``harness check`` finds a directory's files by these names, and a served
#: model's ``ROLE=NAME`` takes these roles)
OPTIMUM_FILES = {
    "encoder_model.onnx": "encoder",
    "decoder_model.onnx": "decoder",
    "decoder_with_past_model.onnx": "decoder_with_past",
    "decoder_model_merged.onnx": "merged",
    "model.onnx": "model",
}


class CheckedGraph(NamedTuple):
    """A judged pre-built graph, as decoding sees it: its runner (reference names), whether
    it returns every KV-cache tensor the next step needs, and the file it came from."""

    runner: Any  # harness.runners.base.GraphRunner
    gives_cache: bool
    file: str


class PromptThenStep(NamedTuple):
    """One step graph that two files serve (optimum's decoder-only pair): ``prefill`` runs the
    prompt (empty cache), ``step`` every later token. The family names the pair; the artifact
    source serves it as one runner (``runners.prebuilt.CacheSplitRunner``), so the families
    stay below the runners."""

    prefill: Any  # harness.runners.base.GraphRunner
    step: Any


class Family(abc.ABC):
    """One kind of model: its graphs and feeds, and everything else that differs by kind
    (detection from an HF config, the transformers class that loads it, whether and how it
    generates). Callers ask the family; they never compare ``family.name``.

    Registered with ``@register_family`` (``harness.families``); adding a family is one
    module there.
    """

    name: str
    #: whether models of this family generate text (decode loops, generation suites, perf)
    generates: bool = False
    #: order in which families are asked to detect a config: lower first (a catch-all last)
    detection_priority: int = 100
    #: the heads (``harness.families.tasks.TASKS`` names) this family judges: detection maps an
    #: architecture's head, from transformers' task mappings, to the family listing it
    tasks: tuple[str, ...] = ()

    @abc.abstractmethod
    def graphs(self, model: "LoadedModel") -> list[GraphSpec]:
        """The graphs judged for this model (in dependency order)."""

    @abc.abstractmethod
    def module(self, model: "LoadedModel", graph: GraphSpec, torch_model: torch.nn.Module | None = None) -> GraphModule:
        """A torch module computing ``graph`` over ``torch_model`` (default: the FP32 model)."""

    @abc.abstractmethod
    def feeds(self, model: "LoadedModel", graph: GraphSpec, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Real inputs for ``graph`` from a batch of corpus texts (padded, mixed lengths)."""

    @abc.abstractmethod
    def valid_masks(self, graph: GraphSpec, feeds: Mapping[str, np.ndarray],
                    outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | None]:
        """Per output: bool mask over its leading dims (False = padding), or None."""

    def export_example(self, model: "LoadedModel", graph: GraphSpec) -> dict[str, np.ndarray]:
        """Inputs used to trace the export; by default a small corpus batch."""
        return self.feeds(model, graph, EXPORT_TEXTS)

    # -- detection and loading ----------------------------------------------------------------------------
    @classmethod
    def claims(cls, config: Mapping[str, Any]) -> bool:
        """Whether ``config`` (an HF ``config.json``) is this family's whatever its
        architectures say (a ``model_type`` only this family loads). Asked before :meth:`detects`."""
        return False

    @classmethod
    def detects(cls, config: Mapping[str, Any], architecture: str) -> bool:
        """Whether one entry of the config's ``architectures`` names a model of this family."""
        return False

    def task(self, config: Mapping[str, Any]) -> str | None:
        """The head of the model ``config`` describes, as this family judges it: the task of
        its architecture when this family judges that task, else the family's first task."""
        found = architecture_task(config)
        if found is not None and found in self.tasks:
            return found
        return self.tasks[0] if self.tasks else None

    def hf_model_class(self, config: Mapping[str, Any]) -> Any:
        """The transformers auto class that loads a model of this family from ``config``: the
        one of its head (``task``), ``AutoModel`` for a family without tasks."""
        import transformers

        found = self.task(config)
        return auto_class(found) if found else transformers.AutoModel

    # -- generation ---------------------------------------------------------------------------------------
    def generation_graphs(self, use_cache: bool) -> tuple[str, ...]:
        """The graphs a decode loop runs, with or without the KV cache."""
        raise ValueError(f"family {self.name!r} has no generation head")

    def prompt_batch(self, model: "LoadedModel", texts: Sequence[str],
                     max_length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Token ids and attention mask of a batch of prompts, padded as this family decodes them
        (``max_length``: the prompt limit of a generation budget; default the input limit)."""
        enc = tokenize(model, texts, max_length=max_length)
        return enc["input_ids"], enc["attention_mask"]

    #: whether a prompt and the tokens generated after it index one position table (decoder-only
    #: LMs: the prompt is cut so both fit, ``harness.families.limits.generation_budget``)
    shares_positions: bool = False

    def generation_prompts(self, model: "LoadedModel", texts: Sequence[str],
                           max_new_tokens: int) -> tuple[np.ndarray, np.ndarray]:
        """``prompt_batch`` cut to the prompt limit of decoding ``max_new_tokens`` after it."""
        return self.prompt_batch(model, texts, self.generation_budget(model, max_new_tokens).prompt_tokens)

    def generation_budget(self, model: "LoadedModel", max_new_tokens: int) -> Any:
        """How ``max_new_tokens`` fits the model's positions (``limits.GenerationBudget``)."""
        return generation_budget(model, max_new_tokens, shares_positions=self.shares_positions,
                                 input_limit=input_token_limit(model))

    def starter(self, model: "LoadedModel", runners: Mapping[str, "GraphRunner"],
                start_token_id: int | None = None) -> "Starter":
        """What starts a decode over ``runners`` (the stepper factory of ``harness.generation``).
        ``start_token_id``: the first decoder token where the family needs one (None: the
        model config's)."""
        raise ValueError(f"family {self.name!r} does not generate")

    # -- judging files built elsewhere (``harness check``) -------------------------------------
    def artifact_role(self, named_role: str, input_names: Sequence[str]) -> str:
        """The role of a pre-built file: its optimum name says it (``named_role``); a file
        without one (``model``) keeps it unless the family can tell from its inputs."""
        return named_role

    def check_modes(self, role: str, takes_cache: bool) -> list[CheckMode]:
        """How a file of ``role`` is judged: one mode per reference graph (and state) it serves."""
        return [CheckMode("model", "model", "model")]

    def shape_probes(self, model: "LoadedModel", graph: GraphSpec,
                     feeds: Mapping[str, np.ndarray]) -> list[tuple[str, dict[str, np.ndarray]]]:
        """Feeds of other shapes inside ``graph``'s declared dynamic ranges, derived from one
        corpus batch (``feeds``), each with a label saying what differs: lengths the corpus
        batches always tie together (a decoder's target and source length) come apart here, so
        an export that ties them fails. Default: none."""
        return []

    def check_feeds(self, model: "LoadedModel", graph: GraphSpec, mode: str,
                    texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Real inputs for one check ``mode`` of ``graph``; most modes are the graph's own feeds."""
        return self.feeds(model, graph, texts)

    #: inputs a foreign file may declare that the reference computes implicitly (beyond the
    #: ones every family fills: ``token_type_ids``, ``use_cache_branch``)
    implicit_inputs: tuple[str, ...] = ()
    #: whether a file with a static sequence length is fed padded (masked) inputs of that length
    pads_static_sequence: bool = False

    def sentence_pooling(self, model: "LoadedModel", graph: GraphSpec) -> Any:
        """How ``graph``'s token states become a sentence vector (a ``Pooling``), or None:
        only families whose graphs emit token states for search indexes have one."""
        return None

    def decoding_runners(self, judged: Mapping[str, "CheckedGraph"]) -> tuple[dict[str, Any], bool, str]:
        """From the check's judged modes: the runners the decoding loop uses by graph name,
        whether a KV cache is usable, and '' -- or why these files cannot decode."""
        return {}, False, f"the {self.name} family does not generate text"


#: Trace inputs: fixed, two different lengths so no axis is accidentally specialised to 1.
EXPORT_TEXTS = (
    "The release gate checks every exported model before it ships.",
    "Short one.",
)


#: the longest input the harness feeds when the model allows more (keeps exports and references cheap)
MAX_INPUT_TOKENS = 128


def input_token_limit(model: "LoadedModel") -> int:
    """How many tokens an input may have: ``MAX_INPUT_TOKENS``, or fewer when the model's
    config (its position table) or its tokenizer (``model_max_length``) allows fewer. A fixed
    128 crashed a 64-position model in its embedding lookup (IndexError)."""
    limits = [MAX_INPUT_TOKENS]
    positions = learned_positions(model.config)
    if positions is not None:
        limits.append(positions)
    declared = getattr(model.tokenizer, "model_max_length", None)
    if isinstance(declared, int) and 0 < declared < 1_000_000:  # tokenizers without a limit say 1e30
        limits.append(declared)
    return min(limits)


def truncated_count(model: "LoadedModel", texts: Sequence[str]) -> int:
    """How many of ``texts`` are longer than ``input_token_limit`` (and so are cut), for the record."""
    limit = input_token_limit(model)
    return sum(len(ids) > limit for ids in model.tokenizer(list(texts), truncation=False)["input_ids"])


def tokenize(model: "LoadedModel", texts: Sequence[str], *, max_length: int | None = None) -> dict[str, np.ndarray]:
    """Padded, truncated to the model's own limit (``input_token_limit``) unless ``max_length`` is given."""
    max_length = max_length or input_token_limit(model)
    enc = model.tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="np")
    return {k: np.asarray(v, dtype=np.int64) for k, v in enc.items()}


def token_feeds(model: "LoadedModel", texts: Sequence[str]) -> dict[str, np.ndarray]:
    """``input_ids`` + ``attention_mask``: what an encoder-style graph (classifier, hidden states,
    token / QA / masked-LM heads) is fed."""
    enc = tokenize(model, texts)
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


#: the PyTorch side, declared in ``harness.families.graph_modules`` and importable from here as
#: before: loaded on first use, so that importing a family declaration imports no torch
_TORCH_SIDE = ("GraphModule", "cache_kv", "to_torch")


def __getattr__(name: str) -> object:
    if name in _TORCH_SIDE:
        from harness.families import graph_modules

        return getattr(graph_modules, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

