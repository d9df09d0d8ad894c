"""Numeric agreement between one output of an exported model and the PyTorch FP32 reference.

Every metric is computed in float64 over the *valid* elements only, so padding never
hides or invents an error. Failure is loud: a NaN/Inf that the reference does not have
turns every error into ``inf`` and every similarity into ``nan``, and ``nan`` never
passes a gate (see ``harness.core.Check.passes``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from harness.metrics.registry import METRICS, MetricSpec, Scope

#: name -> declaration of every numeric metric (declared in ``harness.metrics.registry``)
NUMERIC_METRICS: dict[str, MetricSpec] = METRICS.as_dict(Scope.NUMERIC)


@dataclass(frozen=True)
class Location:
    """The worst element, in reference coordinates, so a report can point at it."""

    index: tuple[int, ...]
    ref: float
    got: float
    abs_err: float

    def describe(self, axis_names: Sequence[str] | None = None) -> str:
        """E.g. ``batch=3, position=17, index=402 (ref 1.23, got 1.31, |err| 0.08)``.

        Axes without a name are called ``dim<i>``; naming more axes than exist is a
        caller bug and raises, because a mislabelled location misleads.
        """
        names = list(axis_names or [])
        if len(names) > len(self.index):
            raise ValueError(f"{len(names)} axis names {names} for a {len(self.index)}-d index")
        names += [f"dim{i}" for i in range(len(names), len(self.index))]
        where = ", ".join(f"{n}={i}" for n, i in zip(names, self.index)) or "scalar"
        return f"{where} (ref {self.ref:.4g}, got {self.got:.4g}, |err| {self.abs_err:.4g})"


@dataclass(frozen=True)
class NumericComparison:
    """Metrics of one output; ``n_compared`` counts valid elements, not positions."""

    metrics: dict[str, float]
    worst: Location | None
    n_compared: int


def compare_arrays(
    ref: np.ndarray,
    got: np.ndarray,
    *,
    valid_mask: np.ndarray | None = None,
    is_logits: bool = False,
    topk: int = 5,
    only: Collection[str] | None = None,
) -> NumericComparison:
    """Compare ``got`` with the reference ``ref`` over the elements ``valid_mask`` keeps.

    ``valid_mask`` covers the leading axes of ``ref`` (``(batch, seq)`` for
    ``(batch, seq, vocab)`` logits) and is broadcast over the rest. Elements where ref
    and got hold the *same* non-finite value (both ``-inf`` for a banned token) agree
    and are left out of the arithmetic. With nothing to compare, every metric is
    ``nan``: an empty comparison is no evidence of agreement.

    ``only``: the element metrics wanted, when a caller reads a few of them thousands of times
    (the closed loop compares every step's caches and keeps two): the others are not computed.
    """
    ref = np.asarray(ref)
    got = np.asarray(got)
    if ref.shape != got.shape:
        raise ValueError(f"shape mismatch: ref {ref.shape} vs got {got.shape}")
    if topk < 1:
        raise ValueError(f"topk must be >= 1, got {topk}")
    if only is not None and (unknown := sorted(set(only) - set(_metric_names(False, False)))):
        raise ValueError(f"only: not an element metric: {', '.join(unknown)}")
    exact = ref.dtype.kind in "biu"
    logits = is_logits and not exact
    if logits and (ref.ndim == 0 or ref.shape[-1] == 0):
        raise ValueError(f"logits need a non-empty last axis, got shape {ref.shape}")
    sel = _Selection.of(ref.shape, valid_mask, max_ndim=ref.ndim - 1 if logits else ref.ndim)
    r, g = sel.take(ref), sel.take(got)
    if r.size == 0:
        names = _metric_names(exact, logits)
        return NumericComparison({m: float("nan") for m in names}, None, 0)
    if exact:
        return _compare_exact(r, g, sel)
    r, g = r.astype(np.float64, copy=False), g.astype(np.float64, copy=False)
    bad = _disagreeing_non_finite(r, g)
    if bad is not None:
        return _non_finite_result(r, g, bad, sel, logits)
    metrics, worst = _float_metrics(r, g, sel, only)
    if logits:
        # The mask is constant along the last axis, so the valid elements are whole rows.
        vocab = ref.shape[-1]
        metrics.update(_logit_metrics(r.reshape(-1, vocab), g.reshape(-1, vocab), topk))
    return NumericComparison(metrics, worst, int(r.size))


def _metric_names(exact: bool, logits: bool) -> list[str]:
    """The metrics an output of this kind gets, as declared (``MetricSpec.outputs``)."""
    return [s.name for s in NUMERIC_METRICS.values()
            if s.outputs is not None and s.outputs.applies(exact=exact, logits=logits)]


@dataclass(frozen=True)
class _Selection:
    """The valid elements, flattened in row-major order, and the way back to their index."""

    shape: tuple[int, ...]
    flat_mask: np.ndarray | None  # None: every element is valid (no copy of a mask)

    @classmethod
    def of(
        cls, shape: tuple[int, ...], valid_mask: np.ndarray | None, *, max_ndim: int
    ) -> "_Selection":
        if valid_mask is None:
            return cls(shape, None)
        vm = np.asarray(valid_mask)
        if vm.dtype != bool:
            raise ValueError(f"valid_mask must be bool, got {vm.dtype}")
        if vm.ndim > max_ndim or vm.shape != shape[: vm.ndim]:
            raise ValueError(
                f"valid_mask shape {vm.shape} must equal the leading axes of {shape}"
                + (" excluding the logits axis" if max_ndim < len(shape) else "")
            )
        full = np.broadcast_to(vm.reshape(vm.shape + (1,) * (len(shape) - vm.ndim)), shape)
        return cls(shape, full.ravel())

    def take(self, a: np.ndarray) -> np.ndarray:
        flat = a.reshape(-1)
        return flat if self.flat_mask is None else flat[self.flat_mask]

    def locate(self, k: int, ref: float, got: float, err: float) -> Location:
        """Location of the k-th valid element."""
        flat = k if self.flat_mask is None else int(np.flatnonzero(self.flat_mask)[k])
        index = tuple(int(i) for i in np.unravel_index(flat, self.shape)) if self.shape else ()
        return Location(index, float(ref), float(got), float(err))


def _compare_exact(r: np.ndarray, g: np.ndarray, sel: _Selection) -> NumericComparison:
    """Integer/bool outputs (token ids, masks): any difference is real, no tolerance."""
    n = r.size
    differs = np.flatnonzero(r != g)
    if differs.size == 0:
        zeros = {"max_abs": 0.0, "mean_abs": 0.0, "mismatch_rate": 0.0}
        return NumericComparison(zeros, sel.locate(0, r[0], g[0], 0.0), n)
    if g.dtype.kind in "biu":  # Python ints: exact even for uint64 extremes
        diffs = np.array([abs(int(a) - int(b)) for a, b in zip(r[differs], g[differs])], float)
    else:  # a float 'got' for an integer reference: NaN counts as infinitely wrong
        diffs = np.abs(g[differs].astype(np.float64) - r[differs].astype(np.float64))
        diffs[~np.isfinite(diffs)] = np.inf
    k = int(np.argmax(diffs))
    metrics = {
        "max_abs": float(diffs[k]),
        "mean_abs": min(float(diffs.sum() / n), float(diffs[k])),
        "mismatch_rate": differs.size / n,
    }
    at = int(differs[k])
    return NumericComparison(metrics, sel.locate(at, r[at], g[at], diffs[k]), n)


def _disagreeing_non_finite(r: np.ndarray, g: np.ndarray) -> np.ndarray | None:
    """Where a NaN/Inf appears that the other side does not share; None if nowhere."""
    finite = np.isfinite(r) & np.isfinite(g)
    if finite.all():  # the common case: one cheap pass
        return None
    same_non_finite = (r == g) | (np.isnan(r) & np.isnan(g))
    bad = ~finite & ~same_non_finite
    return bad if bad.any() else None


def _non_finite_result(
    r: np.ndarray, g: np.ndarray, bad: np.ndarray, sel: _Selection, logits: bool
) -> NumericComparison:
    """A NaN/Inf the reference lacks: fail every gate and point at the first one."""
    metrics = {}
    for name in _metric_names(False, logits):
        metrics[name] = float("nan") if NUMERIC_METRICS[name].higher_is_better else float("inf")
    first = int(np.argmax(bad))
    worst = sel.locate(first, r[first], g[first], float("inf"))
    return NumericComparison(metrics, worst, int(r.size))


def _ratio(num: float, den: float) -> float:
    """num / den where a zero denominator means 'no error' only if num is zero too."""
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def _float_metrics(
    r: np.ndarray, g: np.ndarray, sel: _Selection, only: Collection[str] | None = None
) -> tuple[dict[str, float], Location | None]:
    keep = np.isfinite(r)  # identical non-finite pairs agree; leave them out
    kept = None if keep.all() else np.flatnonzero(keep)
    if kept is not None:
        r, g = r[kept], g[kept]
    if r.size == 0:  # every valid element was an identical non-finite pair
        metrics = dict.fromkeys(_metric_names(False, False), 0.0)
        metrics["cosine"] = 1.0
        return {n: v for n, v in metrics.items() if only is None or n in only}, None
    err = np.abs(g - r)
    k = int(np.argmax(err))
    max_abs = float(err[k])
    scale = float(np.max(np.abs(r)))

    def max_rel() -> float:
        if scale == 0.0:
            return _ratio(max_abs, 0.0)
        return float(np.max(err / (np.abs(r) + 1e-6 * scale)))

    def rel_l2() -> float:
        if scale == 0.0:
            return _ratio(max_abs, 0.0)
        # Divide by the scale before squaring so huge values cannot overflow the norms.
        return _norm(err / scale) / _norm(r / scale)

    computed: dict[str, Callable[[], float]] = {
        "max_abs": lambda: max_abs,
        # Rounding can put a mean or percentile of equal values one ulp above their max.
        "mean_abs": lambda: min(float(err.mean()), max_abs),
        "p99_abs": lambda: min(float(np.percentile(err, 99)), max_abs),
        "max_rel": max_rel,
        "norm_max_abs": lambda: _ratio(max_abs, scale),
        "rel_l2": rel_l2,
        "cosine": lambda: _cosine(r, g, scale),
    }
    metrics = {name: value() for name, value in computed.items() if only is None or name in only}
    at = k if kept is None else int(kept[k])
    return metrics, sel.locate(at, r[k], g[k], max_abs)


def _norm(x: np.ndarray) -> float:
    """The L2 norm of the flattened array by numpy's pairwise summation, not BLAS.

    ``np.dot`` and ``np.linalg.norm`` of a whole array call numpy's OpenBLAS, whose threads wake
    for a few tens of thousands of elements and then wait for a core that ONNX Runtime's or
    PyTorch's thread pool is still spinning on: the closed loop's 1016 cache comparisons of a
    cold ``harness check`` took 1.9 s that way and 0.14 s with one BLAS thread (docs/pitfalls.md).
    The sum is also more accurate than BLAS's blocked accumulation."""
    return math.sqrt(float(np.sum(x * x)))


def _cosine(r: np.ndarray, g: np.ndarray, r_scale: float) -> float:
    g_scale = float(np.max(np.abs(g)))
    if r_scale == 0.0 or g_scale == 0.0:
        return 1.0 if r_scale == g_scale else 0.0
    rn, gn = r / r_scale, g / g_scale  # unit-scale copies: no overflow in the dot products
    cos = float(np.sum(rn * gn)) / (_norm(rn) * _norm(gn))
    return min(1.0, max(-1.0, cos))


def _log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - np.max(x, axis=-1, keepdims=True)
    out: np.ndarray = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    return out


def _logit_metrics(r: np.ndarray, g: np.ndarray, topk: int) -> dict[str, float]:
    """Distribution-level agreement over the last axis; one row per valid position."""
    log_p, log_q = _log_softmax(r), _log_softmax(g)
    p = np.exp(log_p)
    with np.errstate(invalid="ignore"):  # 0 * (-inf - -inf) for shared banned tokens
        terms = np.where(p > 0.0, p * (log_p - log_q), 0.0)
    kl_per_pos = np.maximum(terms.sum(axis=-1), 0.0)  # rounding can dip just below zero
    k = min(topk, r.shape[-1])
    return {
        "kl": float(kl_per_pos.mean()),
        "kl_max": float(kl_per_pos.max()),
        "top1_agreement": float(np.mean(np.argmax(r, -1) == np.argmax(g, -1))),
        "topk_agreement": float(np.mean(_topk_overlap(r, g, k)) / k),
    }


def _topk_overlap(r: np.ndarray, g: np.ndarray, k: int) -> np.ndarray:
    """Per row, how many of the k largest indices the two share (argpartition: O(V))."""
    v = r.shape[-1]
    top_r = np.argpartition(r, v - k, axis=-1)[:, v - k :]
    top_g = np.argpartition(g, v - k, axis=-1)[:, v - k :]
    both = np.sort(np.concatenate([top_r, top_g], axis=-1), axis=-1)
    # Each set has k distinct ids, so an id adjacent to itself after sorting is shared.
    shared: np.ndarray = np.sum(both[:, 1:] == both[:, :-1], axis=-1)
    return shared
