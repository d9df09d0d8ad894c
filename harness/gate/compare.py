"""Compare a candidate run's performance with a baseline and decide, per metric.

A gate that cries wolf gets switched off, so a REGRESSION verdict needs two separate
things: *evidence* that the candidate is slower (rank test on block medians AND a
block-bootstrap interval of the ratio entirely above 1) and an *effect* big enough to
matter (the metric's ``min_effect``). When the data cannot support either a pass or a
regression (too few calls, a drifting machine, an interval straddling the threshold)
the answer is INCONCLUSIVE, never a guess. Only non-advisory REGRESSIONs fail the gate.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import numpy as np

from harness.core import UsageError, did_you_mean
from harness.core.compared import Compared
from harness.core.markdown import table
from harness.gate.canary import canary_samples, judge_drift
from harness.gate.evidence import CanaryBlocks, Evidence, EvidenceKind
from harness.gate.judge import decide as decide  # re-exported: the one decision rule
from harness.gate.judge import judge
from harness.gate.judge import latency_stat as latency_stat  # re-exported
from harness.gate.policy import MIN_LATENCY_SAMPLES as MIN_LATENCY_SAMPLES  # re-exported
from harness.gate.policy import OUTLIER_FACTOR as OUTLIER_FACTOR  # re-exported
from harness.gate.policy import POLICY
from harness.gate.processes import ProcessLevel, process_levels, process_spread
from harness.gate.row import Row as Row  # re-exported: the gate's API names it
from harness.gate.row import Verdict as Verdict  # re-exported
from harness.gate.row import fmt_change as fmt_change  # re-exported
from harness.gate.row import fmt_ci as fmt_ci  # re-exported
from harness.gate.row import fmt_p as fmt_p  # re-exported
from harness.gate.row import fmt_value as fmt_value  # re-exported
from harness.gate.row import unit_of as fmt_unit
from harness.metrics.registry import METRICS, Scope, perf_policies
from harness.metrics.spec import MetricPolicy as MetricPolicy  # re-exported: the gate's API names it
from harness.perf.contention import busier_note
from harness.perf.tail import precise_enough
from harness.results.record import RecordLike, readable_records

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console
    from rich.table import Table

    from harness.gate.canary import Drift

#: A run noisier than its metric's ``max_cv`` can still show a REGRESSION, when the interval
#: widened by the noise keeps its lower bound at least this many thresholds above no change
#: (the policy table's ``noise_margin`` of two recorded runs)
NOISY_MARGIN = POLICY[EvidenceKind.TWO_RUNS].noise_margin

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
        console.print(f"[bold {colour}]{escape(self.headline())}[/]", highlight=False)


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


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class EntryContext:
    """What a latency entry recorded beside its samples: the kernel's contention counters
    (harness.perf.contention), the timing loop's version (``loop.version``,
    ``harness.perf.loop.LOOP``; None for records older than the field) and the canary interleaved
    with its calls (``canary``, :class:`~harness.gate.evidence.CanaryBlocks`)."""

    contention: Mapping[str, Any] | None = None
    loop: int | None = None
    canary: CanaryBlocks | None = None

    @classmethod
    def read(cls, entry: Mapping[str, Any], samples: int) -> "EntryContext":
        machine = entry.get("contention")
        loop = entry.get("loop")
        version = loop.get("version") if isinstance(loop, Mapping) else None
        return cls(machine if isinstance(machine, Mapping) else None,
                   version if isinstance(version, int) and not isinstance(version, bool) else None,
                   CanaryBlocks.read(entry.get("canary"), samples))


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
    #: (variant, key) -> what the latency entry recorded beside its samples
    contexts: dict[tuple[str, str], EntryContext] = field(default_factory=dict)
    #: variant -> each fresh process its cold-start measurement ran (level, canary) (``harness.gate.processes``)
    processes: dict[str, list[ProcessLevel]] = field(default_factory=dict)

    @property
    def variants(self) -> set[str]:
        return {v for v, _ in self.latency} | {v for v, _ in self.scalars}

    def context(self, variant: str, key: str) -> EntryContext:
        return self.contexts.get((variant, key), EntryContext())


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, sub in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), sub, out)
    else:
        out[prefix] = value


def _latency_entry(value: Any) -> tuple[np.ndarray, EntryContext] | None:
    """A latency entry's samples (the finite ones, in call order) and its context; None without samples.
    A non-finite sample is dropped with the canary segmentation (its positions would no longer hold)."""
    samples = value.get("samples") if isinstance(value, Mapping) else None
    if not (isinstance(samples, list) and samples):
        return None
    arr = np.asarray([s for s in samples if isinstance(s, (int, float))], dtype=float)
    whole = arr.size == len(samples) and bool(np.all(np.isfinite(arr)))
    arr = arr[np.isfinite(arr)]
    if not arr.size:
        return None
    context = EntryContext.read(value, arr.size)
    return arr, (context if whole else replace(context, canary=None))


def collect(records: Iterable[RecordLike], scalar_names: Iterable[str]) -> RunPerf:
    """Pull latency samples and known scalars out of result records, tolerantly.

    Records without a ``perf`` dict are skipped and unknown fields ignored, so older
    and newer result files both load. When two tests of the same variant report the
    same key, both are qualified with their test name so neither overwrites the other.
    """
    scalar_names = set(scalar_names)

    found: list[tuple[str, str, str, Any]] = []  # (variant, test, key, value)
    envs: dict[str, dict[str, Any]] = {}
    canaries: dict[str, list[np.ndarray]] = {}
    contexts: dict[tuple[str, str, str], EntryContext] = {}
    processes: dict[str, list[ProcessLevel]] = {}
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
        processes.setdefault(variant, []).extend(process_levels(perf))
        for key, value in perf.items():
            if key == "canary_ms":
                continue
            if str(key).startswith("latency_ms"):
                entry = _latency_entry(value)
                if entry is not None:
                    found.append((variant, test, str(key), entry[0]))
                    contexts[(variant, test, str(key))] = entry[1]
                continue
            flat: dict[str, Any] = {}
            _flatten(str(key), value, flat)
            for name, scalar in flat.items():
                numeric = isinstance(scalar, (int, float)) and not isinstance(scalar, bool)
                if name in scalar_names and numeric and math.isfinite(scalar):
                    found.append((variant, test, name, float(scalar)))
    found_perf = _by_name(found, contexts, envs, {v: np.concatenate(c) for v, c in canaries.items()})
    return replace(found_perf, processes={v: levels for v, levels in processes.items() if levels})


def _by_name(found: list[tuple[str, str, str, Any]], contexts: Mapping[tuple[str, str, str], EntryContext],
             envs: dict[str, dict[str, Any]], canaries: dict[str, np.ndarray]) -> RunPerf:
    """The collected values keyed by (variant, metric name): a key two tests of one variant both
    report is qualified with the test's name; each latency key keeps its context."""
    tests_per_key: dict[tuple[str, str], set[str]] = {}
    for variant, test, key, _ in found:
        tests_per_key.setdefault((variant, key), set()).add(test)
    latency: dict[tuple[str, str], np.ndarray] = {}
    scalars: dict[tuple[str, str], float] = {}
    named: dict[tuple[str, str], EntryContext] = {}
    for variant, test, key, value in found:
        name = key if len(tests_per_key[(variant, key)]) == 1 else f"{test}:{key}"
        (latency if isinstance(value, np.ndarray) else scalars)[(variant, name)] = value
        if (variant, test, key) in contexts:
            named[(variant, name)] = contexts[(variant, test, key)]
    return RunPerf(latency, scalars, envs, canaries, named)


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


