"""TensorRT optimisation profiles (min / opt / max shapes) for dynamic ONNX inputs.

TensorRT compiles an engine for a *range* of shapes. A profile that is too small is a classic
deployment failure: the engine builds, then the first long sentence or big batch fails at run
time. The harness derives the profile from the graph's dynamic axes and the run's limits,
passes it to the TensorRT execution provider, and checks every feed against it *before*
running, so the case fails with the shape and the limit instead of a TensorRT stack trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from harness.core.runtime import ShapeRange
    from harness.families.base import GraphSpec


class ShapeProfileError(RuntimeError):
    """Feeds fall outside the engine's optimisation profile."""


@dataclass(frozen=True)
class ShapeProfile:
    min: Mapping[str, tuple[int, ...]]
    opt: Mapping[str, tuple[int, ...]]
    max: Mapping[str, tuple[int, ...]]

    def provider_options(self) -> dict[str, str]:
        """The TensorRT EP's ``trt_profile_{min,opt,max}_shapes`` strings."""
        def fmt(shapes: Mapping[str, tuple[int, ...]]) -> str:
            return ",".join(f"{name}:{'x'.join(str(d) for d in dims)}" for name, dims in shapes.items())

        return {"trt_profile_min_shapes": fmt(self.min), "trt_profile_opt_shapes": fmt(self.opt),
                "trt_profile_max_shapes": fmt(self.max)}

    def with_explicit(self, explicit: "Mapping[str, ShapeRange]", graph: str = "") -> "ShapeProfile":
        """This profile with the inputs a run declared (``input_ids`` or ``<graph>.input_ids``,
        trtexec-like min/opt/max) replacing the derived ranges. A declared range of another rank
        than the input is a usage error naming the input."""
        from harness.core import UsageError

        lows, opts, highs = dict(self.min), dict(self.opt), dict(self.max)
        for name in self.max:
            given = explicit.get(f"{graph}.{name}") or explicit.get(name)
            if given is None:
                continue
            if len(given.max) != len(self.max[name]):
                raise UsageError(f"--trt-profile {name}: {given.text()} has rank {len(given.max)}, the input "
                                 f"of graph {graph!r} has rank {len(self.max[name])}")
            lows[name], opts[name], highs[name] = given.min, given.opt, given.max
        return ShapeProfile(lows, opts, highs)

    def as_dict(self) -> dict[str, str]:
        """Per input ``min,opt,max`` in trtexec's notation (what a record keeps)."""
        def dims(d: tuple[int, ...]) -> str:
            return "x".join(str(v) for v in d)

        return {n: f"{dims(self.min[n])},{dims(self.opt[n])},{dims(self.max[n])}" for n in self.max}

    def violations(self, feeds: Mapping[str, np.ndarray]) -> list[str]:
        out = []
        for name, high in self.max.items():
            if name not in feeds:
                continue
            shape = tuple(feeds[name].shape)
            low = self.min[name]
            if len(shape) != len(high) or any(s > h or s < lo for s, lo, h in zip(shape, low, high)):
                out.append(f"{name} {shape} outside [{low}, {high}]")
        return out

    def check(self, feeds: Mapping[str, np.ndarray]) -> None:
        problems = self.violations(feeds)
        if problems:
            raise ShapeProfileError("TensorRT shape profile too small: " + "; ".join(problems)
                                    + " (feeds outside the profile: raise --harness-trt-max-batch / "
                                    "--harness-trt-max-seq or declare --trt-profile INPUT:MIN,OPT,MAX)")


def profile_for(graph: "GraphSpec", example: Mapping[str, np.ndarray], *, max_batch: int, max_seq: int,
                opt_batch: int | None = None, opt_seq: int | None = None) -> ShapeProfile:
    """Profile over the graph's inputs: ``batch`` axes span 1..max_batch, sequence axes
    (any axis name containing ``sequence``) 1..max_seq (0.. for past lengths, so the first
    decode step with an empty cache fits); static axes keep the example's size."""
    opt_batch = opt_batch or max(1, max_batch // 2)
    opt_seq = opt_seq or max(1, max_seq // 2)
    lows: dict[str, tuple[int, ...]] = {}
    opts: dict[str, tuple[int, ...]] = {}
    highs: dict[str, tuple[int, ...]] = {}
    for name in graph.input_names:
        axes = graph.dynamic_axes.get(name, {})
        low: list[int] = []
        opt: list[int] = []
        high: list[int] = []
        for index, size in enumerate(example[name].shape):
            axis = str(axes.get(index, ""))
            if axis == "batch":
                lo, op, hi = 1, opt_batch, max_batch
            elif "sequence" in axis:
                past = axis.startswith("past")
                combined = "+" in axis  # past + new tokens (an LM's attention mask)
                limit = max_seq * (2 if combined else 1)
                lo, op, hi = (0 if past else 1), opt_seq, limit
            else:
                lo = op = hi = int(size)
            low.append(lo)
            opt.append(op)
            high.append(hi)
        lows[name], opts[name], highs[name] = tuple(low), tuple(opt), tuple(high)
    return ShapeProfile(lows, opts, highs)
