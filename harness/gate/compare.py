"""Compare a candidate run's performance with a baseline and decide, per metric.

A gate that cries wolf gets switched off, so a REGRESSION verdict needs two separate
things: *evidence* that the candidate is slower (rank test on block medians AND a
block-bootstrap interval of the ratio entirely above 1) and an *effect* big enough to
matter (the metric's ``min_effect``). When the data cannot support either a pass or a
regression (too few calls, a drifting machine, an interval straddling the threshold)
the answer is INCONCLUSIVE, never a guess. Only non-advisory REGRESSIONs fail the gate.
"""

from __future__ import annotations

import enum
import json
import math
import zlib
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterable, Mapping, NamedTuple

import numpy as np

from harness.core import UsageError, did_you_mean
from harness.core.compared import Compared
from harness.core.markdown import table
from harness.gate.canary import widen
from harness.metrics.registry import METRICS, Scope, perf_policies
from harness.metrics.spec import MetricPolicy as MetricPolicy  # re-exported: the gate's API names it
from harness.metrics.spec import percentile
from harness.perf.contention import busier_note
from harness.perf.stats import (
    DEFAULT_BLOCKS,
    MIN_BLOCK_SIZE,
    Stat,
    block_cv,
    bootstrap_ratio_cis,
    mann_whitney,
    min_samples_for,
)
from harness.perf.tail import precise_enough
from harness.results.record import RecordLike, readable_records

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console
    from rich.table import Table

    from harness.gate.canary import Drift

#: With fewer calls than this on either side every latency statistic is INCONCLUSIVE:
#: 8 blocks of 5 calls is the least that gives the rank test any power.
MIN_LATENCY_SAMPLES = 8 * MIN_BLOCK_SIZE

#: A call slower than this multiple of its run's median is an *outlier*: on a shared
#: machine mostly a preemption by a neighbour (measured: 3-11% of calls on the 2-core
#: dev box, at 1.5x-30x the median), not the model.
OUTLIER_FACTOR = 1.5

#: A run noisier than its metric's ``max_cv`` can still show a REGRESSION, when the interval
#: widened by the noise keeps its lower bound at least this many thresholds above no change
#: (p50: +10 %); see ``_beyond_noise``.
NOISY_MARGIN = 2.0

def latency_stat(name: str) -> Stat | None:
    """What a latency policy name measures: ``pNN`` -> percentile NN, ``mean`` -> np.mean, else None."""
    return np.mean if name == "mean" else percentile(name)


class Verdict(str, enum.Enum):
    PASS = "PASS"
    REGRESSION = "REGRESSION"
    IMPROVEMENT = "IMPROVEMENT"
    INCONCLUSIVE = "INCONCLUSIVE"

    def __str__(self) -> str:
        return self.value


class EnvironmentMismatch(UsageError):
    """Baseline and candidate ran on different machines or library versions.

    Timings from different environments differ for reasons that are not the model,
    so comparing them would blame the candidate for the hardware. ``--baseline-force-env``
    overrides, and the report then says so.
    """

    def __init__(self, differences: list[str]):
        self.differences = differences
        shown = "; ".join(differences[:4]) + (f"; +{len(differences) - 4} more" if len(differences) > 4 else "")
        super().__init__(f"environment differs from the baseline ({shown}); rerun on the baseline's machine "
                         "or pass --baseline-force-env")


#: The gate's default policy per metric, derived from the metric registry: each is declared on its
#: budget (``MetricSpec.perf_gate``: ``p50`` on ``p50_ms``, ``peak_rss_bytes`` on ``peak_rss_mb``).
#: The defaults and their reasons are documented in docs/perf-gate.md (its table is generated from
#: the registry); the numbers come from scripts/bench_gate_power.py on a shared 2-core CPU box.
DEFAULT_POLICIES: dict[str, MetricPolicy] = perf_policies()
#: a budget's name -> the gate's name of its number (``p50_ms`` -> ``p50``): ``--baseline-threshold`` takes either
_BY_BUDGET: dict[str, str] = {spec.name: spec.gate_name for spec in METRICS.of(Scope.PERF_BUDGET)
                              if spec.perf_gate is not None}


def merge_policies(policies: Mapping[str, MetricPolicy] | Iterable[MetricPolicy] | None) -> dict[str, MetricPolicy]:
    """Defaults overridden, by name, with the caller's policies."""
    merged = dict(DEFAULT_POLICIES)
    if policies is None:
        return merged
    items = policies.values() if isinstance(policies, Mapping) else policies
    for policy in items:
        merged[policy.name] = policy
    return merged


