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

This module does the accounting from the parity judges' results; the record section itself
(``Coverage``, its codec and its one writer) is ``harness.results.coverage``. Other gates
(``harness check``, cached-decoding checks) build a ``Coverage`` the same way.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from harness.results.coverage import GENERATION, Coverage

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Check
    from harness.families import Family, GraphSpec
    from harness.judge.numeric import OutputResult

__all__ = ["GENERATION", "Coverage", "generation_coverage", "head_outputs", "numeric_coverage", "why_not_gated"]


def head_outputs(graph: "GraphSpec") -> tuple[str, ...]:
    """The outputs of ``graph`` that carry the model's head: its logits when it has any, else
    what it gates (a base model's hidden states), and what a deployment derives from them (a QA
    head's answer span: ``GraphSpec.derived``). KV-cache tensors are never head outputs."""
    derived = tuple(d.name for d in graph.derived)
    if graph.logits_outputs:
        return tuple(n for n in graph.output_names if n in graph.logits_outputs) + derived
    return tuple(n for n in graph.output_names if graph.is_gated(n)) + derived


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
