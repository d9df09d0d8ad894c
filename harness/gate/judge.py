"""The one perf judge: every kind of evidence (``harness.gate.evidence``) decided by one rule.

:func:`judge` takes an :class:`~harness.gate.evidence.Evidence` and the metric policies (the
thresholds, from the metric registry) and returns one :class:`~harness.gate.row.Row` per judged
statistic. Its kind's row of the policy table (``harness.gate.policy.POLICY``) says which test
gives the p-value, what the interval is of, how noise widens it and when the answer is
INCONCLUSIVE; every kind then decides through :func:`decide`, so the bar is the same whatever the
noise handling: a gate that cries wolf gets switched off, so a REGRESSION needs both *evidence*
(significant, interval entirely above 1) and an *effect* big enough to matter (the whole interval
at or beyond ``min_effect``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable, Mapping

import numpy as np

from harness.gate.canary import widen
from harness.gate.changepoints import MIN_RELATIVE, band, detect
from harness.gate.evidence import CanaryBlocks, Evidence, EvidenceKind
from harness.gate.policy import MIN_SEGMENTS, OUTLIER_FACTOR, POLICY, RECENT_RUNS
from harness.gate.row import Row, Verdict, fmt_ci, fmt_p, fmt_value
from harness.metrics.spec import MetricPolicy, percentile
from harness.perf.stats import DEFAULT_BLOCKS, MIN_BLOCK_SIZE, Stat, block_cv, bootstrap_ratio_cis, mann_whitney, min_samples_for

_Z = 1.959963984540054  # two-sided 95 %
#: consecutive chunks of a run's canary-adjusted segments whose medians measure its level's wander
WANDER_CHUNKS = 4


def latency_stat(name: str) -> Stat | None:
    """What a latency policy name measures: ``pNN`` -> percentile NN, ``mean`` -> np.mean, else None."""
    return np.mean if name == "mean" else percentile(name)


def judge(evidence: Evidence, policies: Mapping[str, MetricPolicy]) -> list[Row]:
    """A row per statistic of ``evidence.stats``, by the rule of its kind (module docstring)."""
    return _BY_KIND[evidence.kind](evidence, policies)


def decide(ratio: float, lo: float, hi: float, p_value: float, policy: MetricPolicy) -> tuple[Verdict, str]:
    """The verdict rule for sampled metrics (see docs/perf-gate.md for the reasoning).

    REGRESSION: p < alpha and the whole interval at or above the threshold (a confirmed
    slowdown of at least ``min_effect``); an interval straddling the threshold is
    INCONCLUSIVE. PASS: the interval rules out a threshold-sized slowdown.

    Why the lower bound must clear the threshold (not just 1): the interval is computed from
    one run's samples and cannot see run-to-run variance. Two back-to-back ``harness run
    --perf`` on this machine gave a torch p90 of +11.2%, CI [+6.0%, +15.8%], p=0.024 -- the
    same build. Requiring lo >= 1 + threshold turned that into INCONCLUSIVE while a real +25%
    slowdown (CI lower bound ~ +20%) is still detected.
    """
    thr = policy.min_effect
    significant = p_value < policy.alpha
    change = f"{(ratio - 1) * 100:+.1f}%"
    if significant and lo > 1.0 and ratio - 1.0 >= thr and lo - 1.0 >= thr:
        return Verdict.REGRESSION, f"{change} >= +{thr:.0%} threshold, p={fmt_p(p_value)}"
    if significant and hi < 1.0 and 1.0 - ratio >= thr and 1.0 - hi >= thr:
        return Verdict.IMPROVEMENT, f"{change}, p={fmt_p(p_value)}"
    if hi < 1.0 + thr:
        if significant and lo > 1.0:
            return Verdict.PASS, f"{change}: significant but below the +{thr:.0%} threshold"
        return Verdict.PASS, f"{change}: CI rules out a +{thr:.0%} slowdown"
    if ratio - 1.0 >= thr:
        if not significant:
            return Verdict.INCONCLUSIVE, f"{change} but rank test not significant (p={fmt_p(p_value)})"
        if lo <= 1.0:
            return Verdict.INCONCLUSIVE, f"{change} but CI {fmt_ci(lo, hi)} includes no change"
        return Verdict.INCONCLUSIVE, f"{change} but CI {fmt_ci(lo, hi)} too wide around the +{thr:.0%} threshold"
    return Verdict.INCONCLUSIVE, f"{change} but CI {fmt_ci(lo, hi)} cannot rule out +{thr:.0%}"


def _row(ev: Evidence, name: str, pol: MetricPolicy, base: float, cand: float, ratio: float, lo: float | None,
         hi: float | None, p: float | None, verdict: Verdict, reason: str) -> Row:
    metric = (name if ev.kind is EvidenceKind.SINGLE else ev.metric if ev.kind is EvidenceKind.SERIES
              else f"{ev.metric}.{name}" if ev.metric else name)
    return Row(ev.variant, metric, pol.kind, base, cand, ratio, lo, hi, p, verdict, reason, pol.advisory,
               ev.kind.value, ev.counts)


# --------------------------------------------------------------------------- single numbers


def _single(ev: Evidence, policies: Mapping[str, MetricPolicy]) -> list[Row]:
    """Single numbers (RSS, file size, cold start) carry no noise estimate: effect thresholds only."""
    out = []
    for name in ev.stats:
        pol = policies[name.rsplit(":", 1)[-1]]
        base, cand = float(np.asarray(ev.base).ravel()[0]), float(np.asarray(ev.cand).ravel()[0])
        verdict, reason = judge_single(base, cand, pol)
        out.append(_row(ev, name, pol, base, cand, cand / base if base > 0 else math.nan, None, None, None,
                        verdict, reason))
    return out


def judge_single(base: float, cand: float, policy: MetricPolicy) -> tuple[Verdict, str]:
    """The single-number rule: a relative threshold and an absolute floor, both to be cleared."""
    delta = cand - base
    rel = delta / base if base > 0 else (math.inf if delta > 0 else -math.inf if delta < 0 else 0.0)
    floor = f" and >= {fmt_value(policy.min_abs, policy.kind)}" if policy.min_abs else ""
    change = f"{rel * 100:+.1f}% ({'+' if delta >= 0 else '-'}{fmt_value(abs(delta), policy.kind)})"
    if rel >= policy.min_effect and delta >= policy.min_abs and delta > 0:
        return Verdict.REGRESSION, f"{change} >= +{policy.min_effect:.0%}{floor}"
    if -rel >= policy.min_effect and -delta >= policy.min_abs and delta < 0:
        return Verdict.IMPROVEMENT, change
    return Verdict.PASS, f"{change} within +{policy.min_effect:.0%}{floor}"


# --------------------------------------------------------------------------- paired blocks


def _paired(ev: Evidence, policies: Mapping[str, MetricPolicy]) -> list[Row]:
    """Per-pair ratios of the block statistic: signed-rank test, bootstrap of pairs (or process pairs)."""
    from scipy.stats import wilcoxon

    rule = POLICY[EvidenceKind.PAIRED]
    rng = np.random.default_rng(ev.seed)
    rows = []
    for name in ev.stats:
        stat = latency_stat(name)
        if stat is None or name not in policies:
            raise ValueError(f"unknown latency statistic {name!r}; use pNN or mean")
        pol = policies[name]
        base, cand = _block_stat(ev.base, stat), _block_stat(ev.cand, stat)
        n = len(base)
        ok = (base > 0) & (cand > 0)
        logs, unit = _units(np.log(cand[ok] / base[ok]), np.asarray(ev.groups)[ok] if ev.groups else None)
        overall_b, overall_c = float(np.median(base)), float(np.median(cand))
        if logs.size < rule.min_units:
            ratio = float(math.exp(np.median(logs))) if logs.size else math.nan
            rows.append(_row(ev, name, pol, overall_b, overall_c, ratio, math.nan, math.nan, math.nan,
                             Verdict.INCONCLUSIVE, f"too few {unit}: {logs.size} < {rule.min_units}"))
            continue
        ratio = float(math.exp(np.median(logs)))
        boot = np.median(logs[rng.integers(0, logs.size, size=(ev.resamples, logs.size))], axis=1)
        lo, hi = (float(math.exp(q)) for q in np.quantile(boot, [pol.alpha / 2, 1 - pol.alpha / 2]))
        p_value = 1.0 if np.all(logs == 0) else float(wilcoxon(logs).pvalue)
        verdict, reason = decide(ratio, lo, hi, p_value, pol)
        counted = f"{n} pairs" if unit == "pairs" else f"{n} pairs in {logs.size} {unit}"
        rows.append(_row(ev, name, pol, overall_b, overall_c, ratio, lo, hi, p_value, verdict,
                         f"paired, {counted}: {reason}"))
    return rows


def _block_stat(samples: np.ndarray, stat: Stat) -> np.ndarray:
    if callable(stat):
        return np.asarray([stat(row) for row in samples], dtype=float)
    return np.asarray(np.percentile(samples, stat, axis=1), dtype=float)


def _units(logs: np.ndarray, groups: np.ndarray | None) -> tuple[np.ndarray, str]:
    """The log ratios the verdict is over, and what one is: a pair's, or -- when the pairs come in
    groups (process pairs) -- the median of a group's pairs, so that a bias the two processes of
    one group share counts once, as noise between groups, not once per pair as a difference."""
    if groups is None:
        return logs, "pairs"
    return np.asarray([np.median(logs[groups == g]) for g in np.unique(groups)]), "process pairs"


# --------------------------------------------------------------------------- two recorded runs


def _two_runs(ev: Evidence, policies: Mapping[str, MetricPolicy]) -> list[Row]:
    """Two runs' samples: canary-adjusted per segment where both runs interleaved a canary, else
    the block statistics with the record-level canary's drift and spread (:func:`_recorded`)."""
    rule = POLICY[EvidenceKind.TWO_RUNS]
    base, cand = np.asarray(ev.base, dtype=float), np.asarray(ev.cand, dtype=float)
    wanted = {name: stat for name in ev.stats if (stat := latency_stat(name)) is not None and name in policies}
    if not wanted:
        return []
    n = min(base.size, cand.size)
    # canary-adjusted: a call is an outlier against its own moment (its segment's canary), not the run's
    outliers = ((outlier_fraction(_per_canary(base, ev.canary[0])), outlier_fraction(_per_canary(cand, ev.canary[1])))
                if ev.canary is not None else (outlier_fraction(base), outlier_fraction(cand)))
    recorded = _recorded(ev, wanted, policies) if ev.canary is None else None  # adjusted first
    rows = []
    for name, stat in wanted.items():
        pol = policies[name]
        b_val, c_val = _value(base, stat), _value(cand, stat)
        need = rule.min_units if callable(stat) else max(rule.min_units, min_samples_for(stat / 100.0))
        if n < need:
            rows.append(_row(ev, name, pol, b_val, c_val, c_val / b_val if b_val > 0 else math.nan, None, None,
                             None, Verdict.INCONCLUSIVE, f"too few samples: {n} < {need} needed for {name}"))
            continue
        if not b_val > 0:
            rows.append(_row(ev, name, pol, b_val, c_val, math.nan, None, None, None, Verdict.INCONCLUSIVE,
                             f"no ratio: baseline {name} is {b_val:g}"))
            continue
        adjusted = _adjusted(ev, name, stat, pol) if ev.canary is not None else None
        if adjusted is None and recorded is None:  # too few canary segments: the record-level rule decides
            recorded = _recorded(ev, wanted, policies)
        if adjusted is not None:
            ratio, lo, hi, p, verdict, reason, levels = adjusted
        elif recorded is not None and name in recorded:
            ratio, lo, hi, p, verdict, reason, levels = recorded[name]
        else:
            rows.append(_row(ev, name, pol, b_val, c_val, c_val / b_val, None, None, None, Verdict.INCONCLUSIVE,
                             f"no ratio: baseline {name} is {b_val:g}"))
            continue
        among = _among_outliers(name, stat, outliers)
        if among:  # a percentile the preemptions set says nothing of the model, however far
            verdict, reason = Verdict.INCONCLUSIVE, among
        rows.append(replace(_row(ev, name, pol, b_val, c_val, ratio, lo, hi, p, verdict, reason), process_levels=levels))
    return rows