def parse_threshold(text: str) -> MetricPolicy:
    """``p50=8%`` or ``p50=0.08`` -> the default p50 policy with that effect threshold. The
    budget's name says the same (``p50_ms=8%``, ``peak_rss_mb=10%``): one declaration, two names.

    Lets a shared CI runner loosen a threshold to its measured noise without code.
    """
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not value.strip():
        raise UsageError(f"--baseline-threshold {text!r}: expected NAME=FRACTION, e.g. p50=0.08 or p50=8%")
    name = _BY_BUDGET.get(name, name)
    if name not in DEFAULT_POLICIES:
        known = [*DEFAULT_POLICIES, *_BY_BUDGET]
        raise UsageError(
            f"--baseline-threshold: unknown metric {name!r}{did_you_mean(name, known)}; "
            f"valid: {', '.join(f'{n} ({b})' for b, n in _BY_BUDGET.items())}"
        )
    raw = value.strip()
    try:
        effect = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UsageError(f"--baseline-threshold {text!r}: {raw!r} is not a number") from None
    if not math.isfinite(effect) or effect < 0:  # NaN would switch the gate off without a word
        raise UsageError(f"--baseline-threshold {text!r}: an effect threshold must be a finite fraction >= 0")
    return replace(DEFAULT_POLICIES[name], min_effect=effect)


@dataclass(frozen=True)
class Row:
    """One metric of one variant, judged. ``ratio`` is candidate / baseline."""

    variant: str
    metric: str
    kind: str
    base: float
    cand: float
    ratio: float
    ci_lo: float | None
    ci_hi: float | None
    p_value: float | None
    verdict: Verdict
    reason: str
    advisory: bool = False

    @property
    def gating_regression(self) -> bool:
        return self.verdict is Verdict.REGRESSION and not self.advisory

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdict"] = self.verdict.value
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


