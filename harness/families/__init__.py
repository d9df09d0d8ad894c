"""Model families: which graphs a model exports and how they are fed."""

from __future__ import annotations

from harness.families.base import Family, GraphSpec
from harness.families.causal_lm import CausalLMFamily
from harness.families.encoder import EncoderFamily
from harness.families.seq2seq import Seq2SeqFamily

_FAMILIES: dict[str, type[Family]] = {"encoder": EncoderFamily, "seq2seq": Seq2SeqFamily, "causal_lm": CausalLMFamily}


def family_for(name: str) -> Family:
    return _FAMILIES[name]()


__all__ = ["Family", "GraphSpec", "family_for"]
