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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from harness.gate.compare import Comparison, compare_runs, env_differences
from harness.metrics.registry import METRICS
from harness.results import MetricKey, Record
from harness.results.record import FAILING

if TYPE_CHECKING:  # pragma: no cover
    from harness.gate.accuracy import AccuracyComparison
    from harness.metrics.margins import MarginTable

#: verdicts from best to worst: a change towards the end is a regression
RANK = {"pass": 0, "skip": 1, "not-run": 2, "fail": 3, "error": 4}


@dataclass(frozen=True)
class VerdictChange:
    case: str
    before: str | None  # None: the case is new in B
    after: str | None  # None: the case is gone in B
    reason: str = ""

    @property
    def worse(self) -> bool:
        if self.before is None or self.after is None:
            return False
        return RANK.get(self.after, 9) > RANK.get(self.before, 9) and self.after in FAILING


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
        up = self.after > self.before
        return "better" if up == (self.direction == "higher") else "worse"


AccuracyJudge = Callable[[str, Mapping[str, float], Mapping[str, float]], list[MetricDelta]]


def _direction(key: str) -> str:
    spec = METRICS.get(MetricKey.parse(key).metric)
    if spec is None:
        return ""
    return "higher" if spec.higher_is_better else "lower"


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

    @property
    def regressed(self) -> bool:
        """A case newly failing, a gating perf regression, or an accuracy metric past its margin."""
        return (any(v.worse for v in self.verdicts) or bool(self.perf and self.perf.exit_code)
                or bool(self.accuracy_gate and self.accuracy_gate.exit_code))

    def headline(self) -> str:
        worse = sum(v.worse for v in self.verdicts)
        changed = len(self.verdicts)
        moved = len(self.accuracy)
        worse_metrics = sum(d.change == "worse" for d in self.accuracy)
        perf = self.perf.headline() if self.perf and self.perf.rows else "no perf measurements on both sides"
        gate = ""
        if self.accuracy_gate is not None and self.accuracy_gate.rows:
            counts = self.accuracy_gate.counts()
            gate = f", {counts.get('REGRESSION', 0)} past their margin"
        return (f"{changed} verdict change(s) ({worse} worse); {moved} accuracy number(s) moved "
                f"({worse_metrics} worse{gate}); perf: {perf}")


def compare(records_a: Iterable[Record], records_b: Iterable[Record], *, name_a: str = "A", name_b: str = "B",
            judge: AccuracyJudge = accuracy_deltas, margins: MarginTable | None = None) -> RunComparison:
    """A against B. ``margins`` are the accuracy gate's overrides (``[margins]`` of a config,
    ``--accuracy-margin``); the registry's defaults apply without them."""
    from harness.gate.accuracy import compare_accuracy

    records_a, records_b = list(records_a), list(records_b)
    a = {r.id: r for r in records_a}
    b = {r.id: r for r in records_b}
    verdicts = []
    for case in sorted(set(a) | set(b)):
        before, after = a.get(case), b.get(case)
        if before is None or after is None or before.verdict != after.verdict:
            either = after if after is not None else before
            reason = either.first_reason_line if either is not None else ""
            verdicts.append(VerdictChange(case, before.verdict if before else None, after.verdict if after else None,
                                          reason))
    verdicts.sort(key=lambda v: (not v.worse, v.after is None or v.before is None, v.case))
    accuracy: list[MetricDelta] = []
    for case in sorted(set(a) & set(b)):
        accuracy += judge(case, a[case].metrics, b[case].metrics)
    accuracy.sort(key=lambda d: ({"worse": 0, "changed": 1, "better": 2}[d.change], d.case, d.key))
    perf_a = [r for r in a.values() if r.perf]
    perf_b = [r for r in b.values() if r.perf]
    perf = compare_runs(perf_a, perf_b, force_env=True) if perf_a and perf_b else None
    env_a = next((r.env for r in a.values() if r.env), {})
    env_b = next((r.env for r in b.values() if r.env), {})
    env = env_differences(env_a, env_b) if env_a and env_b else []
    unchanged = len(set(a) & set(b)) - len({v.case for v in verdicts})
    gate = compare_accuracy(records_a, records_b, margins)
    return RunComparison(name_a, name_b, verdicts, accuracy, perf, env, unchanged, gate)