@dataclass
class Comparison:
    """Every judged row plus what could not be compared and how the environments relate."""

    rows: list[Row]
    missing: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    env_differences: list[str] = field(default_factory=list)
    forced_env: bool = False
    #: ``--allow-missing``: missing variants or nothing compared do not fail (the headline says so)
    allow_missing: bool = False
    #: False inside ``harness compare``, which counts coverage per case itself
    coverage_gated: bool = True
    #: variant -> what its canaries said about the machine (``harness.gate.canary.Drift.as_dict``)
    drift: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: "unpaired" (recorded runs), "paired" (every latency metric re-timed interleaved in this job,
    #: ``harness.gate.retime``) or "mixed" (some variants paired, the rest unpaired)
    mode: str = "unpaired"
    #: why this mode: "paired: 4 variants re-timed interleaved ..." / "unpaired: blessed artifacts ..."
    mode_reason: str = ""
    #: variant -> how its latency was judged ("paired: ..." or "unpaired: <why not paired>")
    pairing: dict[str, str] = field(default_factory=dict)
    #: the recorded runs' latency rows of every paired variant (canary-adjusted), reported beside
    #: the paired ones: re-timing both artifacts here cannot see an environment that makes the
    #: candidate's *recorded* run slower (a runtime, a thread setting, a dependency), these can;
    #: a gating REGRESSION among them fails the gate too (``harness.gate.retime``)
    recorded: list[Row] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 when a non-advisory metric regressed (paired or recorded), or nothing / not everything
        was compared (:class:`~harness.core.compared.Compared`); INCONCLUSIVE never fails a build."""
        return 1 if self.gating() or self.compared.failed else 0

    def gating(self) -> list[Row]:
        """Every gating REGRESSION: the judged rows', then the recorded rows' beside paired ones."""
        return [r for r in (*self.rows, *self.recorded) if r.gating_regression]

    def counts(self) -> dict[str, int]:
        out = {v.value: 0 for v in Verdict}
        for row in self.rows:
            out[row.verdict.value] += 1
        return out

    def headline(self) -> str:
        gating = len(self.gating())
        advisory = sum(r.advisory for r in self.rows)
        tally = ", ".join(f"{n} {v.lower()}" for v, n in self.counts().items() if n) or "nothing compared"
        rows = f"{len(self.rows)} rows ({advisory} advisory): {tally}"
        recorded = sum(r.gating_regression for r in self.recorded)
        if recorded:
            rows += f"; {recorded} in the recorded runs beside the paired re-timing"
        return self.compared.headline(f"OK: no gating regression; {rows}",
                                      f"FAIL: {gating} gating regression(s); {rows}" if gating else None)

    @property
    def compared(self) -> Compared:
        """What was compared: zero rows, or baseline variants/metrics missing, fail the gate."""
        return Compared("perf rows", len(self.rows), tuple(self.missing), self.allow_missing,
                        self.coverage_gated)

    def notes(self) -> list[str]:
        out: list[str] = [self.mode_reason] if self.mode_reason else []
        if self.env_differences:
            prefix = "environment forced despite differences" if self.forced_env else "environment differs"
            out.append(f"{prefix}: " + "; ".join(self.env_differences))
        if self.missing:
            out.append("missing in candidate: " + ", ".join(self.missing))
        if self.new:
            out.append("new in candidate (no baseline): " + ", ".join(self.new))
        drifted = [v for v, d in self.drift.items() if d.get("drifted")]
        if drifted:
            whose = "their recorded latency" if self.recorded else "their latency"
            out.append(f"machine drift (canary) for {len(drifted)} variant(s), {whose} INCONCLUSIVE unless beyond it: "
                       + "; ".join(f"{v}: {self.drift[v]['reason']}" for v in drifted[:3]))
        elif self.drift and self.mode != "paired":
            spreads = [d["between_sd"] for d in self.drift.values()]
            out.append(f"unpaired: between-run spread {min(spreads):.1%}-{max(spreads):.1%} (canary) added to every "
                       "latency interval")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": "harness.perf-compare/1",
            "exit_code": self.exit_code,
            "headline": self.headline(),
            "counts": self.counts(),
            "rows": [r.as_dict() for r in self.rows],
            "missing": list(self.missing),
            "new": list(self.new),
            "env_differences": list(self.env_differences),
            "forced_env": self.forced_env,
            "compared": self.compared.as_dict(),
            "mode": self.mode,
            "mode_reason": self.mode_reason,
            "pairing": dict(self.pairing),
            "drift": dict(self.drift),
            "recorded_rows": [r.as_dict() for r in self.recorded],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent)

    def to_markdown(self) -> str:
        lines = [f"**{self.headline()}**", ""]
        lines += [f"- {note}" for note in self.notes()]
        if self.notes():
            lines.append("")
        rows = [_markdown_row(r) for r in gating_first(self.rows)]
        lines += table(["variant", "metric", "baseline", "candidate", "change", "95% CI", "p", "verdict", "reason"],
                       rows, align="llrrrlrll")
        if self.recorded:
            lines += ["", f"**{RECORDED_TITLE}**", ""]
            lines += table(["variant", "metric", "baseline", "candidate", "change", "95% CI", "p", "verdict", "reason"],
                           [_markdown_row(r) for r in gating_first(self.recorded)], align="llrrrlrll")
        return "\n".join(lines) + "\n"

    def render_table(self, console: "Console") -> None:
        from rich.markup import escape

        console.print(_rich_table("performance vs baseline", self.rows))
        if self.recorded:
            console.print(_rich_table(RECORDED_TITLE, self.recorded))
        for note in self.notes():
            console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
        colour = "red" if self.exit_code else "green"
        console.print(f"[bold {colour}]{self.headline()}[/]", highlight=False)


#: the title of the recorded rows' table beside a paired comparison
RECORDED_TITLE = "recorded runs beside the paired re-timing (canary-adjusted; sees the candidate's environment)"


def _markdown_row(r: Row) -> list[str]:
    verdict = f"{r.verdict.value} (advisory)" if r.advisory else r.verdict.value
    if r.gating_regression:
        verdict = f"**{verdict}**"
    return [r.variant, r.metric, fmt_value(r.base, r.kind), fmt_value(r.cand, r.kind), fmt_change(r.ratio),
            fmt_ci(r.ci_lo, r.ci_hi), fmt_p(r.p_value), verdict, r.reason]


def _rich_table(title: str, rows: list[Row]) -> "Table":
    from rich.table import Table
    from rich.text import Text

    styles = {Verdict.PASS: "green", Verdict.IMPROVEMENT: "cyan",
              Verdict.INCONCLUSIVE: "yellow", Verdict.REGRESSION: "bold red"}
    table = Table(title=title, show_lines=False)
    for header, justify in (("variant", "left"), ("metric", "left"), ("baseline", "right"), ("candidate", "right"),
                            ("change", "right"), ("95% CI", "left"), ("p", "right"), ("verdict", "left"), ("reason", "left")):
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    for r in gating_first(rows):
        style = "dim" if r.advisory and r.verdict is not Verdict.REGRESSION else styles[r.verdict]
        verdict = Text(f"{r.verdict.value}{' (adv)' if r.advisory else ''}", style=style)
        # Text, not markup: names like "latency_ms[bs=8]" would otherwise be eaten as style tags.
        cells = [r.variant, r.metric, fmt_value(r.base, r.kind), fmt_value(r.cand, r.kind), fmt_change(r.ratio),
                 fmt_ci(r.ci_lo, r.ci_hi), fmt_p(r.p_value)]
        table.add_row(*(Text(c) for c in cells), verdict, Text(r.reason))
    return table


def gating_first(rows: list[Row]) -> list[Row]:
    """Gating regressions first, so the reason a build failed is the first thing read."""
    return sorted(rows, key=lambda r: (not r.gating_regression, r.variant))  # stable: keeps p50, p90, ... order


def fmt_value(value: float, kind: str) -> str:
    """A gated number in its unit (bytes for memory and size, else milliseconds) through the
    reports' one formatter per unit (``harness.core.units``)."""
    if value is None or not math.isfinite(value):
        return "-"
    from harness.core.units import value_text

    return value_text(value, "bytes" if kind in ("memory", "size") else "ms")


def fmt_change(ratio: float) -> str:
    return "-" if ratio is None or not math.isfinite(ratio) else f"{(ratio - 1) * 100:+.1f}%"


def fmt_ci(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return "-"
    return f"[{(lo - 1) * 100:+.1f}%, {(hi - 1) * 100:+.1f}%]"


def fmt_p(p: float | None) -> str:
    if p is None:
        return "-"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.0e}"


# --------------------------------------------------------------------------- judging


def outlier_fraction(samples: np.ndarray) -> float:
    """Share of calls slower than OUTLIER_FACTOR x the median.

    A percentile above which at least half the calls are outliers is set by whatever
    interrupted the process, not by the model, and differs from run to run
    (measured p95 ratios of 0.4-4.8 between identical runs), so it is not judged.
    """
    if samples.size == 0:
        return 0.0
    return float(np.mean(samples > OUTLIER_FACTOR * np.median(samples)))


class Judged(NamedTuple):
    """One latency statistic's numbers and verdict, before it becomes a Row."""

    base: float
    cand: float
    ratio: float
    ci_lo: float | None
    ci_hi: float | None
    p_value: float | None
    verdict: Verdict
    reason: str


def judge_latency(
    base: np.ndarray, cand: np.ndarray, policies: Mapping[str, MetricPolicy], *, seed: int = 0,
    drift: "Drift | None" = None,
) -> dict[str, Judged]:
    """Judge every latency statistic that has a policy, from both runs' raw samples.

    Too few calls make it INCONCLUSIVE (the interval and the p-value are still reported).
    ``drift`` (``harness.gate.canary``, unpaired runs) adds the between-run spread to every
    interval and p-value, and a run noisier than ``max_cv`` adds its noise (:func:`noise_sd`):
    noise and drift widen the interval, and a drifted machine or a noisy run leaves only a claim
    that clears the threshold beyond them standing (``_beyond_drift``, ``_beyond_noise``); a
    percentile among outliers is INCONCLUSIVE (:func:`_disturbed`). Why not a veto: a
    runtime 30 % slower in the candidate's environment read "too noisy: block-median CV 30.7 % >
    10 %" for p50 +29.4 % [+28.3 %, +42.2 %], p = 7e-08.
    """
    stats = {name: latency_stat(name) for name, pol in policies.items() if pol.kind == "latency"}
    wanted: dict[str, Stat] = {name: stat for name, stat in stats.items() if stat is not None}
    if not wanted:
        return {}
    n = min(base.size, cand.size)
    alpha = min(policies[name].alpha for name in wanted)
    cis: dict[str, tuple[float, float, float]] = {}
    p_value: float | None = None
    if n >= 2:
        p_value = mann_whitney(base, cand)
        try:
            cis = bootstrap_ratio_cis(base, cand, wanted, alpha=alpha, seed=seed)
        except ValueError:  # a zero baseline statistic (coarse clock): no ratio to bound
            cis = {}
    noise = max(block_cv(base), block_cv(cand)) if n >= 2 * MIN_BLOCK_SIZE else float("nan")
    outliers = (outlier_fraction(base), outlier_fraction(cand))
    out: dict[str, Judged] = {}
    for name, stat in wanted.items():
        pol = policies[name]
        b_val = float(np.percentile(base, stat)) if not callable(stat) else float(stat(base))
        c_val = float(np.percentile(cand, stat)) if not callable(stat) else float(stat(cand))
        ratio, lo, hi = cis.get(name, (c_val / b_val if b_val > 0 else float("nan"), None, None))
        need = MIN_LATENCY_SAMPLES
        if not callable(stat):
            need = max(need, min_samples_for(stat / 100.0))
        if n < need:
            verdict, reason = Verdict.INCONCLUSIVE, f"too few samples: {n} < {need} needed for {name}"
        elif lo is None or hi is None:
            verdict, reason = Verdict.INCONCLUSIVE, f"no ratio: baseline {name} is {b_val:g}"
        else:
            p_row = p_value if p_value is not None else 1.0
            if drift is not None:
                lo, hi, p_row = widen(ratio, lo, hi, p_row, drift.between_sd)
            noisy, among_outliers = _disturbed(name, stat, pol, noise, outliers)
            if noisy:  # noise widens the interval; it vetoes nothing the widened interval still shows
                lo, hi, p_row = widen(ratio, lo, hi, p_row, noise_sd(base, cand))
            verdict, reason = decide(ratio, lo, hi, p_row, pol)
            verdict, reason = _beyond_drift(verdict, reason, lo, hi, pol, drift)
            if noisy:
                verdict, reason = _beyond_noise(verdict, reason, lo, hi, noisy, pol)
            if among_outliers:  # a percentile the preemptions set says nothing of the model, however far
                verdict, reason = Verdict.INCONCLUSIVE, noisy or among_outliers
            out[name] = Judged(b_val, c_val, ratio, lo, hi, p_row, verdict, reason)
            continue
        out[name] = Judged(b_val, c_val, ratio, lo, hi, p_value, verdict, reason)
    return out


def _disturbed(name: str, stat: Stat, pol: MetricPolicy, noise: float,
               outliers: tuple[float, float]) -> tuple[str, str]:
    """Why the runs are too disturbed to judge ``name`` at face value ("" for no): a side noisier
    than ``max_cv`` (widens the interval: :func:`_beyond_noise`), and the percentile among the
    outliers -- at least ``(1 - p) / 2`` of a side's calls slower than 1.5x its median: then
    preemptions set it, not the model (a veto)."""
    noisy = f"too noisy: block-median CV {noise:.1%} > {pol.max_cv:.0%}" if math.isfinite(noise) and \
        noise > pol.max_cv else ""
    among = ""
    if not callable(stat) and max(outliers) >= (1.0 - stat / 100.0) / 2:
        side = "baseline" if outliers[0] >= outliers[1] else "candidate"
        among = (f"{name} sits among outliers: {max(outliers):.1%} of {side} calls > {OUTLIER_FACTOR}x median "
                 f"(limit {(1.0 - stat / 100.0) / 2:.1%})")
    return noisy, among


def noise_sd(base: np.ndarray, cand: np.ndarray) -> float:
    """The log-scale standard error a noisy run adds to a latency ratio: each run's typical speed
    is known to its block-median CV over the square root of its blocks (``DEFAULT_BLOCKS``), the
    two sides in quadrature. Added only when a side is noisier than the metric's ``max_cv``."""
    return math.hypot(block_cv(base), block_cv(cand)) / math.sqrt(DEFAULT_BLOCKS)


def _beyond_noise(verdict: Verdict, reason: str, lo: float, hi: float, noisy: str,
                  pol: MetricPolicy) -> tuple[Verdict, str]:
    """A noisy comparison keeps a REGRESSION whose interval, widened by the noise, lies far beyond
    the threshold -- its lower bound at least :data:`NOISY_MARGIN` thresholds up (the reason says
    so); anything else is INCONCLUSIVE "too noisy", as before. Why a margin: the noise estimate
    itself is rough (20 block medians of a wandering machine), so a claim made through it must not
    hinge on it; a +25 % change under 30 % block noise (lower bound +8 %) stays INCONCLUSIVE, a
    runtime 30 % slower (lower bound +12 %) does not."""
    if verdict is Verdict.REGRESSION and lo >= 1.0 + NOISY_MARGIN * pol.min_effect:
        return verdict, f"{reason}; {noisy.removeprefix('too ')}: interval widened to {fmt_ci(lo, hi)}, still " \
                        f"beyond {NOISY_MARGIN:g}x the threshold"
    if reason.startswith("machine drift"):  # both stood in the way: say both
        return Verdict.INCONCLUSIVE, f"{noisy}; {reason}"
    return Verdict.INCONCLUSIVE, noisy


def _beyond_drift(verdict: Verdict, reason: str, lo: float, hi: float, pol: MetricPolicy,
                  drift: "Drift | None") -> tuple[Verdict, str]:
    """Machine drift between the runs (the canaries moved) leaves a claim standing only when the
    model moved by the threshold beyond the drift: a REGRESSION whose lower bound clears
    ``(1 + min_effect)`` times the canary's upper bound (the machine ran slower for the candidate
    by at most that), an IMPROVEMENT mirrored. Otherwise INCONCLUSIVE, with the drift as reason."""
    if drift is None or not drift.drifted or drift.lo is None or drift.hi is None:
        return verdict, reason
    thr = pol.min_effect
    if verdict is Verdict.REGRESSION and lo >= (1.0 + thr) * max(1.0, drift.hi):
        return verdict, f"{reason}; beyond the {drift.reason}"
    if verdict is Verdict.IMPROVEMENT and hi <= (1.0 - thr) * min(1.0, drift.lo):
        return verdict, f"{reason}; beyond the {drift.reason}"
    return Verdict.INCONCLUSIVE, drift.reason


def tail_advisory(policy: MetricPolicy, base: np.ndarray, cand: np.ndarray, reason: str) -> tuple[bool, str]:
    """Whether a latency row is advisory, and its reason saying why for a ``gate_when_precise``
    percentile: it gates only when both runs bound it within the threshold."""
    stat = latency_stat(policy.name)
    if not (policy.advisory and policy.gate_when_precise) or callable(stat) or stat is None:
        return policy.advisory, reason
    checks = [(side, *precise_enough(samples, policy.min_effect, q=stat / 100.0))
              for side, samples in (("baseline", base), ("candidate", cand))]
    loose = [f"{side}: {why}" for side, ok, why in checks if not ok]
    if loose:
        return True, f"{reason}; advisory ({'; '.join(loose)})"
    return False, f"{reason}; gated ({checks[0][2]} and {checks[1][2]})"


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


def judge_scalar(base: float, cand: float, policy: MetricPolicy) -> tuple[Verdict, str]:
    """Single numbers (RSS, file size, cold start) carry no noise estimate: effect thresholds only."""
    delta = cand - base
    rel = delta / base if base > 0 else (math.inf if delta > 0 else -math.inf if delta < 0 else 0.0)
    floor = f" and >= {fmt_value(policy.min_abs, policy.kind)}" if policy.min_abs else ""
    change = f"{rel * 100:+.1f}% ({'+' if delta >= 0 else '-'}{fmt_value(abs(delta), policy.kind)})"
    if rel >= policy.min_effect and delta >= policy.min_abs and delta > 0:
        return Verdict.REGRESSION, f"{change} >= +{policy.min_effect:.0%}{floor}"
    if -rel >= policy.min_effect and -delta >= policy.min_abs and delta < 0:
        return Verdict.IMPROVEMENT, change
    return Verdict.PASS, f"{change} within +{policy.min_effect:.0%}{floor}"


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class RunPerf:
    """The comparable numbers of one run: (variant, key) -> samples (latency) or a scalar.

    ``envs`` holds each variant's environment (its first perf record's ``env``).
    """

    latency: dict[tuple[str, str], np.ndarray]
    scalars: dict[tuple[str, str], float]
    envs: dict[str, dict[str, Any]]
    #: variant -> its canary samples (``harness.perf.canary``), every record's concatenated
    canaries: dict[str, np.ndarray] = field(default_factory=dict)
    #: (variant, key) -> the latency entry's ``contention`` (harness.perf.contention), where recorded
    contention: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    #: (variant, key) -> the version of the timing loop that took the samples (the entry's
    #: ``loop.version``, ``harness.perf.measure.LOOP``); absent for records older than the field
    loops: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def variants(self) -> set[str]:
        return {v for v, _ in self.latency} | {v for v, _ in self.scalars}


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, sub in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), sub, out)
    else:
        out[prefix] = value



