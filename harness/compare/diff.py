"""Two runs side by side: verdict changes first, then accuracy metrics, then performance.

Accuracy is shown twice, for two questions: ``accuracy_deltas`` lists every number that moved
(what changed at all), and the accuracy gate (``harness.gate.accuracy.compare_accuracy``, the
same margins ``harness baseline compare`` applies) says which of those moves is a REGRESSION —
B judged against A as if A were the blessed baseline.
Performance goes through the statistical gate (``harness.gate.compare.compare_runs``) so a
"+4 % p50" is judged against the noise, not eyeballed; the environments are expected to differ
(that is usually the question: "what moved after upgrading onnxruntime?"), so the comparison is
forced and the differences are listed instead of refused.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from harness.core.compared import Compared
from harness.core.direction import Direction
from harness.gate.accuracy import compare_accuracy
from harness.gate.causes import Difference, run_differences
from harness.gate.compare import Comparison, compare_runs, env_differences
from harness.metrics.registry import METRICS
from harness.results import MetricKey, Record
from harness.results.reason import reason_line
from harness.results.record import FAILING
from harness.results.runheader import RunHeader
from harness.results.sections import SettingsSection

if TYPE_CHECKING:  # pragma: no cover
    from harness.gate.accuracy import AccuracyComparison
    from harness.metrics.margins import MarginTable

#: verdicts from best to worst: a change towards the end is a regression
RANK = {"pass": 0, "skip": 1, "not-run": 2, "fail": 3, "error": 4}


@dataclass(frozen=True)
class VerdictChange:
    """One row of the case table: a verdict that changed, a runtime setting that changed between
    the paired cases (``settings``: ``graph_optimization: all -> disabled``), or a case on one
    side only. ``case`` is B's id (A's for a gone case); ``case_a`` is A's when it differs."""

    case: str
    before: str | None  # None: the case is new in B
    after: str | None  # None: the case is gone in B
    reason: str = ""
    case_a: str | None = None
    settings: str = ""

    @property
    def worse(self) -> bool:
        """B fails where A did not: a verdict that got worse, or a new case that fails
        ("— -> fail" is a new failure, not neutral)."""
        if self.after is None or self.after not in FAILING:
            return False
        return self.before is None or RANK.get(self.after, 9) > RANK.get(self.before, 9)

    @property
    def verdict_changed(self) -> bool:
        return self.before is not None and self.after is not None and self.before != self.after


@dataclass(frozen=True)
class MetricDelta:
    case: str
    key: str
    before: float
    after: float
    direction: str  # "higher" / "lower" is better, "" unknown

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def relative(self) -> float:
        return self.delta / abs(self.before) if self.before not in (0.0,) and math.isfinite(self.before) else math.nan

    @property
    def change(self) -> str:
        """``better`` / ``worse`` by the metric's declared direction, else ``changed``."""
        if not self.direction or not (math.isfinite(self.before) and math.isfinite(self.after)):
            return "changed"
        return "worse" if Direction(self.direction).worse(self.after, self.before) else "better"


AccuracyJudge = Callable[[str, Mapping[str, float], Mapping[str, float]], list[MetricDelta]]


def _direction(key: str) -> str:
    spec = METRICS.get(MetricKey.parse(key).metric)
    if spec is None:
        return ""
    return spec.direction.value


def _same(a: float, b: float) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def accuracy_deltas(case: str, before: Mapping[str, float], after: Mapping[str, float]) -> list[MetricDelta]:
    """Every metric present in both with a different value (the seam: a judged comparison
    replaces this function and keeps the signature)."""
    out = []
    for key in sorted(set(before) & set(after)):
        a, b = before[key], after[key]
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or _same(float(a), float(b)):
            continue
        out.append(MetricDelta(case, key, float(a), float(b), _direction(key)))
    return out