#: ratio, interval, p-value, verdict, reason, and whether the level came from every process (``Row.process_levels``)
Decided = tuple[float, float, float, float, Verdict, str, bool]


def _value(samples: np.ndarray, stat: Stat) -> float:
    return float(stat(samples)) if callable(stat) else float(np.percentile(samples, stat))


def _adjusted(ev: Evidence, name: str, stat: Stat, pol: MetricPolicy) -> Decided | None:
    """Each run's calls divided, segment by segment, by the canary block timed right before the
    segment: what the machine did to both in that moment cancels. The change is the difference of
    the two runs' median adjusted log ratios; its interval resamples segments; the rank test is on
    the segments' adjusted log ratios; the between-run floor is added. None when a side has fewer
    than ``MIN_SEGMENTS`` usable segments (the record-level rule decides then)."""
    assert ev.canary is not None
    rule = POLICY[EvidenceKind.TWO_RUNS]
    sides = [_adjusted_logs(np.asarray(s, dtype=float), blocks, stat)
             for s, blocks in zip((ev.base, ev.cand), ev.canary)]
    if min(s.size for s in sides) < MIN_SEGMENTS:
        return None
    a, b = sides
    centre = float(np.median(b) - np.median(a))
    rng = np.random.default_rng(ev.seed)
    reps = 2000
    boot = (np.median(b[rng.integers(0, b.size, size=(reps, b.size))], axis=1)
            - np.median(a[rng.integers(0, a.size, size=(reps, a.size))], axis=1))
    q_lo, q_hi = np.quantile(boot, [pol.alpha / 2, 1 - pol.alpha / 2])
    ratio, lo, hi = math.exp(centre), math.exp(min(q_lo, centre)), math.exp(max(q_hi, centre))
    from scipy.stats import mannwhitneyu

    p = 1.0 if np.ptp(np.concatenate([a, b])) == 0 else float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    wander = max(rule.between_sd, math.hypot(_wander(a), _wander(b)))
    lo, hi, p = widen(ratio, lo, hi, p, wander)
    ratio, lo, hi, p, levels = _between_processes(ev, name, ratio, lo, hi, p, _main_change(ev, adjusted=True))
    verdict, reason = decide(ratio, lo, hi, p, pol)
    reason = f"canary-adjusted, {a.size}+{b.size} segments, level wander {wander:.1%}: {reason}{levels}"
    return ratio, lo, hi, p, verdict, _process_note(ev, verdict, reason), bool(levels)