def _latency_entry(value: Any) -> tuple[np.ndarray | None, Mapping[str, Any] | None, int | None]:
    """A latency entry's finite samples (None when it has none), its ``contention`` and its
    timing loop's version, where recorded."""
    samples = value.get("samples") if isinstance(value, Mapping) else None
    if not (isinstance(samples, list) and samples):
        return None, None, None
    arr = np.asarray([s for s in samples if isinstance(s, (int, float))], dtype=float)
    arr = arr[np.isfinite(arr)]
    machine = value.get("contention")
    loop = value.get("loop")
    version = loop.get("version") if isinstance(loop, Mapping) else None
    return ((arr if arr.size else None), (machine if isinstance(machine, Mapping) else None),
            version if isinstance(version, int) and not isinstance(version, bool) else None)


def collect(records: Iterable[RecordLike], scalar_names: Iterable[str]) -> RunPerf:
    """Pull latency samples and known scalars out of result records, tolerantly.

    Records without a ``perf`` dict are skipped and unknown fields ignored, so older
    and newer result files both load. When two tests of the same variant report the
    same key, both are qualified with their test name so neither overwrites the other.
    """
    scalar_names = set(scalar_names)
    from harness.gate.canary import canary_samples

    found: list[tuple[str, str, str, Any]] = []  # (variant, test, key, value)
    envs: dict[str, dict[str, Any]] = {}
    canaries: dict[str, list[np.ndarray]] = {}
    machines: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    loop_versions: dict[tuple[str, str, str], int] = {}
    for rec in readable_records(records):
        perf = rec.perf
        if not perf:
            continue
        variant = rec.variant or rec.id or "?"
        test = rec.id.split("[", 1)[0] or "?"
        if variant not in envs and rec.env:
            envs[variant] = dict(rec.env)
        canary = canary_samples(perf)
        if canary is not None:
            canaries.setdefault(variant, []).append(canary)
        for key, value in perf.items():
            if key == "canary_ms":
                continue
            if str(key).startswith("latency_ms"):
                arr, machine, version = _latency_entry(value)
                if arr is not None:
                    found.append((variant, test, str(key), arr))
                    if machine is not None:
                        machines[(variant, test, str(key))] = machine
                    if version is not None:
                        loop_versions[(variant, test, str(key))] = version
                continue
            flat: dict[str, Any] = {}
            _flatten(str(key), value, flat)
            for name, scalar in flat.items():
                numeric = isinstance(scalar, (int, float)) and not isinstance(scalar, bool)
                if name in scalar_names and numeric and math.isfinite(scalar):
                    found.append((variant, test, name, float(scalar)))

    contexts = {where: (machines.get(where), loop_versions.get(where)) for where in machines.keys() | loop_versions}
    return _by_name(found, contexts, envs, {v: np.concatenate(c) for v, c in canaries.items()})


