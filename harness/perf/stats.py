"""Latency statistics that stay honest on noisy, drifting machines.

Per-call latency samples are neither independent nor normal: consecutive calls share
cache, frequency and scheduler state, and a run drifts as the machine warms up or a
neighbour starts working. Treating every call as an independent draw makes tests
wildly over-confident. So the significance tools here work on *blocks* of consecutive
calls: block medians for the rank test, and whole blocks as the resampling unit of the
bootstrap, which keeps short-range correlation inside each resampled unit.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

#: Percentiles every summary reports, as fractions.
PERCENTILES: tuple[float, ...] = (0.50, 0.90, 0.95, 0.99)

#: Blocks per sample set when the caller does not choose: enough blocks for the rank
#: test to reach small p-values (20 vs 20 gives p down to ~1e-11), few enough that each
#: block holds many calls and its median is stable.
DEFAULT_BLOCKS = 20

#: Never make blocks smaller than this; a median of 2-3 calls is as noisy as one call.
MIN_BLOCK_SIZE = 5

Stat = Callable[..., np.ndarray] | float


def min_samples_for(p: float) -> int:
    """Samples needed before percentile ``p`` (a fraction) is trustworthy.

    Rule of thumb: at least ~10 samples should lie beyond the percentile, i.e.
    ``10 / (1 - p)``; p99 therefore needs 1000 calls, p50 only 20.
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"percentile must be in [0, 1), got {p}")
    return math.ceil(10.0 / (1.0 - p) - 1e-9)