def _between_processes(ev: Evidence, stat: str, ratio: float, lo: float, hi: float, p: float,
                       main_change: float) -> tuple[float, float, float, float, str]:
    """The two runs' processes (``harness.gate.processes``) in the ratio, its interval and p-value,
    and a note for the reason. ``lo``/``hi``: the main process's interval so far (its calls, the
    level's wander, the machine's drift); ``main_change``: the log change of its level (p50).
    Where the fresh processes' change can be combined with the main process's, the ratio moves by
    what the combined level change adds to the main process's; the interval is the combined
    change's (for the p50, the level itself) or that and the main process's own for another
    statistic (its shape beyond the level is the main process's alone), and the p-value a normal
    test's on it (the rank test saw the main process only). Otherwise the spread of a difference
    of two single processes is added."""
    if ev.processes is None:
        return ratio, lo, hi, p, ""
    main_sd = (math.log(hi) - math.log(lo)) / (2 * _Z) if ratio > 0 and lo > 0 and hi > 0 else math.nan
    combined = ev.processes.combine(main_change, main_sd)
    if combined is None:
        return (ratio, *widen(ratio, lo, hi, p, ev.processes.sd), "")
    centre = math.log(ratio) + combined.change - main_change
    total = combined.sd if stat == "p50" else math.hypot(combined.sd, main_sd)
    p_normal = math.erfc(abs(centre) / (total * math.sqrt(2))) if total > 0 else p
    return (math.exp(centre), math.exp(centre - _Z * total), math.exp(centre + _Z * total), p_normal,
            f"; {combined.reason}")


