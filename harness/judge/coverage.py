"""Coverage accounting: what a case gated, what it measured without gating, and why.

A verdict is only as good as what it compared. GPT-2 detected as an encoder passed with its
hidden states judged and its LM head and generation never looked at; nothing in its record
said so. Every case now carries ``data.coverage``:

* ``required``: the outputs the model's *head* is judged on (``GraphSpec.head_outputs``: a
  classifier's logits, an LM's logits in every graph; ``generation`` for a generation case);
* ``gated``: outputs with at least one threshold checked on a non-empty comparison;
* ``measured``: outputs computed and reported but not gated, each with the reason (a KV cache
  tensor the graph reports only, nothing compared, no threshold for its metrics);
* ``missing``: required outputs not gated -- a case with any is not a pass (``problem``).

The module owns the accounting only; the parity judges hand it their results. Other gates
(``harness check``, cached-decoding checks) build a ``Coverage`` the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Check
    from harness.families import Family, GraphSpec
    from harness.judge.numeric import OutputResult

#: the key of a generation case's one required output
GENERATION = "generation"


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
        return cls(raw.get("head"), tuple(raw.get("required") or ()), tuple(raw.get("gated") or ()),
                   dict(raw.get("measured") or {}))


def head_outputs(graph: "GraphSpec") -> tuple[str, ...]:
    """The outputs of ``graph`` that carry the model's head: its logits when it has any, else
    what it gates (a base model's hidden states). KV-cache tensors are never head outputs."""
    if graph.logits_outputs:
        return tuple(n for n in graph.output_names if n in graph.logits_outputs)
    return tuple(n for n in graph.output_names if graph.is_gated(n))


def why_not_gated(result: "OutputResult") -> str | None:
    """Why one judged output does not count as gated (None: it does)."""
    if result.tolerance is None:
        return "reported only: the graph gates its head's outputs, not this one"
    if result.n_compared <= 0:
        return "nothing compared (no valid element)"
    checked = [c for c in result.tolerance.checks if c.metric in result.metrics]
    if not checked:
        return "no threshold applies to the metrics it has"
    if all(isinstance(result.metrics[c.metric], float) and math.isnan(result.metrics[c.metric]) for c in checked):
        return "every checked metric is NaN"
    return None


def numeric_coverage(family: "Family", graphs: Sequence["GraphSpec | tuple[str, GraphSpec]"],
                     outputs: Iterable["OutputResult"], head: str | None = None) -> Coverage:
    """Coverage of a numeric-parity case over ``graphs`` from its judged ``outputs``. A graph
    judged under another name (``harness check``'s jobs: ``decoder_model_step``) is given as
    ``(name, graph)``."""
    named = [g if isinstance(g, tuple) else (g.name, g) for g in graphs]
    required = tuple(f"{name}/{o}" for name, g in named for o in head_outputs(g))
    gated: list[str] = []
    measured: dict[str, str] = {}
    for result in outputs:
        key = f"{result.graph}/{result.output}"
        reason = why_not_gated(result)
        if reason is None:
            gated.append(key)
        else:
            measured[key] = reason
    tasks = getattr(family, "tasks", ())
    return Coverage(head or (tasks[0] if tasks else family.name), required, tuple(gated), measured)


def generation_coverage(head: str | None, metrics: Mapping[str, float], checks: Sequence["Check"]) -> Coverage:
    """Coverage of a generation case: gated when at least one generation check was evaluated on
    decoded sentences (``gen_sentences`` > 0) with a finite value."""
    sentences = metrics.get("gen_sentences", 0.0)
    finite = [c.metric for c in checks if c.metric in metrics and not math.isnan(float(metrics[c.metric]))]
    if not checks:
        why = "no generation threshold applies"
    elif not sentences:
        why = "no sentence decoded"
    elif not finite:
        why = "every checked generation metric is NaN"
    else:
        why = ""
    measured = {GENERATION: why} if why else {}
    return Coverage(head, (GENERATION,), () if why else (GENERATION,), measured)