def _by_name(found: list[tuple[str, str, str, Any]],
             contexts: Mapping[tuple[str, str, str], tuple[Mapping[str, Any] | None, int | None]],
             envs: dict[str, dict[str, Any]], canaries: dict[str, np.ndarray]) -> RunPerf:
    """The collected values keyed by (variant, metric name): a key two tests of one variant both
    report is qualified with the test's name; each latency key keeps its contention and loop version."""
    tests_per_key: dict[tuple[str, str], set[str]] = {}
    for variant, test, key, _ in found:
        tests_per_key.setdefault((variant, key), set()).add(test)
    latency: dict[tuple[str, str], np.ndarray] = {}
    scalars: dict[tuple[str, str], float] = {}
    contention: dict[tuple[str, str], Mapping[str, Any]] = {}
    loops: dict[tuple[str, str], int] = {}
    for variant, test, key, value in found:
        name = key if len(tests_per_key[(variant, key)]) == 1 else f"{test}:{key}"
        (latency if isinstance(value, np.ndarray) else scalars)[(variant, name)] = value
        machine, version = contexts.get((variant, test, key), (None, None))
        if machine is not None:
            contention[(variant, name)] = machine
        if version is not None:
            loops[(variant, name)] = version
    return RunPerf(latency, scalars, envs, canaries, contention, loops)