def _main_change(ev: Evidence, *, adjusted: bool) -> float:
    """The log change of the main process's level (its p50): of the canary-adjusted segments'
    medians where ``adjusted``, else of the raw calls; nan when a side has no level."""
    if adjusted and ev.canary is not None:
        sides = [_adjusted_logs(np.asarray(s, dtype=float), blocks, 50.0) for s, blocks in zip((ev.base, ev.cand), ev.canary)]
        return float(np.median(sides[1]) - np.median(sides[0])) if min(s.size for s in sides) else math.nan
    b, c = (float(np.median(np.asarray(s, dtype=float))) if np.asarray(s).size else math.nan for s in (ev.base, ev.cand))
    return math.log(c / b) if b > 0 and c > 0 else math.nan


def _process_note(ev: Evidence, verdict: Verdict, reason: str) -> str:
    """An INCONCLUSIVE row whose process spread was assumed, not measured, says so."""
    if ev.processes is None or ev.processes.measured or verdict is not Verdict.INCONCLUSIVE:
        return reason
    return f"{reason}; {ev.processes.reason}"


def _wander(logs: np.ndarray) -> float:
    """How far a run's adjusted level wanders on its own time scale: the spread of the medians of its
    quarters (consecutive segments) beyond what their own sampling noise explains (batch means:
    var(quarter medians) - se(quarter median)^2, the latter from the segments' robust spread). Why:
    the segments of one run are not independent draws -- the model and the canary drift apart slowly
    under a changing load -- so the segments' own interval is too narrow for a second run. Measured
    under load 18 (16 runs of 40 segments, 120 A/A pairs of runs): 26 % of the pairs outside the
    segments' own 95 % interval, 3.3 % with this wander added."""
    quarters = [float(np.median(q)) for q in np.array_split(logs, WANDER_CHUNKS) if q.size]
    if len(quarters) < 2:
        return 0.0
    spread = 1.4826 * float(np.median(np.abs(logs - np.median(logs))))
    sampling = 1.2533 * spread / math.sqrt(logs.size / len(quarters))  # the median's standard error
    return math.sqrt(max(0.0, float(np.var(quarters, ddof=1)) - sampling ** 2))


