"""The perf gate's one policy table: for each kind of evidence, which test, which threshold, how
noise widens the interval, and when the answer is INCONCLUSIVE.

Every way of deciding "slower" -- ``baseline compare`` on recorded runs, the canary adjustment,
``--perf`` and ``perf-compare`` (paired), ``--env-a/--env-b``, single numbers --
builds an :class:`~harness.gate.evidence.Evidence` and hands it to ``harness.gate.judge.judge``,
which reads its constants from the row of its kind here. docs/perf-gate.md's policy table is
rendered from :data:`POLICY` (``scripts/render_metric_docs.py``), and a test keeps the two equal.

The shared decision (``harness.gate.judge.decide``): REGRESSION needs p < alpha *and* the whole
interval at or beyond the metric's threshold (``min_effect``, from the metric registry); PASS needs
the interval to rule the threshold out; anything between is INCONCLUSIVE.

A budget is not a comparison: a measured number against the limit a model declares, with no
baseline, threshold or noise. Its one rule is ``harness.perf.budgets.BudgetCheck.passed`` (the
budget's direction; a NaN never passes), read by the suites, the engine's sources, the served
sweep and ``harness repro`` alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.markdown import table
from harness.gate.changepoints import MIN_RELATIVE, MIN_SIZE
from harness.gate.evidence import EvidenceKind


@dataclass(frozen=True)
class Rule:
    """How one kind of evidence is judged (module docstring)."""

    kind: EvidenceKind
    #: where the evidence comes from
    source: str
    #: the significance test
    test: str
    #: what the interval is of, and how it is computed
    interval: str
    #: fewer units than this on a side (calls, pairs, judged units): INCONCLUSIVE
    min_units: int
    #: how noise and drift widen the interval
    noise: str
    #: a noisy comparison keeps a REGRESSION only with its widened lower bound this many thresholds
    #: up (0: noise is all inside the interval, no margin)
    noise_margin: float
    #: the least between-run standard deviation (log ratio) added to every interval: two runs on
    #: one machine differ by this much for no reason of the model's (0: none, both sides in one session)
    between_sd: float
    #: when the answer is INCONCLUSIVE beyond the shared rule
    inconclusive: str


#: fewer calls than this on either side of two runs: every latency statistic is INCONCLUSIVE
#: (8 blocks of 5 calls is the least that gives the rank test any power)
MIN_LATENCY_SAMPLES = 40
#: fewer pairs (or process pairs) than this cannot reach significance with the signed-rank test at alpha 0.01
MIN_PAIRS = 8
#: fewer canary-adjusted segments than this on a side: the record-level canary rule instead
MIN_SEGMENTS = 8
#: A call slower than this multiple of its run's median is an *outlier*: on a shared machine mostly
#: a preemption by a neighbour (measured: 3-11 % of calls on the 2-core dev box, at 1.5x-30x the
#: median), not the model.
OUTLIER_FACTOR = 1.5
#: fewer stored runs than this in a series: no trend verdict (a change point needs a level of
#: ``changepoints.MIN_SIZE`` runs on each side of it)
SERIES_MIN_RUNS = 2 * MIN_SIZE
#: a change point fails the gate while its new level is at most this many runs old (a week of
#: nightlies); after that the level is the series' own, and a later run is judged against it
#: (without the limit, one accepted regression would keep every later night red)
RECENT_RUNS = 7

POLICY: dict[EvidenceKind, Rule] = {rule.kind: rule for rule in (
    Rule(EvidenceKind.TWO_RUNS,
         source="two recorded runs' per-call samples (`baseline compare`, multi-run baselines, the recorded "
                "rows beside `--perf`)",
         test="canary-adjusted: Mann-Whitney U on the per-segment log(statistic / canary median); "
              "else Mann-Whitney U on block medians",
         interval="canary-adjusted: bootstrap of segments of the difference of the two runs' median adjusted "
                  "log ratios; else block bootstrap of the statistic's ratio",
         min_units=MIN_LATENCY_SAMPLES,
         noise="the between-run spread (canary ratio and its error, at least `between_sd`) added in quadrature; "
               "canary-adjusted: the segments' own spread is the noise; else a side noisier than `max_cv` adds "
               "its block-median spread",
         noise_margin=2.0,
         between_sd=0.015,
         inconclusive="too few calls (p95 needs 200); a percentile among outliers (at least (1 - p) / 2 of a "
                      "side's calls > 1.5x its median); without canary segments: machine drift (canary moved "
                      ">= 3 % beyond its noise) unless the claim clears the drift, and a noisy run unless the "
                      "widened lower bound is `noise_margin` thresholds up"),
    Rule(EvidenceKind.PAIRED,
         source="blocks of both sides timed alternately in one session (`perf-compare`, `baseline compare "
                "--perf`) or by pairs of processes (`--env-a/--env-b`, `--baseline-env`)",
         test="Wilcoxon signed-rank on per-pair log ratios of the block statistic (per process pair: the "
              "median of its pairs)",
         interval="bootstrap of pairs (process pairs) of the median log ratio",
         min_units=MIN_PAIRS,
         noise="none added: drift hits both sides of every pair alike and cancels in the ratio",
         noise_margin=0.0,
         between_sd=0.0,
         inconclusive=f"fewer than {MIN_PAIRS} pairs (process pairs)"),
    Rule(EvidenceKind.SINGLE,
         source="one number per side (peak memory, artifact size, cold start)",
         test="none: no noise estimate",
         interval="none",
         min_units=1,
         noise="none: the threshold (`min_effect`) and an absolute floor (`min_abs`) only",
         noise_margin=0.0,
         between_sd=0.0,
         inconclusive="never: REGRESSION at or beyond both thresholds, else PASS (or IMPROVEMENT)"),
    Rule(EvidenceKind.SERIES,
         source="one number per stored nightly run of a variant's metric (`harness history changes`)",
         test=f"change points: PELT (L2 cost, penalty 2 sigma^2 log n) over the series; a level that held "
              f"{MIN_SIZE} runs and moved by 3 sigma and by the threshold (the metric's policy, with its "
              f"absolute floor, else {MIN_RELATIVE:.0%}); it gates while at most {RECENT_RUNS} runs old",
         interval="none; the band of the current level's earlier runs (median +- 3 scaled MADs) for the newest run",
         min_units=SERIES_MIN_RUNS,
         noise="sigma from the series' successive differences (a shift does not hide itself), or the spread "
               "around the segments' own medians where that is larger",
         noise_margin=0.0,
         between_sd=0.0,
         inconclusive=f"a newest run outside its band and beyond the threshold that has not held for {MIN_SIZE} "
                      f"runs yet; a metric whose better direction is unknown"),
)}


def rule(kind: EvidenceKind) -> Rule:
    return POLICY[kind]


def markdown() -> list[str]:
    """The policy table as docs/perf-gate.md prints it (rendered, never hand-edited)."""
    rows = []
    for r in POLICY.values():
        noise = r.noise
        if r.noise_margin:
            noise += f"; `noise_margin` {r.noise_margin:g}"
        if r.between_sd:
            noise += f"; `between_sd` {r.between_sd:.1%}"
        rows.append((f"`{r.kind.value}`", r.source, r.test, r.interval, noise,
                     f"fewer than {r.min_units} units; {r.inconclusive}"))
    return table(("evidence", "from", "test", "interval", "noise widens it", "INCONCLUSIVE when"), rows)
