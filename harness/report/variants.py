"""A variant id read back into its parts for display: ``marian-tiny-int8-static-ort_cpu-opt_disabled``
is model ``marian-tiny``, precision ``int8-static``, provider ``ort_cpu``, setting ``opt_disabled``.

The id is spelled in one place (``core.types.Variant.id``); renderers that hold only an id (the
history store keeps ids, not records) split it here, with the precisions the harness declares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.core.types import Precision

#: precision order of every table and plot: FP32 -> FP16 -> INT8 (the declaration order)
PRECISION_ORDER = tuple(p.value for p in Precision)
_SPLIT = re.compile(r"^(?P<model>.+?)-(?P<precision>" + "|".join(
    re.escape(p) for p in sorted(PRECISION_ORDER, key=len, reverse=True)) + r")-(?P<rest>.+)$")


def precision_rank(precision: str | None) -> int:
    """Position of ``precision`` in FP32 -> FP16 -> INT8 order (unknown ones last)."""
    return PRECISION_ORDER.index(precision) if precision in PRECISION_ORDER else len(PRECISION_ORDER)


@dataclass(frozen=True)
class VariantParts:
    model: str
    precision: str
    provider: str
    #: the runtime-setting suffix (``opt_disabled``), '' for the default settings
    setting: str = ""

    @property
    def column(self) -> str:
        """What a column of this variant's cases is headed by: ``ort_cpu`` or ``ort_cpu · opt_disabled``."""
        return f"{self.provider} · {self.setting}" if self.setting else self.provider

    @property
    def sort_key(self) -> tuple[str, int, str, str]:
        return self.model, precision_rank(self.precision), self.provider, self.setting


def split_variant(variant: str) -> VariantParts:
    """The parts of a variant id; a name that is not one (a team's own case) is all model."""
    found = _SPLIT.match(variant)
    if found is None:
        return VariantParts(variant, "", "")
    provider, _, setting = found["rest"].partition("-")
    return VariantParts(found["model"], found["precision"], provider, setting)