def _adjusted_logs(samples: np.ndarray, blocks: CanaryBlocks, stat: Stat) -> np.ndarray:
    """log(segment statistic / canary median before it) per segment of at least MIN_BLOCK_SIZE calls."""
    out = [math.log(v / med) for seg, med in zip(blocks.segments(samples), blocks.medians)
           if seg.size >= MIN_BLOCK_SIZE and (v := _value(seg, stat)) > 0]
    return np.asarray(out, dtype=float)


def _per_canary(samples: np.ndarray, blocks: CanaryBlocks) -> np.ndarray:
    """The calls of the segments, each divided by its segment's canary median."""
    parts = [seg / med for seg, med in zip(blocks.segments(samples), blocks.medians)]
    return np.concatenate(parts) if parts else samples


def _recorded(ev: Evidence, wanted: Mapping[str, Stat], policies: Mapping[str, MetricPolicy]) -> dict[str, Decided]:
    """Block statistics of the whole runs: Mann-Whitney on block medians, block-bootstrap ratio
    intervals, the record-level canary's spread added (``drift``), and a side noisier than
    ``max_cv`` adds its block noise (:func:`noise_sd`): noise and drift widen the interval, and a
    drifted machine or a noisy run leaves only a claim that clears the threshold beyond them
    standing (:func:`_beyond_drift`, :func:`_beyond_noise`). Why not a veto: a runtime 30 % slower
    in the candidate's environment read "too noisy: block-median CV 30.7 % > 10 %" for p50
    +29.4 % [+28.3 %, +42.2 %], p = 7e-08."""
    base, cand = np.asarray(ev.base, dtype=float), np.asarray(ev.cand, dtype=float)
    if min(base.size, cand.size) < 2:
        return {}
    alpha = min(policies[name].alpha for name in wanted)
    p_value = mann_whitney(base, cand)
    try:
        cis = bootstrap_ratio_cis(base, cand, wanted, alpha=alpha, seed=ev.seed)
    except ValueError:  # a zero baseline statistic (coarse clock): no ratio to bound
        return {}
    noise = max(block_cv(base), block_cv(cand)) if min(base.size, cand.size) >= 2 * MIN_BLOCK_SIZE else math.nan
    main_change = _main_change(ev, adjusted=False)
    out: dict[str, Decided] = {}
    for name, (ratio, lo, hi) in cis.items():
        pol = policies[name]
        p_row = p_value
        if ev.drift is not None:
            lo, hi, p_row = widen(ratio, lo, hi, p_row, ev.drift.between_sd)
        ratio, lo, hi, p_row, levels = _between_processes(ev, name, ratio, lo, hi, p_row, main_change)
        noisy = f"too noisy: block-median CV {noise:.1%} > {pol.max_cv:.0%}" if math.isfinite(noise) and \
            noise > pol.max_cv else ""
        if noisy:  # noise widens the interval; it vetoes nothing the widened interval still shows
            lo, hi, p_row = widen(ratio, lo, hi, p_row, noise_sd(base, cand))
        verdict, reason = decide(ratio, lo, hi, p_row, pol)
        verdict, reason = _beyond_drift(verdict, reason, lo, hi, pol, ev)
        if noisy:
            verdict, reason = _beyond_noise(verdict, reason, lo, hi, noisy, pol)
        out[name] = (ratio, lo, hi, p_row, verdict, _process_note(ev, verdict, reason + levels), bool(levels))
    return out