def slot(record: Record) -> tuple[str, str, str, str] | None:
    """What a case is, apart from how it was run: test function x model x precision x provider.
    Two runs whose ids differ only by a runtime setting's suffix (``-opt_disabled``) pair by it."""
    if not (record.model and record.precision and record.provider):
        return None
    return (record.id.split("[", 1)[0], record.model, record.precision, record.provider)


def runtime_change(a: Record, b: Record) -> str:
    """The runtime settings that differ between two paired cases, ``name: A -> B``."""
    ra, rb = SettingsSection.of(a).runtime or {}, SettingsSection.of(b).runtime or {}
    return "; ".join(f"{k}: {ra.get(k, '—')} -> {rb.get(k, '—')}" for k in sorted(set(ra) | set(rb))
                     if ra.get(k) != rb.get(k))


def pair_cases(a: Mapping[str, Record], b: Mapping[str, Record]) -> list[tuple[Record, Record]]:
    """A's and B's cases paired: by exact id first, then the rest by :func:`slot` where exactly
    one case of each side is left in it (ambiguous slots stay unpaired: listed as gone and new)."""
    pairs = [(a[case], b[case]) for case in sorted(set(a) & set(b))]
    left_a: dict[tuple[str, str, str, str], list[Record]] = {}
    left_b: dict[tuple[str, str, str, str], list[Record]] = {}
    for side, into in ((a, left_a), (b, left_b)):
        other = b if side is a else a
        for case, record in side.items():
            key = slot(record)
            if case not in other and key is not None:
                into.setdefault(key, []).append(record)
    for key, records in sorted(left_a.items()):
        match = left_b.get(key, [])
        if len(records) == 1 and len(match) == 1:
            pairs.append((records[0], match[0]))
    return sorted(pairs, key=lambda p: p[1].id)


@dataclass
class RunComparison:
    name_a: str
    name_b: str
    verdicts: list[VerdictChange]
    accuracy: list[MetricDelta]
    perf: Comparison | None
    env: list[str] = field(default_factory=list)
    unchanged_cases: int = 0
    accuracy_gate: AccuracyComparison | None = None
    #: cases paired (by id or by model x precision x provider), and A's cases with no B
    paired: int = 0
    gone: list[str] = field(default_factory=list)
    allow_missing: bool = False
    #: tolerance, configuration, runtime-setting, version and environment differences, listed first
    differences: list[Difference] = field(default_factory=list)
    #: when, where and with what A and B ran (the page's header)
    headers: tuple[RunHeader, RunHeader] = (RunHeader(), RunHeader())

    @property
    def identical(self) -> bool:
        """Nothing differs: no verdict, no number, no tolerance, setting, version or environment."""
        return bool(self.paired) and not (self.verdicts or self.accuracy or self.differences)

    @property
    def compared(self) -> Compared:
        """Zero cases paired, or A's cases missing in B, is no comparison to pass."""
        return Compared("cases paired", self.paired, tuple(self.gone), self.allow_missing)

    @property
    def regressed(self) -> bool:
        """A case newly failing (new cases included), a gating perf regression, or an accuracy
        metric past its margin."""
        return (any(v.worse for v in self.verdicts) or bool(self.perf and self.perf.exit_code)
                or bool(self.accuracy_gate and self.accuracy_gate.exit_code))

    def exit_code(self, strict: bool) -> int:
        """1 when nothing / not everything was compared; with ``strict`` also on a regression."""
        return 1 if self.compared.failed or (strict and self.regressed) else 0

    def counts(self) -> dict[str, int]:
        """The banner's numbers, counted from the rows the tables show."""
        return {"rows": len(self.verdicts), "verdict": sum(v.verdict_changed for v in self.verdicts),
                "worse": sum(v.worse for v in self.verdicts), "settings": sum(bool(v.settings) for v in self.verdicts),
                "new": sum(v.before is None for v in self.verdicts), "gone": sum(v.after is None for v in self.verdicts)}

    def headline(self) -> str:
        n = self.counts()
        moved = len(self.accuracy)
        worse_metrics = sum(d.change == "worse" for d in self.accuracy)
        perf = self.perf.headline() if self.perf and self.perf.rows else "no perf measurements on both sides"
        gate = ""
        if self.accuracy_gate is not None and self.accuracy_gate.rows:
            counts = self.accuracy_gate.counts()
            gate = f", {counts.get('REGRESSION', 0)} past their margin"
        kinds = Counter(d.kind for d in self.differences)
        causes = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
        text = (f"{self.paired} case(s) paired; " + (f"differences: {causes}; " if causes else "") + f"{n['rows']} case row(s): "
                f"{n['verdict']} verdict change(s), "
                f"{n['worse']} worse (new failures included), {n['settings']} setting change(s), {n['new']} new, "
                f"{n['gone']} gone; {moved} accuracy number(s) moved ({worse_metrics} worse{gate}); perf: {perf}")
        return ("FAIL: " + (self.compared.problem or "") + "; " + text) if self.compared.failed \
            else text + self.compared.verdict_suffix()


