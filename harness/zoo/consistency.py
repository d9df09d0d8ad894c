"""Does a model directory's tokenizer fit its model? Checked when a model is opened.

A tokenizer whose ids run past the model's embedding table, a special token id outside it,
or a generation request longer than the model's position table all end the same way in
PyTorch: ``IndexError: index out of range in self`` from deep inside ``nn.Embedding``, an
89-line traceback in ``harness check`` or an error record in ``harness run`` that says
nothing about vocabularies. These checks read only ``config.json``, the tokenizer and the
safetensors *headers* (no weights), so they run for every model a run opens — zoo entries,
users' directories, ``harness check`` references — and before any case, and say in one
line which two numbers disagree.

Everything that knows a model's limits lives here (``ModelLimits``), so another layer that
needs them (a new family's prompt budget, the check's reference) asks this module instead
of re-reading config keys: ``limits_of`` for the numbers, ``check_tokenizer`` and
``check_generation`` for the refusals.
"""

from __future__ import annotations

import json
import json as _json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.core import UsageError
from harness.families.limits import POSITION_KEYS
from harness.zoo.base import materialize

#: config keys whose value is a token id the model will embed or predict
SPECIAL_ID_KEYS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id",
                   "forced_bos_token_id", "forced_eos_token_id")
#: the names the input embedding table has in common architectures' weight files
_EMBEDDING_SUFFIXES = ("embed_tokens.weight", "word_embeddings.weight", "wte.weight", "shared.weight",
                       "tok_embeddings.weight", "embeddings.tokens.weight", "token_embedding.weight")
#: a safetensors header larger than this is not read (a corrupt length field)
_MAX_HEADER = 100 << 20


@dataclass(frozen=True)
class ModelLimits:
    """The numbers a tokenizer and a decoding request must fit in, and where each was read."""

    embedding_rows: int | None
    rows_source: str
    positions: int | None
    positions_source: str


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """Multi-part configs keep the language model's numbers in ``text_config``."""
    inner = config.get("text_config")
    return inner if isinstance(inner, Mapping) else config


def _header(file: Path) -> dict[str, Any]:
    try:
        with file.open("rb") as fh:
            raw = fh.read(8)
            if len(raw) < 8:
                return {}
            (size,) = struct.unpack("<Q", raw)
            if size > _MAX_HEADER:
                return {}
            data = json.loads(fh.read(size))
    except (OSError, ValueError):
        return {}  # unreadable headers are refused by zoo.integrity with their own line
    return data if isinstance(data, dict) else {}


def embedding_rows_in_weights(path: Path) -> tuple[int, str] | None:
    """The input embedding table's row count from the safetensors headers (no tensor data
    read), with the tensor's name; None when no tensor has a known embedding name."""
    for file in sorted(path.glob("*.safetensors")):
        for name, entry in _header(file).items():
            shape = entry.get("shape") if isinstance(entry, dict) else None
            if (name.endswith(_EMBEDDING_SUFFIXES) and "position" not in name and isinstance(shape, list)
                    and len(shape) == 2 and _int(shape[0])):
                return int(shape[0]), f"{file.name}: {name}"
    return None


def limits_of(path: Path, config: Mapping[str, Any]) -> ModelLimits:
    """Embedding rows (the weights' table, else ``vocab_size``) and learned positions."""
    text = _text_config(config)
    found = embedding_rows_in_weights(path)
    rows: int | None
    if found is not None:
        rows, rows_source = found
    else:
        vocab = _int(text.get("vocab_size"))
        rows, rows_source = (vocab, "config.json vocab_size") if vocab else (None, "")
    positions, positions_source = None, ""
    for key in POSITION_KEYS:
        value = _int(text.get(key))
        if value and value > 0:
            positions, positions_source = value, f"config.json {key}"
            break
    return ModelLimits(rows, rows_source, positions, positions_source)


def tokenizer_size(tokenizer: Any) -> int | None:
    """One more than the largest id the tokenizer can produce (added tokens included)."""
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # noqa: BLE001 - a tokenizer without a vocabulary API: nothing to compare
        return None
    ids = [i for i in vocab.values() if _int(i) is not None]
    return max(ids) + 1 if ids else None


def _special_ids(config: Mapping[str, Any], tokenizer: Any) -> Iterable[tuple[str, int]]:
    text = _text_config(config)
    for key in SPECIAL_ID_KEYS:
        value = text.get(key)
        for item in value if isinstance(value, list) else [value]:
            number = _int(item)
            if number is not None:
                yield f"config.json {key}", number
    for attr in ("pad_token", "bos_token", "eos_token", "unk_token", "cls_token", "sep_token", "mask_token"):
        token = getattr(tokenizer, attr, None)
        token_id = _int(getattr(tokenizer, f"{attr}_id", None))
        if token is not None and token_id is not None:
            yield f"tokenizer {attr} {str(token)!r}", token_id


def check_tokenizer(path: Path, config: Mapping[str, Any], tokenizer: Any) -> ModelLimits:
    """Refuse (one ``UsageError`` line naming both numbers) a tokenizer that produces ids the
    model's embedding table has no row for, and special token ids outside the table."""
    limits = limits_of(path, config)
    rows = limits.embedding_rows
    if rows is None:
        return limits
    size = tokenizer_size(tokenizer)
    if size is not None and size > rows:
        raise UsageError(f"{path}: the tokenizer has {size} token ids but the model's embedding has {rows} rows "
                         f"({limits.rows_source}); ids {rows}..{size - 1} would index past it "
                         "(tokenizer and weights are from different models, or the embedding was not resized)")
    for where, token_id in _special_ids(config, tokenizer):
        if not 0 <= token_id < rows:
            raise UsageError(f"{path}: {where} is {token_id}, outside the model's embedding of {rows} rows "
                             f"({limits.rows_source})")
    return limits


def check_generation(path: Path, limits: ModelLimits, new_tokens: int, *, option: str = "max_new_tokens",
                     prompt_tokens: int = 0) -> None:
    """Refuse a decoding request the position table cannot hold: ``new_tokens`` (plus the
    decoder start token, plus ``prompt_tokens`` for a decoder-only model whose prompt shares
    the positions) more than the model's learned positions."""
    if limits.positions is None:
        return
    needed = prompt_tokens + new_tokens + (0 if prompt_tokens else 1)
    if needed > limits.positions:
        prompt = f"a {prompt_tokens}-token prompt + " if prompt_tokens else "the start token + "
        raise UsageError(f"{option} {new_tokens}: {prompt}{new_tokens} new tokens need {needed} positions but "
                         f"{path.name} has {limits.positions} ({limits.positions_source})")


def check_generation_request(specs: Iterable[Any], new_tokens: int, option: str) -> None:
    """Before any case: every generating model of the run can hold ``new_tokens`` new tokens
    (``option`` is the flag the request came from). Materialises zoo models (they are built
    for the run anyway) to read their limits."""
    for spec in specs:
        if not getattr(spec, "generates", False):
            continue
        path = materialize(spec)
        try:
            config = _json.loads((path / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # the loader refuses it with its own line
        check_generation(path, limits_of(path, config), new_tokens, option=option)