def outlier_fraction(samples: np.ndarray) -> float:
    """Share of calls slower than OUTLIER_FACTOR x the median.

    A percentile above which at least half the calls are outliers is set by whatever
    interrupted the process, not by the model, and differs from run to run
    (measured p95 ratios of 0.4-4.8 between identical runs), so it is not judged.
    """
    if samples.size == 0:
        return 0.0
    return float(np.mean(samples > OUTLIER_FACTOR * np.median(samples)))


def _among_outliers(name: str, stat: Stat, outliers: tuple[float, float]) -> str:
    """Why ``name`` is set by preemptions, not the model ("" for no): at least ``(1 - p) / 2`` of a
    side's calls slower than 1.5x its median."""
    if callable(stat) or max(outliers) < (1.0 - stat / 100.0) / 2:
        return ""
    side = "baseline" if outliers[0] >= outliers[1] else "candidate"
    return (f"{name} sits among outliers: {max(outliers):.1%} of {side} calls > {OUTLIER_FACTOR}x median "
            f"(limit {(1.0 - stat / 100.0) / 2:.1%})")


def noise_sd(base: np.ndarray, cand: np.ndarray) -> float:
    """The log-scale standard error a noisy run adds to a latency ratio: each run's typical speed
    is known to its block-median CV over the square root of its blocks (``DEFAULT_BLOCKS``), the
    two sides in quadrature. Added only when a side is noisier than the metric's ``max_cv``."""
    return math.hypot(block_cv(base), block_cv(cand)) / math.sqrt(DEFAULT_BLOCKS)


def _beyond_noise(verdict: Verdict, reason: str, lo: float, hi: float, noisy: str,
                  pol: MetricPolicy) -> tuple[Verdict, str]:
    """A noisy comparison keeps a REGRESSION whose interval, widened by the noise, lies far beyond
    the threshold -- its lower bound at least the rule's ``noise_margin`` thresholds up (the reason
    says so); anything else is INCONCLUSIVE "too noisy". Why a margin: the noise estimate itself is
    rough (20 block medians of a wandering machine), so a claim made through it must not hinge on
    it; a +25 % change under 30 % block noise (lower bound +8 %) stays INCONCLUSIVE, a runtime 30 %
    slower (lower bound +12 %) does not."""
    margin = POLICY[EvidenceKind.TWO_RUNS].noise_margin
    if verdict is Verdict.REGRESSION and lo >= 1.0 + margin * pol.min_effect:
        return verdict, f"{reason}; {noisy.removeprefix('too ')}: interval widened to {fmt_ci(lo, hi)}, still " \
                        f"beyond {margin:g}x the threshold"
    if reason.startswith("machine drift"):  # both stood in the way: say both
        return Verdict.INCONCLUSIVE, f"{noisy}; {reason}"
    return Verdict.INCONCLUSIVE, noisy


def _beyond_drift(verdict: Verdict, reason: str, lo: float, hi: float, pol: MetricPolicy,
                  ev: Evidence) -> tuple[Verdict, str]:
    """Machine drift between the runs (the canaries moved) leaves a claim standing only when the
    model moved by the threshold beyond the drift: a REGRESSION whose lower bound clears
    ``(1 + min_effect)`` times the canary's upper bound (the machine ran slower for the candidate
    by at most that), an IMPROVEMENT mirrored. Otherwise INCONCLUSIVE, with the drift as reason."""
    drift = ev.drift
    if drift is None or not drift.drifted or drift.lo is None or drift.hi is None:
        return verdict, reason
    thr = pol.min_effect
    if verdict is Verdict.REGRESSION and lo >= (1.0 + thr) * max(1.0, drift.hi):
        return verdict, f"{reason}; beyond the {drift.reason}"
    if verdict is Verdict.IMPROVEMENT and hi <= (1.0 - thr) * min(1.0, drift.lo):
        return verdict, f"{reason}; beyond the {drift.reason}"
    return Verdict.INCONCLUSIVE, drift.reason


# --------------------------------------------------------------------------- a stored series