def _fingerprints(base: RunPerf, cand: RunPerf, variant: str) -> tuple[str, str]:
    return (str(base.envs.get(variant, {}).get("fingerprint", "")), str(cand.envs.get(variant, {}).get("fingerprint", "")))


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


    rows: list[Row] = []
    drifts: dict[str, Drift] = {}
    latency_stats = tuple(name for name, p in pols.items() if p.kind == "latency" and latency_stat(name) is not None)
    for (variant, key), b_samples in sorted(base.latency.items()):
        c_samples = cand.latency.get((variant, key))
        if c_samples is None:
            continue
        if variant not in drifts:
            drifts[variant] = judge_drift(base.canaries.get(variant), cand.canaries.get(variant),
                                          seed=_seed(variant, "canary_ms"))
        b_ctx, c_ctx = base.context(variant, key), cand.context(variant, key)
        segments = (b_ctx.canary, c_ctx.canary) if b_ctx.canary and c_ctx.canary else None
        evidence = Evidence(EvidenceKind.TWO_RUNS, variant, key, latency_stats, b_samples, c_samples,
                            drift=drifts[variant], canary=segments, seed=_seed(variant, key),
                            processes=process_spread(base.processes.get(variant, []), cand.processes.get(variant, [])),
                            fingerprints=_fingerprints(base, cand, variant))
        for judged in judge(evidence, pols):
            pol = pols[judged.stat]
            advisory, reason = tail_advisory(pol, b_samples, c_samples, judged.reason)
            if judged.verdict is Verdict.REGRESSION:
                note = busier_note(b_ctx.contention, c_ctx.contention)
                reason = f"{reason}; {note}" if note else reason
            if judged.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
                note = loop_note(b_ctx.loop, c_ctx.loop)
                reason = f"{reason}; {note}" if note else reason
            rows.append(replace(judged, reason=reason, advisory=advisory))
    for (variant, key), b_val in sorted(base.scalars.items()):
        c_val = cand.scalars.get((variant, key))
        if c_val is None:
            continue
        single = Evidence(EvidenceKind.SINGLE, variant, key, (key,), np.asarray([b_val]), np.asarray([c_val]),
                          unit=fmt_unit(pols[key.rsplit(":", 1)[-1]].kind),
                          fingerprints=_fingerprints(base, cand, variant))
        rows.extend(judge(single, pols))

    missing_variants = sorted(base.variants - cand.variants)
    new_variants = sorted(cand.variants - base.variants)
    shared = base.variants & cand.variants
    base_keys = set(base.latency) | set(base.scalars)
    cand_keys = set(cand.latency) | set(cand.scalars)
    missing = missing_variants + [f"{v} {k}" for v, k in sorted(base_keys - cand_keys) if v in shared]
    new = new_variants + [f"{v} {k}" for v, k in sorted(cand_keys - base_keys) if v in shared]
    return Comparison(rows, missing, new, diffs, forced_env=bool(diffs) and force_env,
                      drift={v: d.as_dict() for v, d in sorted(drifts.items())})