def _as_samples(samples: Sequence[float] | np.ndarray, what: str = "samples") -> np.ndarray:
    arr = np.asarray(samples, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError(f"{what}: need at least one sample")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: samples must be finite numbers")
    return arr


@dataclass(frozen=True)
class LatencySummary:
    """Descriptive statistics of one sample set (milliseconds).

    ``low_confidence[name]`` is True when there are too few samples for that
    percentile to mean much (see :func:`min_samples_for`); reports should show it.
    """

    n: int
    mean: float
    std: float
    cv: float
    min: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    throughput_per_s: float
    low_confidence: dict[str, bool] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def summarize(samples_ms: Sequence[float] | np.ndarray) -> LatencySummary:
    """Summarise per-call latencies; raises ValueError on empty or non-finite input."""
    arr = _as_samples(samples_ms)
    n = int(arr.size)
    mean = float(arr.mean())
    std = float(arr.std(ddof=1)) if n > 1 else 0.0
    # method="linear" is numpy's default; pinned because the gate compares percentiles
    # across versions and a silent change of interpolation would look like a regression.
    p50, p90, p95, p99 = (float(v) for v in np.percentile(arr, [100 * p for p in PERCENTILES], method="linear"))
    lo, hi = float(arr.min()), float(arr.max())
    # Interpolation can overshoot by an ulp; clamp so min <= p50 <= ... <= max always holds.
    p50, p90, p95, p99 = np.maximum.accumulate(np.clip([p50, p90, p95, p99], lo, hi)).tolist()
    flags = {f"p{round(p * 100)}": n < min_samples_for(p) for p in PERCENTILES}
    return LatencySummary(
        n=n,
        mean=mean,
        std=std,
        cv=std / mean if mean > 0 else float("nan"),
        min=lo,
        p50=p50,
        p90=p90,
        p95=p95,
        p99=p99,
        max=hi,
        throughput_per_s=1000.0 / mean if mean > 0 else float("inf"),
        low_confidence=flags,
    )


def default_block_size(n: int, n_blocks: int = DEFAULT_BLOCKS) -> int:
    """Block length used when the caller does not choose: ``n / n_blocks``, at least MIN_BLOCK_SIZE."""
    return max(MIN_BLOCK_SIZE, n // max(1, n_blocks))


def _resolve_block_size(n: int, block_size: int | None, n_blocks: int | None) -> int:
    if block_size is not None and n_blocks is not None:
        raise ValueError("give block_size or n_blocks, not both")
    if block_size is not None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        return min(block_size, n)
    if n_blocks is not None:
        if n_blocks < 1:
            raise ValueError(f"n_blocks must be >= 1, got {n_blocks}")
        return max(1, n // n_blocks)
    return min(default_block_size(n), n)


def block_medians(
    samples: Sequence[float] | np.ndarray,
    block_size: int | None = None,
    *,
    n_blocks: int | None = None,
) -> np.ndarray:
    """Medians of consecutive blocks of calls, in call order.

    Blocks are near-equal (sizes differ by at most one) and together use every
    sample, so a slow tail at the end of a run is never silently dropped.
    """
    arr = _as_samples(samples)
    size = _resolve_block_size(arr.size, block_size, n_blocks)
    count = max(1, arr.size // size)
    return np.array([np.median(chunk) for chunk in np.array_split(arr, count)])


def block_cv(samples: Sequence[float] | np.ndarray, block_size: int | None = None) -> float:
    """Coefficient of variation of the block medians: drift/noise *between* blocks.

    Per-call CV mostly measures the heavy right tail, which is normal; the spread of
    block medians measures whether the machine's typical speed moved during the run.
    """
    meds = block_medians(samples, block_size)
    if meds.size < 2:
        return float("nan")
    mean = float(meds.mean())
    return float(meds.std(ddof=1) / mean) if mean > 0 else float("nan")


def mann_whitney(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    block_size: int | None = None,
) -> float:
    """Two-sided Mann–Whitney U p-value comparing the block medians of ``a`` and ``b``.

    Ranking block medians rather than calls makes the test's independence assumption
    roughly true; with raw calls, a few seconds of drift gives p ~ 1e-30.
    """
    ma = block_medians(a, block_size)
    mb = block_medians(b, block_size)
    if ma.size < 2 or mb.size < 2:
        return 1.0
    if np.ptp(np.concatenate([ma, mb])) == 0.0:
        return 1.0  # all identical: no evidence of any difference
    from scipy import stats  # here, not at import: ~2.5 s that a run without a perf gate never needs

    return float(stats.mannwhitneyu(ma, mb, alternative="two-sided").pvalue)


def _stats_fn(stats: Mapping[str, Stat]) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
    """Row-wise evaluator for many statistics at once.

    Percentile numbers (0-100) share one ``np.percentile`` call, i.e. one partial sort
    per resample, which is most of the bootstrap's cost.
    """
    qs: dict[str, float] = {}
    fns: dict[str, Callable[..., np.ndarray]] = {}
    for name, stat in stats.items():
        if callable(stat):
            fns[name] = stat
            continue
        q = float(stat)
        if not 0.0 <= q <= 100.0:
            raise ValueError(f"percentile must be within [0, 100], got {q}")
        qs[name] = q

    def evaluate(x: np.ndarray) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        if qs:
            values = np.percentile(x, list(qs.values()), axis=-1)
            out.update({name: np.asarray(v, dtype=float) for name, v in zip(qs, values, strict=True)})
        for name, fn in fns.items():
            out[name] = np.asarray(fn(x, axis=-1), dtype=float)
        return out

    return evaluate


def _block_resample(arr: np.ndarray, block: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """Moving-block bootstrap: ``reps`` series of ``len(arr)`` calls built from random runs of ``block`` calls."""
    n = arr.size
    per_series = -(-n // block)
    starts = rng.integers(0, n - block + 1, size=(reps, per_series))
    idx = (starts[:, :, None] + np.arange(block)).reshape(reps, -1)[:, :n]
    series: np.ndarray = arr[idx]
    return series


def _ratio_intervals(base_point: Mapping[str, float], cand_point: Mapping[str, float],
                     ratios: Mapping[str, np.ndarray], alpha: float) -> dict[str, tuple[float, float, float]]:
    """``(point, lo, hi)`` per statistic from bootstrap ratios: the percentile interval, widened
    to contain the point estimate (a skewed resample could otherwise exclude it, and a gate must
    never be more confident than its own estimate)."""
    out: dict[str, tuple[float, float, float]] = {}
    for name, resampled in ratios.items():
        point = cand_point[name] / base_point[name]
        finite = resampled[np.isfinite(resampled)]
        if finite.size == 0:
            out[name] = (point, float("-inf"), float("inf"))
            continue
        lo, hi = np.quantile(finite, [alpha / 2, 1 - alpha / 2])
        out[name] = (point, float(min(lo, point)), float(max(hi, point)))
    return out


def bootstrap_ratio_cis(
    base: Sequence[float] | np.ndarray,
    cand: Sequence[float] | np.ndarray,
    stats: Mapping[str, Stat],
    *,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
    block_size: int | None = None,
) -> dict[str, tuple[float, float, float]]:
    """Like :func:`bootstrap_ratio_ci` for several statistics from the same resamples."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not stats:
        return {}
    a = _as_samples(base, "base")
    b = _as_samples(cand, "cand")
    evaluate = _stats_fn(stats)
    base_point = {k: float(v[0]) for k, v in evaluate(a[None, :]).items()}
    cand_point = {k: float(v[0]) for k, v in evaluate(b[None, :]).items()}
    for name, value in base_point.items():
        if not value > 0:
            raise ValueError(f"base {name} must be positive to form a ratio, got {value}")

    rng = np.random.default_rng(seed)
    size_a = _resolve_block_size(a.size, block_size, None)
    size_b = _resolve_block_size(b.size, block_size, None)
    ratios = {name: np.empty(n_boot) for name in stats}
    # Chunked so 2000 resamples of 100k calls never need gigabytes at once.
    chunk = max(1, 1_000_000 // max(a.size, b.size))
    for start in range(0, n_boot, chunk):
        reps = min(chunk, n_boot - start)
        sa = evaluate(_block_resample(a, size_a, reps, rng))
        sb = evaluate(_block_resample(b, size_b, reps, rng))
        with np.errstate(divide="ignore", invalid="ignore"):
            for name in stats:
                ratios[name][start : start + reps] = sb[name] / sa[name]

    return _ratio_intervals(base_point, cand_point, ratios, alpha)


def bootstrap_ratio_ci(
    base: Sequence[float] | np.ndarray,
    cand: Sequence[float] | np.ndarray,
    stat: Stat = np.median,
    *,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
    block_size: int | None = None,
) -> tuple[float, float, float]:
    """``(ratio, lo, hi)``: ``stat(cand) / stat(base)`` and its ``1 - alpha`` block-bootstrap interval.

    ``stat`` is a numpy reduction accepting ``axis`` (``np.median``, ``np.mean``) or a
    percentile number such as ``90``. Both sides are resampled independently in blocks
    of consecutive calls, so within-run correlation widens the interval as it should.
    The interval is the percentile interval, widened if needed to contain the point
    estimate: a skewed resample could otherwise exclude it, and a gate must never be
    more confident than its own estimate.
    """
    return bootstrap_ratio_cis(
        base, cand, {"stat": stat}, n_boot=n_boot, alpha=alpha, seed=seed, block_size=block_size
    )["stat"]


def paired_rounds_ratio_cis(
    base_rounds: np.ndarray,
    cand_rounds: np.ndarray,
    stats: Mapping[str, Stat],
    *,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, tuple[float, float, float]]:
    """``{name: (ratio, lo, hi)}`` for interleaved rounds: ``stat(cand) / stat(base)`` of the
    pooled calls, with a bootstrap interval that resamples *rounds*, the same rounds for both.

    ``base_rounds`` and ``cand_rounds`` have shape ``(rounds, calls)``: round ``r`` of each side
    ran back to back (in rotating order), so whatever the machine did during round ``r`` -- a
    neighbour's burst, a frequency step -- hit both sides of it. Resampling each side's blocks
    independently (:func:`bootstrap_ratio_cis`) treats that shared drift as if it were
    difference, and on a VM whose tail moves between seconds the p99 interval came out +-15-40 %
    wide. Resampling the round indices jointly keeps each round's drift on both sides of the
    ratio, so it cancels the way it does in the design -- the paired analogue of the block
    bootstrap, as in interleaved A/B benchmarking. The point estimate is unchanged (pooled
    statistic over all calls); the interval is widened if needed to contain it.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    a = np.asarray(base_rounds, dtype=np.float64)
    b = np.asarray(cand_rounds, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[0] or a.shape[0] < 2:
        raise ValueError(f"need two (rounds, calls) arrays with the same number (>= 2) of rounds, "
                         f"got shapes {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("samples must be finite")
    if not stats:
        return {}
    evaluate = _stats_fn(stats)
    base_point = {k: float(v[0]) for k, v in evaluate(a.reshape(1, -1)).items()}
    cand_point = {k: float(v[0]) for k, v in evaluate(b.reshape(1, -1)).items()}
    for name, value in base_point.items():
        if not value > 0:
            raise ValueError(f"base {name} must be positive to form a ratio, got {value}")

    rng = np.random.default_rng(seed)
    rounds = a.shape[0]
    ratios = {name: np.empty(n_boot) for name in stats}
    chunk = max(1, 1_000_000 // max(a.size, b.size))
    for start in range(0, n_boot, chunk):
        reps = min(chunk, n_boot - start)
        picks = rng.integers(0, rounds, size=(reps, rounds))  # the same rounds for both sides
        sa = evaluate(a[picks].reshape(reps, -1))
        sb = evaluate(b[picks].reshape(reps, -1))
        with np.errstate(divide="ignore", invalid="ignore"):
            for name in stats:
                ratios[name][start : start + reps] = sb[name] / sa[name]

    return _ratio_intervals(base_point, cand_point, ratios, alpha)