def loop_note(base: int | None, cand: int | None) -> str | None:
    """A clause for a latency verdict whose two sides were timed by different versions of the
    harness's timing loop (``harness.perf.measure.LOOP``), else None. Versions differ in what the
    loop does around the calls (version 2 collected the heap before timing: a colder start, so a
    higher p99), so a change between them can be the harness's, not the model's. It informs, it
    does not judge; an entry with no recorded version counts as the loop before the field."""
    if base == cand:
        return None

    def said(version: int | None) -> str:
        return "a loop older than version 2" if version is None else f"version {version}"

    return f"timed by different timing loops (baseline: {said(base)}, candidate: {said(cand)}; docs/performance.md)"


def env_differences(base: Mapping[str, Any], cand: Mapping[str, Any]) -> list[str]:
    """Human-readable reasons two environments' timings are not comparable; [] when they are.

    Different fingerprints (machine, OS, library versions) list every differing
    field. Thread settings are not part of the fingerprint but change latency as much
    as a different CPU does, so they are compared even when the fingerprints agree.
    """
    flat_b: dict[str, Any] = {}
    flat_c: dict[str, Any] = {}
    _flatten("", {k: v for k, v in base.items() if k != "fingerprint"}, flat_b)
    _flatten("", {k: v for k, v in cand.items() if k != "fingerprint"}, flat_c)
    fp_b, fp_c = base.get("fingerprint"), cand.get("fingerprint")
    same_machine = fp_b == fp_c
    keys = sorted(set(flat_b) | set(flat_c))
    if same_machine:
        keys = [k for k in keys if k.startswith("threads.")]
    diffs = [f"{k}: {flat_b.get(k, '<absent>')} -> {flat_c.get(k, '<absent>')}" for k in keys if flat_b.get(k) != flat_c.get(k)]
    if not same_machine and not diffs:
        diffs = [f"fingerprint: {fp_b or '<absent>'} -> {fp_c or '<absent>'}"]
    return diffs


