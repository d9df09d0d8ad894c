"""Model families: which graphs a model exports, how they are fed, how a model of the
family is detected, loaded and decoded.

Adding a family = one new module here with a ``Family`` subclass decorated by
``@register_family`` (and its import below, so the built-in set is complete on import).
"""

from __future__ import annotations

from harness.families.base import Family, GraphSpec
from harness.families.registry import detect_family, families, family_for, family_names, register_family

# the built-in families register themselves on import, in this order (the order names are listed in)
from harness.families import encoder, seq2seq, causal_lm, heads  # noqa: E402,F401,I001  isort: skip

__all__ = ["Family", "GraphSpec", "detect_family", "families", "family_for", "family_names", "register_family"]
