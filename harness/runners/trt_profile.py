"""TensorRT optimisation profiles (min / opt / max shapes) for dynamic ONNX inputs.

TensorRT compiles an engine for a *range* of shapes. A profile that is too small is a classic
deployment failure: the engine builds, then the first long sentence or big batch fails at run
time. The harness derives the profile from the graph's dynamic axes and the run's limits,
passes it to the TensorRT execution provider, and checks every feed against it *before*
running, so the case fails with the shape and the limit instead of a TensorRT stack trace.

The TensorRT settings a run declares -- explicit profiles (trtexec's ``--minShapes/--optShapes/
--maxShapes``), engine and timing caches, the derived profile's limits -- are this module's
:class:`TensorRTSettings`, read by both TensorRT paths (ONNX Runtime's TensorRT EP and native
TensorRT); no GPU is needed to parse, check or record them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

import numpy as np

from harness.core.errors import UsageError
from harness.core.runtime import BackendSettings, setting

if TYPE_CHECKING:  # pragma: no cover
    from harness.families.base import GraphSpec


# -- declared profiles (trtexec-like) -----------------------------------------------------------------
@dataclass(frozen=True)
class ShapeRange:
    """One input's explicit min / opt / max shape (``1x16,8x64,16x256``)."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    def text(self) -> str:
        return ",".join("x".join(str(d) for d in dims) for dims in (self.min, self.opt, self.max))


def _dims(text: str, where: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.strip().lower().split("x"))
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not a shape like 8x64") from None
    if not dims or any(d < 0 for d in dims):
        raise UsageError(f"{where}: {text!r} is not a shape like 8x64")
    return dims


def parse_shape_range(text: str | Sequence[str], where: str) -> ShapeRange:
    """``"1x16,8x64,16x256"`` or ``["1x16", "8x64", "16x256"]`` -> ShapeRange, checked:
    the same rank three times and min <= opt <= max on every axis (what TensorRT demands)."""
    parts = [p for p in text.split(",")] if isinstance(text, str) else [str(p) for p in text]
    if len(parts) != 3:
        raise UsageError(f"{where}: expected min,opt,max shapes like 1x16,8x64,16x256, got {text!r}")
    low, opt, high = (_dims(p, where) for p in parts)
    if not len(low) == len(opt) == len(high):
        raise UsageError(f"{where}: min, opt and max must have the same rank, got {text!r}")
    for axis, (a, b, c) in enumerate(zip(low, opt, high)):
        if not a <= b <= c:
            raise UsageError(f"{where}: axis {axis} needs min <= opt <= max, got {a}, {b}, {c}")
    return ShapeRange(low, opt, high)


def parse_trt_profile(raw: Sequence[str] | Mapping[str, Any], where: str) -> dict[str, ShapeRange]:
    """``["input_ids:1x16,8x64,16x256", ...]`` (CLI) or ``{input_ids = "1x16,8x64,16x256"}`` /
    ``{input_ids = ["1x16", "8x64", "16x256"]}`` (TOML) -> input name -> ShapeRange."""
    out: dict[str, ShapeRange] = {}
    if isinstance(raw, Mapping):
        items = [(str(k), v) for k, v in raw.items()]
    else:
        items = []
        for entry in raw:
            name, sep, shapes = str(entry).partition(":")
            if not sep or not name.strip():
                raise UsageError(f"{where}: expected INPUT:MIN,OPT,MAX like input_ids:1x16,8x64,16x256, "
                                 f"got {entry!r}")
            items.append((name.strip(), shapes))
    for name, shapes in items:
        if not isinstance(shapes, (str, list, tuple)):
            raise UsageError(f"{where}.{name}: expected \"MIN,OPT,MAX\" or a list of three shapes")
        out[name] = parse_shape_range(shapes, f"{where} {name}")
    return out


def _directory(raw: Any, where: str) -> str:
    return str(Path(str(raw)).expanduser().resolve())


def _profile_text(profile: Mapping[str, ShapeRange]) -> str | None:
    return " ".join(f"trt:{n}={r.text()}" for n, r in profile.items()) or None


@BackendSettings.declare
@dataclass(frozen=True)
class TensorRTSettings(BackendSettings):
    """A TensorRT engine's build settings: explicit optimisation profiles of some inputs (the others
    keep the profile derived from the graph's dynamic axes and the limits), the engine and timing
    cache directories, and the derived profile's largest batch and sequence (``trt_max_batch`` None:
    the run's batch size). The limits size a build and are not part of a record's runtime settings
    (they are options of the record's rerun when given)."""

    section: ClassVar[str] = "tensorrt"
    doc: ClassVar[str] = "TensorRT builds (ONNX Runtime's TensorRT EP, native TensorRT)"

    #: input name (or ``<graph>.<input>``) -> explicit TensorRT min/opt/max
    trt_profile: Mapping[str, ShapeRange] = setting(
        parse=parse_trt_profile, encode=lambda p: {n: r.text() for n, r in p.items()},
        decode=lambda raw: {str(n): parse_shape_range(str(t), f"trt_profile {n}") for n, t in dict(raw).items()},
        describe=_profile_text, place="last", factory=dict)
    trt_engine_cache: str | None = setting(None, parse=_directory)
    trt_timing_cache: str | None = setting(None, parse=_directory)
    trt_max_batch: int | None = setting(None, recorded=False)
    trt_max_seq: int = setting(128, recorded=False)

    def max_batch(self, batch_size: int) -> int:
        """The derived profile's largest batch: the declared limit, else the run's batch size."""
        return self.trt_max_batch or batch_size



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

    def with_explicit(self, explicit: Mapping[str, ShapeRange], graph: str = "") -> "ShapeProfile":
        """This profile with the inputs a run declared (``input_ids`` or ``<graph>.input_ids``,
        trtexec-like min/opt/max) replacing the derived ranges. A declared range of another rank
        than the input is a usage error naming the input."""
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