def run_env_differences(base: RunPerf, cand: RunPerf) -> list[str]:
    """Environment differences over the variants both runs have (each against its own twin)."""
    shared = sorted(set(base.envs) & set(cand.envs))
    pairs = [(base.envs[v], cand.envs[v]) for v in shared]
    if not pairs and base.envs and cand.envs:  # nothing in common: compare any two
        pairs = [(next(iter(base.envs.values())), next(iter(cand.envs.values())))]
    out: list[str] = []
    for b, c in pairs:
        out += [d for d in env_differences(b, c) if d not in out]
    return out


def _seed(variant: str, metric: str) -> int:
    """Stable per-metric bootstrap seed: the same inputs always give the same report."""
    return zlib.crc32(f"{variant}\0{metric}".encode())


def compare_runs(
    baseline_records: Iterable[RecordLike],
    candidate_records: Iterable[RecordLike],
    policies: Mapping[str, MetricPolicy] | Iterable[MetricPolicy] | None = None,
    force_env: bool = False,
) -> Comparison:
    """Judge every (variant, metric) present on both sides.

    Raises EnvironmentMismatch when the env fingerprints or thread settings differ,
    unless ``force_env``.
    """
    pols = merge_policies(policies)
    scalar_names = [name for name, p in pols.items() if p.kind != "latency"]
    base = collect(baseline_records, scalar_names)
    cand = collect(candidate_records, scalar_names)

    diffs = run_env_differences(base, cand)
    if diffs and not force_env:
        raise EnvironmentMismatch(diffs)

    from harness.gate.canary import judge_drift

    rows: list[Row] = []
    drifts: dict[str, Drift] = {}
    for (variant, key), b_samples in sorted(base.latency.items()):
        c_samples = cand.latency.get((variant, key))
        if c_samples is None:
            continue
        if variant not in drifts:
            drifts[variant] = judge_drift(base.canaries.get(variant), cand.canaries.get(variant),
                                          seed=_seed(variant, "canary_ms"))
        judged = judge_latency(b_samples, c_samples, pols, seed=_seed(variant, key), drift=drifts[variant])
        for name, j in judged.items():
            advisory, reason = tail_advisory(pols[name], b_samples, c_samples, j.reason)
            if j.verdict is Verdict.REGRESSION:
                note = busier_note(base.contention.get((variant, key)), cand.contention.get((variant, key)))
                reason = f"{reason}; {note}" if note else reason
            if j.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
                note = loop_note(base.loops.get((variant, key)), cand.loops.get((variant, key)))
                reason = f"{reason}; {note}" if note else reason
            rows.append(Row(variant, f"{key}.{name}", "latency", j.base, j.cand, j.ratio, j.ci_lo, j.ci_hi,
                            j.p_value, j.verdict, reason, advisory))
    for (variant, key), b_val in sorted(base.scalars.items()):
        c_val = cand.scalars.get((variant, key))
        if c_val is None:
            continue
        pol = pols[key.rsplit(":", 1)[-1]]
        verdict, reason = judge_scalar(b_val, c_val, pol)
        ratio = c_val / b_val if b_val > 0 else float("nan")
        rows.append(Row(variant, key, pol.kind, b_val, c_val, ratio, None, None, None, verdict, reason, pol.advisory))

    missing_variants = sorted(base.variants - cand.variants)
    new_variants = sorted(cand.variants - base.variants)
    shared = base.variants & cand.variants
    base_keys = set(base.latency) | set(base.scalars)
    cand_keys = set(cand.latency) | set(cand.scalars)
    missing = missing_variants + [f"{v} {k}" for v, k in sorted(base_keys - cand_keys) if v in shared]
    new = new_variants + [f"{v} {k}" for v, k in sorted(cand_keys - base_keys) if v in shared]
    return Comparison(rows, missing, new, diffs, forced_env=bool(diffs) and force_env,
                      drift={v: d.as_dict() for v, d in sorted(drifts.items())})