def _series(ev: Evidence, policies: Mapping[str, MetricPolicy]) -> list[Row]:
    """A nightly series against its own past: the newest change point decides while it is recent
    (its level held, so it is the series' level now, not one slow night); without one, the newest
    run against the band of the current level's earlier runs -- outside it is INCONCLUSIVE, one
    run being no level yet. Why both: the band alone flags every noisy night and forgets a
    slowdown the night after it became the norm; the change point alone is silent the first night."""
    values = np.concatenate([np.asarray(ev.base, dtype=float).ravel(), np.asarray(ev.cand, dtype=float).ravel()])
    labels = ev.runs if len(ev.runs) == values.size else tuple(f"#{i + 1}" for i in range(values.size))
    kept = np.isfinite(values)
    values, labels = values[kept], tuple(label for label, ok in zip(labels, kept) if ok)
    return [_series_row(ev, name, policies[name], values, labels) for name in ev.stats]


def _series_row(ev: Evidence, name: str, pol: MetricPolicy, values: np.ndarray, labels: tuple[str, ...]) -> Row:
    n = values.size
    need = POLICY[EvidenceKind.SERIES].min_units
    newest = float(values[-1]) if n else math.nan

    def row(base: float, cand: float, verdict: Verdict, reason: str, at_level: int = 1) -> Row:
        ratio = cand / base if base > 0 else math.nan
        return replace(_row(ev, name, pol, base, cand, ratio, None, None, None, verdict, reason),
                       counts=(n - at_level, at_level))

    if n < need:
        first = float(values[0]) if n else math.nan
        return row(first, newest, Verdict.INCONCLUSIVE, f"{n} stored run(s) < {need}: no trend yet", 1 if n else 0)
    thr = pol.min_effect
    # the gate's absolute floor too (peak memory: 32 MiB), as a single number is judged
    within = (f"not beyond both the {thr:.0%} threshold and the {fmt_value(pol.min_abs, pol.kind)} floor"
              if pol.min_abs else f"within {thr:.0%}")
    starts = detect(values, min_relative=min(thr, MIN_RELATIVE))
    if starts:
        start = starts[-1]
        before = float(np.median(values[([0] + starts)[-2]:start]))
        after = float(np.median(values[start:]))
        held = n - start
        change = after / before - 1.0 if before else math.inf
        since = f"{change:+.1%} since run {labels[start]} ({held} runs at the new level)"
        if held <= RECENT_RUNS:
            if ev.direction is None:
                return row(before, after, Verdict.INCONCLUSIVE, f"{since}; which way is better is not known", held)
            if abs(change) >= thr and abs(after - before) >= pol.min_abs:
                if ev.direction.worse(after, before):
                    return row(before, after, Verdict.REGRESSION, f"{since}: a change point >= {thr:.0%} worse", held)
                return row(before, after, Verdict.IMPROVEMENT, f"{since}: a change point, better", held)
            return row(before, after, Verdict.PASS, f"{since}: {within}", held)
        level = values[start:-1]
        settled = f"; the level since run {labels[start]} ({change:+.1%}) is older than {RECENT_RUNS} runs"
    else:
        level, settled = values[:-1], ""
    centre = float(np.median(level))
    change = newest / centre - 1.0 if centre else math.inf
    edges = band(level)
    tonight = f"newest run {labels[-1]} {change:+.1%} against the level's median"
    outside = edges is not None and not edges[0] <= newest <= edges[1]
    moved = abs(change) >= thr and abs(newest - centre) >= pol.min_abs
    if edges is not None and outside and moved and (ev.direction is None or ev.direction.worse(newest, centre)):
        return row(centre, newest, Verdict.INCONCLUSIVE,
                   f"{tonight}, outside its band [{edges[0]:.4g}, {edges[1]:.4g}]: one run is no level yet{settled}")
    return row(centre, newest, Verdict.PASS, f"{tonight}, no change point{settled}")


_BY_KIND: dict[EvidenceKind, Callable[[Evidence, Mapping[str, MetricPolicy]], list[Row]]] = {
    EvidenceKind.TWO_RUNS: _two_runs,
    EvidenceKind.PAIRED: _paired,
    EvidenceKind.SINGLE: _single,
    EvidenceKind.SERIES: _series,
}
assert set(_BY_KIND) == set(POLICY), "every kind of the policy table has its judge"
