"""A model's own limits, read once from its config and tokenizer and checked before any work.

What broke on models outside the zoo: GPT-2's tiny configs hold 128 learned positions, the
harness fed 128-token prompts and generated 32 tokens past them (``IndexError: index out of
range in self`` from the position embedding, six errors); GPT-2's tokenizer has no pad token
(``Asking to pad but the tokenizer does not have a padding token``). This module is the one
place that knows

* how many positions inputs may use (``learned_positions``: the config's position table, less
  the offset RoBERTa-style embeddings reserve for padding);
* how a generation budget splits them (``generation_budget``: a decoder-only prompt is cut so
  prompt + new tokens fit; an encoder-decoder's new tokens fit the decoder's table);
* what makes a model unusable before a single case runs (``check_limits``: no decoder start
  token, nothing to pad with), as one line naming the directory and the fix. Tokenizer ids
  past the embedding rows and special ids outside it are ``harness.zoo.consistency``'s
  refusals, run beside this one at load.

A pad-less tokenizer with an EOS token is padded with EOS (``pad = eos``, what transformers'
own pipelines do for GPT-2); the record says so (``ModelLimits.pad_is_eos``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Mapping

from harness.core import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from harness.zoo.loading import LoadedModel

#: model types whose position ids start after ``padding_idx`` (RoBERTa's ``create_position_ids``):
#: ``pad_token_id + 1`` rows of the table are never reachable by a real token
_PADDING_OFFSET_TYPES = frozenset({"roberta", "xlm-roberta", "camembert", "mpnet", "longformer", "data2vec-text",
                                   "roberta-prelayernorm", "xmod", "ibert", "luke", "xlm-roberta-xl"})


#: config.json keys that bound a model's positions, as different architectures name them
#: (the first one present wins, as in ``families.base.input_token_limit``; ``zoo.consistency``
#: reads the same keys for a model's ``ModelLimits``)
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_source_positions", "n_ctx", "max_seq_len",
                 "seq_length", "max_len")
#: where encoder-decoders with separate tables name the encoder's (LED): read after the common keys
_ENCODER_POSITION_KEYS = ("max_encoder_position_embeddings",)


@dataclass(frozen=True)
class ModelLimits:
    """What a model can take, for the record (``data.limits``)."""

    positions: int | None  # usable learned positions (None: relative / unbounded, e.g. T5)
    vocab_rows: int | None  # rows of the input embedding (config ``vocab_size``)
    tokenizer_size: int
    pad_token_id: int | None
    pad_is_eos: bool
    padding_side: str
    decoder_start_token_id: int | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def learned_positions(config: Mapping[str, Any]) -> int | None:
    """How many positions an input may use: the config's position table (first key of
    ``POSITION_KEYS`` it has), less RoBERTa-style padding offsets. None: no learned table."""
    for key in (*POSITION_KEYS, *_ENCODER_POSITION_KEYS):
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            if config.get("model_type") in _PADDING_OFFSET_TYPES:
                pad = config.get("pad_token_id")
                value -= (int(pad) if isinstance(pad, int) else 1) + 1
            return max(value, 1)
    return None


@dataclass(frozen=True)
class GenerationBudget:
    """How one decode fits the model: new tokens generated, the longest prompt fed, and
    whether the request had to give way (recorded)."""

    new_tokens: int
    prompt_tokens: int | None  # None: the family's own input limit
    positions: int | None
    requested_new_tokens: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def generation_budget(model: "LoadedModel", max_new_tokens: int, *, shares_positions: bool,
                      input_limit: int) -> GenerationBudget:
    """``shares_positions``: prompt and generated tokens index one position table (decoder-only
    LMs): the prompt is cut to ``positions - new tokens`` (at least one token). Otherwise
    (encoder-decoders) the prompt keeps ``input_limit``. More new tokens than positions is
    refused before decoding (``zoo.consistency.check_generation``), never silently capped."""
    positions = learned_positions(model.config)
    if positions is None or not shares_positions:
        return GenerationBudget(max_new_tokens, None, positions, max_new_tokens)
    return GenerationBudget(max_new_tokens, max(1, min(input_limit, positions - max_new_tokens)), positions,
                            max_new_tokens)


def prepare_tokenizer(tokenizer: Any) -> bool:
    """Give a pad-less tokenizer its EOS as pad (``pad = eos``); True when it did."""
    if getattr(tokenizer, "pad_token", None) is None and getattr(tokenizer, "eos_token", None) is not None:
        tokenizer.pad_token = tokenizer.eos_token
        return True
    return False


def check_limits(where: str, config: Mapping[str, Any], tokenizer: Any, *, generates: bool,
                 encoder_decoder: bool) -> ModelLimits:
    """The model's limits, or ``UsageError`` (one line naming ``where``) when its tokenizer and
    config cannot work together: an encoder-decoder without a decoder start token, nothing to
    pad a batch with, a decoder start token outside the vocabulary."""
    pad_is_eos = prepare_tokenizer(tokenizer)
    size = len(tokenizer)
    rows = _vocab_rows(config)
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is None:
        raise UsageError(f"{where}: the tokenizer has neither a pad nor an EOS token, so batches cannot be padded; "
                         "set pad_token in tokenizer_config.json")
    start = _decoder_start(config) if encoder_decoder else None
    if encoder_decoder and generates and start is None:
        raise UsageError(f"{where}: an encoder-decoder without decoder_start_token_id (config.json or "
                         "generation_config.json): decoding cannot start")
    if rows is not None and start is not None and not 0 <= start < rows:
        raise UsageError(f"{where}: decoder_start_token_id {start} is outside the {rows}-row embedding")
    return ModelLimits(learned_positions(config), rows, size, int(pad), pad_is_eos,
                       str(getattr(tokenizer, "padding_side", "right")), start)


def _vocab_rows(config: Mapping[str, Any]) -> int | None:
    value = config.get("vocab_size")
    if value is None and isinstance(config.get("text_config"), Mapping):
        value = config["text_config"].get("vocab_size")
    return int(value) if isinstance(value, int) and value > 0 else None


def _decoder_start(config: Mapping[str, Any]) -> int | None:
    value = config.get("decoder_start_token_id")
    return int(value) if isinstance(value, int) else None
