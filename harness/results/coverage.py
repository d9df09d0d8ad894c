"""The ``data.coverage`` section of a record: what a case gated of its head's outputs.

The accounting that fills it is ``harness.judge.coverage``; this is the record type, its JSON
codec and its one writer, so reports read ``Coverage.of(record)`` and never spell the keys.
``missing`` non-empty (or nothing required) means the case cannot pass.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from harness.results.record import Record

#: the key of a generation case's one required output
GENERATION = "generation"
#: where the section lives in a record's ``data``
KEY = "coverage"


@dataclass(frozen=True)
class Coverage:
    """What one case gated. Keys are ``<graph>/<output>`` (or ``generation``)."""

    head: str | None
    required: tuple[str, ...]
    gated: tuple[str, ...]
    #: key -> why it was measured but not gated
    measured: Mapping[str, str] = field(default_factory=dict)

    @property
    def missing(self) -> tuple[str, ...]:
        gated = set(self.gated)
        return tuple(k for k in self.required if k not in gated)

    @property
    def passes(self) -> bool:
        return bool(self.required) and not self.missing

    def problem(self) -> str | None:
        """The failure line when the head's outputs were not all gated (None: they were)."""
        if self.passes:
            return None
        head = f"the {self.head} head" if self.head else "the model's head"
        if not self.required:
            return f"coverage: {head} declares no output to judge, so nothing about it was gated"
        reasons = "; ".join(f"{k}: {self.measured.get(k, 'not measured')}" for k in self.missing)
        return f"coverage: {head}'s outputs were not gated ({reasons}); a case that gates none of them cannot pass"

    def summary(self) -> str:
        """``gated 2/2 (model/logits, generation)``, for terminal and Markdown tables."""
        done = [k for k in self.required if k in set(self.gated)]
        text = f"gated {len(done)}/{len(self.required)}"
        if self.missing:
            text += f", missing {', '.join(self.missing)}"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {"head": self.head, "required": list(self.required), "gated": list(self.gated),
                "measured": dict(self.measured), "missing": list(self.missing), "passes": self.passes}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Coverage:
        def strs(value: Any) -> tuple[str, ...]:
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        measured = raw.get("measured")
        head = raw.get("head")
        return cls(None if head is None else str(head), strs(raw.get("required")), strs(raw.get("gated")),
                   {str(k): str(v) for k, v in measured.items()} if isinstance(measured, Mapping) else {})

    @classmethod
    def of(cls, record: Record) -> Coverage | None:
        """A record's coverage (None: a record written before coverage was accounted, or a skip)."""
        raw = record.data.get(KEY)
        return cls.from_dict(raw) if isinstance(raw, Mapping) else None

    def write(self, data: MutableMapping[str, Any]) -> None:
        """The one writer: ``data.coverage`` of a case's record."""
        data[KEY] = self.as_dict()