def compare(records_a: Iterable[Record], records_b: Iterable[Record], *, name_a: str = "A", name_b: str = "B",
            judge: AccuracyJudge = accuracy_deltas, margins: MarginTable | None = None,
            allow_missing: bool = False) -> RunComparison:
    """A against B, case by case (:func:`pair_cases`: by id, else by model x precision x provider
    with the runtime setting that changed as a column). ``margins`` are the accuracy gate's
    overrides (``[margins]`` of a config, ``--accuracy-margin``); the registry's defaults apply
    without them. The perf and accuracy gates see B's paired cases under A's ids and variants,
    so a setting change compares like with like instead of listing everything missing and new."""
    a = {r.id: r for r in records_a}
    b = {r.id: r for r in records_b}
    pairs = pair_cases(a, b)
    paired_a, paired_b = {ra.id for ra, _ in pairs}, {rb.id for _, rb in pairs}
    verdicts = []
    for ra, rb in pairs:
        settings = runtime_change(ra, rb)
        if ra.verdict != rb.verdict or settings:
            verdicts.append(VerdictChange(rb.id, ra.verdict, rb.verdict, reason_line(rb),
                                          ra.id if ra.id != rb.id else None, settings))
    verdicts += [VerdictChange(case, None, r.verdict, reason_line(r)) for case, r in b.items() if case not in paired_b]
    gone = sorted(case for case in a if case not in paired_a)
    verdicts += [VerdictChange(case, a[case].verdict, None, reason_line(a[case])) for case in gone]
    verdicts.sort(key=lambda v: (not v.worse, v.after is None or v.before is None, v.case))
    aligned = [replace(rb, id=ra.id, variant=ra.variant) for ra, rb in pairs]  # B under A's names
    accuracy: list[MetricDelta] = []
    for ra, rb in pairs:
        accuracy += judge(ra.id, ra.metrics, rb.metrics)
    accuracy.sort(key=lambda d: ({"worse": 0, "changed": 1, "better": 2}[d.change], d.case, d.key))
    perf_a = [r for r in a.values() if r.perf]
    perf_b = [r for r in aligned if r.perf]
    perf = compare_runs(perf_a, perf_b, force_env=True) if perf_a and perf_b else None
    if perf is not None:
        perf.coverage_gated = False  # coverage is counted per case here
    env_a = next((r.env for r in a.values() if r.env), {})
    env_b = next((r.env for r in b.values() if r.env), {})
    env = env_differences(env_a, env_b) if env_a and env_b else []
    unchanged = len(pairs) - sum(1 for v in verdicts if v.before is not None and v.after is not None)
    gate = compare_accuracy(list(a.values()), aligned, margins)
    gate.coverage_gated = False
    return RunComparison(name_a, name_b, verdicts, accuracy, perf, env, unchanged, gate, len(pairs), gone,
                         allow_missing, run_differences(pairs), (RunHeader.of(a.values()), RunHeader.of(b.values())))
