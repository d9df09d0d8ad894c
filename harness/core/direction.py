"""Which way is good, and the one comparison that follows from it.

"Is this value within its threshold", "is this value worse than that one" and "did this
metric get better" were each written where they were needed -- ``a >= t if higher else a <= t``
in the check, ``a < b if op == ">=" else a > b`` in the report, ``(after < before) == higher``
in the change-point detector, ``proposed > current if higher else ...`` in the calibrator, a
hard-coded ``name == "cosine"`` in the cached-decoding gate: ten spellings of one rule, and
each could drift (flip one sign and an error bound becomes a floor). They all call
:meth:`Direction.worse` now; ``tests/test_metric_declaration.py`` fails on a new spelling.

This module imports nothing of the harness: every layer may use it.
"""

from __future__ import annotations

import enum
import math


class Direction(str, enum.Enum):
    """Which way is good: agreements and similarities must stay >= their threshold, errors <=."""

    HIGHER = "higher"
    LOWER = "lower"

    @classmethod
    def of(cls, higher_is_better: bool) -> Direction:
        return cls.HIGHER if higher_is_better else cls.LOWER

    @classmethod
    def from_op(cls, op: str) -> Direction:
        """The direction a recorded gate's ``op`` says (``>=``: higher is better; anything else,
        and the ``<=`` older records imply by omission, lower)."""
        return cls.HIGHER if op == ">=" else cls.LOWER

    @property
    def higher_is_better(self) -> bool:
        return self is Direction.HIGHER

    @property
    def symbol(self) -> str:
        """The gate's operator: ``>=`` (a floor) or ``<=`` (a bound)."""
        return ">=" if self is Direction.HIGHER else "<="

    def worse(self, a: float, b: float) -> bool:
        """Whether ``a`` is strictly worse than ``b`` in this direction: the one direction
        comparison of the harness. A NaN compares False both ways; a caller that ranks NaN
        (the worst value there is, for a report) says so before asking."""
        return a < b if self is Direction.HIGHER else a > b

    def holds(self, value: float, threshold: float) -> bool:
        """Whether ``value`` is within ``threshold`` (not worse than it); a NaN never holds:
        a metric that could not be computed must not pass its gate by comparing False both ways."""
        return not math.isnan(value) and not self.worse(value, threshold)
