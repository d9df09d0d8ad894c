"""How to decode: one value object shared by the harness's loops and HF ``generate()``.

The settings start from the model's own ``generation_config`` (EOS, pad, forced EOS,
suppressed tokens), exactly as ``generate()`` would, and ``hf_kwargs`` says how to ask
``generate()`` for the same thing. That pairing is what lets a test prove the harness's
loop and ``generate()`` agree token for token. Anything in the model's generation config
that the loops do not implement is refused, never silently ignored: a silently different
search would make every comparison with ``generate()`` meaningless.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

from harness.core import UsageError

#: generation_config fields that change the search and that the loops do not implement,
#: with the value that means "off".
_UNSUPPORTED_DEFAULTS: dict[str, Any] = {
    "no_repeat_ngram_size": (None, 0),
    "encoder_no_repeat_ngram_size": (None, 0),
    "encoder_repetition_penalty": (None, 1.0),
    "min_length": (None, 0),
    "min_new_tokens": (None, 0),
    "forced_bos_token_id": (None,),
    "begin_suppress_tokens": (None, []),
    "sequence_bias": (None,),
    "exponential_decay_length_penalty": (None,),
    "guidance_scale": (None, 1.0),
    "num_beam_groups": (None, 1),
}


@dataclass(frozen=True)
class GenerationSettings:
    """Deterministic decoding: greedy (``num_beams == 1``) or beam search.

    ``use_cache`` picks the KV-cache path (decoder-with-past / one token per step with
    past) or the uncached one (full decoder re-run per step); both must give the same
    tokens, so it is a speed choice, and a check of the with-past graphs.
    """

    max_new_tokens: int = 32
    num_beams: int = 1
    repetition_penalty: float = 1.0
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    use_cache: bool = True
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    forced_eos_token_id: int | None = None
    suppress_tokens: tuple[int, ...] = ()
    decoder_start_token_id: int | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise UsageError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.num_beams < 1:
            raise UsageError(f"num_beams must be >= 1, got {self.num_beams}")
        if not self.repetition_penalty > 0:
            raise UsageError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")

    @property
    def fill_token_id(self) -> int:
        """What finished rows are padded with (``generate()`` uses pad, else the first EOS)."""
        if self.pad_token_id is not None:
            return self.pad_token_id
        return self.eos_token_ids[0] if self.eos_token_ids else 0

    def key(self) -> tuple[tuple[str, Any], ...]:
        """Hashable identity, for memoising decodes."""
        return tuple(sorted(asdict(self).items()))

    def describe(self) -> dict[str, Any]:
        """JSON-able settings for records and reports."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    def with_overrides(self, **overrides: Any) -> "GenerationSettings":
        """A copy with the given fields changed; ``None`` means "not set" and keeps the field."""
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def hf_kwargs(self) -> dict[str, Any]:
        """Keyword arguments that make ``model.generate()`` run this exact search."""
        eos: int | list[int] | None = list(self.eos_token_ids) if self.eos_token_ids else None
        return {
            "max_new_tokens": self.max_new_tokens,
            "num_beams": self.num_beams,
            "do_sample": False,
            "repetition_penalty": float(self.repetition_penalty),
            "length_penalty": float(self.length_penalty),
            "early_stopping": self.early_stopping,
            "use_cache": self.use_cache,
            "eos_token_id": eos,
            "pad_token_id": self.pad_token_id,
            "forced_eos_token_id": self.forced_eos_token_id,
            "suppress_tokens": list(self.suppress_tokens) or None,
            "bad_words_ids": None,
            "num_return_sequences": 1,
        }


def _ids(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)


def settings_for_model(torch_model: Any, **overrides: Any) -> GenerationSettings:
    """Settings from the model's ``generation_config`` (what ``generate()`` would use), plus overrides.

    Single-token ``bad_words_ids`` (Marian bans ``<pad>`` this way) become suppressed
    tokens, which is exactly what ``generate()`` does with them.
    """
    gen = getattr(torch_model, "generation_config", None)
    cfg = torch_model.config
    source = gen if gen is not None else cfg

    def get(name: str) -> Any:
        return getattr(source, name, None)

    unsupported = [f"{name}={get(name)!r}" for name, off in _UNSUPPORTED_DEFAULTS.items()
                   if get(name) not in off]
    bad_words = get("bad_words_ids") or []
    suppress = list(_ids(get("suppress_tokens")))
    for word in bad_words:
        if len(word) == 1:
            suppress.append(int(word[0]))
        else:
            unsupported.append(f"bad_words_ids (multi-token {word!r})")
    if unsupported:
        raise UsageError("generation_config uses settings the harness's decoding loops do not implement: "
                         + ", ".join(unsupported) + "; remove them (or decode with generate() yourself)")
    eos = _ids(get("eos_token_id") if get("eos_token_id") is not None else cfg.eos_token_id)
    pad = get("pad_token_id")
    if pad is None:
        pad = getattr(cfg, "pad_token_id", None)
    start = get("decoder_start_token_id")
    if start is None:
        start = getattr(cfg, "decoder_start_token_id", None)
    base = GenerationSettings(
        eos_token_ids=eos,
        pad_token_id=None if pad is None else int(pad),
        forced_eos_token_id=get("forced_eos_token_id"),
        suppress_tokens=tuple(dict.fromkeys(suppress)),
        decoder_start_token_id=None if start is None else int(start),
        repetition_penalty=float(get("repetition_penalty") or 1.0),
        length_penalty=float(get("length_penalty") if get("length_penalty") is not None else 1.0),
        early_stopping=get("early_stopping") if get("early_stopping") is not None else False,
    )
    return base.with_overrides(**overrides)


def merge_overrides(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Later layers win; ``None`` values mean "not set here"."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            if value is not None:
                out[key] = value
    return out
