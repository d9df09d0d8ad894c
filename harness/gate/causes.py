"""What differs between two runs besides their numbers: the causes a comparison lists first.

A verdict can change with no metric moving -- a stricter ``--config`` raised a threshold -- and a
comparison that showed only the pass -> fail rows, "every metric identical" and "0 setting
change(s)" hid the one thing that changed. Before any verdict or number, ``harness compare`` and
``harness baseline compare`` list every difference between the paired cases of the two runs, by
kind, most specific first:

- ``tolerance``: a gate's threshold or operator (``model/logits cosine >= 0.99 -> >= 0.9999``);
- ``configuration``: an option set differently (``samples: 32 -> 8``, ``config: a.toml -> b.toml``);
- ``runtime setting``: an ONNX Runtime session setting (``graph_optimization: all -> disabled``);
- ``version`` and ``environment``: the recorded environment (library versions; machine, threads).

Each difference says in how many paired cases it appears. "Identical" is said only when this
list and every number agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.core.verdict_text import exact_text
from harness.gate.compare import env_differences
from harness.results import MetricKey, Record
from harness.results.sections import SettingsSection

#: kinds, in the order they are listed: the most likely cause of a verdict change first
KINDS = ("tolerance", "configuration", "runtime setting", "version", "environment")


@dataclass(frozen=True)
class Difference:
    """One thing set or recorded differently in A and B, and in how many paired cases."""

    kind: str
    what: str
    before: str
    after: str
    cases: int = 1

    def text(self) -> str:
        """``tolerance: model/logits cosine: >= 0.99 -> >= 0.9999 (2 cases)``"""
        where = f" ({self.cases} case{'s' if self.cases != 1 else ''})" if self.kind in KINDS[:3] else ""
        return f"{self.kind}: {self.what}: {self.before} -> {self.after}{where}"


def _gate(gate: Any) -> str:
    if not isinstance(gate, Mapping):
        return "—"
    threshold = gate.get("threshold")
    shown = exact_text(float(threshold)) if isinstance(threshold, (int, float)) else str(threshold)
    return f"{gate.get('op', '<=')} {shown}"


def _value(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value)


def _case_differences(a: Record, b: Record) -> Iterable[tuple[str, str, str, str]]:
    for key in sorted(set(a.thresholds) | set(b.thresholds)):
        before, after = _gate(a.thresholds.get(key)), _gate(b.thresholds.get(key))
        if before != after and a.metrics.get(key) is not None and b.metrics.get(key) is not None:
            parsed = MetricKey.parse(key)
            yield "tolerance", f"{parsed.subject} {parsed.metric}".strip(), before, after
    sa, sb = SettingsSection.of(a), SettingsSection.of(b)
    for name in sorted(set(sa.options) | set(sa.effective) | set(sb.options) | set(sb.effective)):
        before, after = _value(sa.option(name)), _value(sb.option(name))
        if before != after:
            yield "configuration", name, before, after
    ra, rb = sa.runtime or {}, sb.runtime or {}
    for name in sorted(set(ra) | set(rb)):
        if ra.get(name) != rb.get(name):
            yield "runtime setting", name, _value(ra.get(name)), _value(rb.get(name))


def run_differences(pairs: Iterable[tuple[Record, Record]]) -> list[Difference]:
    """Every difference between the paired cases (A, B), counted over the pairs, then the
    environment's (from the first record of each side that has one)."""
    counted: Counter[tuple[str, str, str, str]] = Counter()
    env_a: Mapping[str, Any] = {}
    env_b: Mapping[str, Any] = {}
    for a, b in pairs:
        counted.update(set(_case_differences(a, b)))
        env_a, env_b = env_a or a.env, env_b or b.env
    out = [Difference(kind, what, before, after, n) for (kind, what, before, after), n in counted.items()]
    for line in env_differences(env_a, env_b) if env_a and env_b else []:
        key, _, change = line.partition(": ")
        before, _, after = change.partition(" -> ")
        kind = "version" if key.startswith("versions.") else "environment"
        out.append(Difference(kind, key.removeprefix("versions."), before, after))
    return sorted(out, key=lambda d: (KINDS.index(d.kind), -d.cases, d.what, d.before))


def difference_lines(differences: Iterable[Difference]) -> list[str]:
    """One line per difference, or the one line that says there is none."""
    return [d.text() for d in differences] or ["none: the same tolerances, settings, versions and environment"]
