"""The accuracy gate: did this run get *worse* than the blessed baseline, metric by metric?

The suites' absolute tolerances have to fit every model (INT8 norm max abs <= 0.15), so a
variant can lose most of its headroom and still pass: bert-tiny ORT INT8 sits at 0.0155 and
could get 9x worse; MiniLM's INT8 sentence-embedding cosine drops from 0.993 to 0.966 when
per-channel scales are lost, and both pass the 0.93 gate. This gate compares each accuracy
metric of each case with the same case in a baseline (``harness baseline save`` stores the
accuracy records next to the perf ones) and allows it to worsen by at most its margin
(:class:`~harness.metrics.spec.Margin`, declared per metric in ``harness.metrics.registry``,
overridden per metric / precision / model by ``harness.metrics.margins``):

    REGRESSION   badness grew by more than max(rel x baseline badness, floor)   (fails, unless advisory)
    IMPROVEMENT  badness shrank by more than the same margin
    PASS         otherwise; at an ``exact`` precision a baseline at the ideal must stay exactly there

Unlike timings, accuracy numbers are comparable across machines and library versions (they
are the point of upgrading), so a different environment never refuses the comparison: it is
shown, and where it plausibly explains a REGRESSION or IMPROVEMENT (a library the case runs
on, a setting that changes the artifact, an artifact rebuilt) it is named in that row's reason.

:func:`compare_accuracy` takes two runs' records and returns an :class:`AccuracyComparison`
whose ``rows`` are typed :class:`AccuracyRow` verdicts: the one entry point for ``harness
baseline compare``, the session-end gate and ``harness compare RUN_A RUN_B``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.compared import Compared
from harness.core.markdown import table
from harness.gate.baseline import is_accuracy_key
from harness.gate.compare import Verdict
from harness.gate.row import Gated
from harness.metrics.margins import EffectiveMargin, MarginTable, fmt, fmt_value, parse_cli_margin
from harness.metrics.registry import METRICS, MetricSpec, Scope
from harness.results.record import MetricKey, Record, RecordLike, readable_records
from harness.settings.config_file import find_config, load_config

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

SCHEMA = "harness.accuracy-compare/1"

#: Libraries whose version plausibly moves a case's numbers. The PyTorch FP32 reference runs in
#: every case; export/quantisation libraries matter where the case ran an ONNX artifact; text
#: metrics depend on the tokenizer and sacrebleu; the runtime is the case's own backend.
REFERENCE_LIBRARIES = ("torch", "transformers", "numpy")
ARTIFACT_LIBRARIES = ("onnx", "onnxruntime", "onnxconverter-common")
TEXT_LIBRARIES = ("tokenizers", "sacrebleu")
#: environment fields (outside ``versions``) that change floating-point results
MACHINE_FIELDS = ("cpu", "gpu", "machine", "os")
#: record ``settings`` that restate others (how a value was given, not what it was). Every other
#: setting is compared where it applies: ``int8_*`` only for INT8 cases, ``fp16_*`` only for FP16.
_IGNORED_SETTINGS = ("options", "exporter_explicit", "int8_per_channel_forced", "int8_reduce_range_why")


@dataclass(frozen=True)
class AccuracyValue:
    """One number of one case: ``case`` is the record id, ``key`` the metric key."""

    case: str
    variant: str
    model: str
    precision: str
    key: str
    metric: str
    value: float

    @property
    def spec(self) -> MetricSpec:
        return METRICS[self.metric]

    @property
    def badness(self) -> float:
        return self.spec.badness(self.value) if math.isfinite(self.value) else math.nan


@dataclass(frozen=True)
class RunAccuracy:
    """The comparable accuracy numbers of one run, keyed by (case id, metric key)."""

    values: dict[tuple[str, str], AccuracyValue]
    records: dict[str, Record]

    @property
    def cases(self) -> set[str]:
        return {case for case, _ in self.values}



def collect_accuracy(records: Iterable[RecordLike]) -> RunAccuracy:
    """Every accuracy number of ``records`` (the last record per case id wins, as in a rerun)."""
    values: dict[tuple[str, str], AccuracyValue] = {}
    by_case: dict[str, Record] = {}
    for rec in readable_records(records):
        keys = [k for k in rec.metrics if is_accuracy_key(k)]
        if not keys:
            continue
        by_case[rec.id] = rec
        for key in keys:
            raw = rec.metrics[key]
            value = float(raw) if isinstance(raw, (int, float)) else math.nan
            values[(rec.id, key)] = AccuracyValue(rec.id, rec.variant or rec.id, rec.model or "", rec.precision or "",
                                                  key, MetricKey.parse(key).metric, value)
    return RunAccuracy(values, by_case)


# -- judging ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    worsening: float  # badness change: > 0 worse
    allowed: float  # how much worsening the margin allows
    reason: str


def judge(spec: MetricSpec, base: float, cand: float, margin: EffectiveMargin) -> Judgement:
    """One metric, baseline vs candidate, under ``margin``. NaN is worse than any number."""
    if math.isnan(base) and math.isnan(cand):
        return Judgement(Verdict.PASS, 0.0, 0.0, "NaN in both runs")
    if math.isnan(cand):
        return Judgement(Verdict.REGRESSION, math.inf, 0.0, f"{fmt_value(spec, base)} -> NaN")
    if math.isnan(base):
        return Judgement(Verdict.IMPROVEMENT, -math.inf, 0.0, f"NaN -> {fmt_value(spec, cand)}")
    b_bad, c_bad = spec.badness(base), spec.badness(cand)
    worsening = c_bad - b_bad
    scale = spec.margin_scale(base)
    if margin.exact and b_bad <= 0.0:
        allowed, rule = 0.0, "must stay exact (baseline at the ideal)"
    else:
        allowed = max(margin.rel * scale, margin.floor)
        rule = f"margin {fmt(allowed)} = max({margin.rel:.0%} x {fmt(scale)}, floor {fmt(margin.floor)})"
    change = f"{fmt_value(spec, base)} -> {fmt_value(spec, cand)}"
    slack = 1e-12 * max(1.0, abs(base))  # float round-off of identical numbers is not a change
    if worsening > allowed + slack:
        return Judgement(Verdict.REGRESSION, worsening, allowed, f"{change}: worse by {fmt(worsening)} > {rule}")
    if -worsening > allowed + slack:
        return Judgement(Verdict.IMPROVEMENT, worsening, allowed, f"{change}: better by {fmt(-worsening)} > {rule}")
    return Judgement(Verdict.PASS, worsening, allowed, f"{change}: within {rule}")


@dataclass(frozen=True)
class AccuracyRow(Gated):
    """One metric of one case, judged against the baseline. ``delta`` is candidate - baseline in
    the metric's own unit; ``worsening`` the change of its badness (> 0: worse); ``allowed`` the
    margin it was held to."""

    case: str
    variant: str
    model: str
    precision: str
    key: str
    metric: str
    base: float
    cand: float
    delta: float
    worsening: float
    allowed: float
    margin: str
    verdict: Verdict
    reason: str
    advisory: bool = False
    explained_by: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdict"] = self.verdict.value
        out["explained_by"] = list(self.explained_by)
        for name in ("base", "cand", "delta", "worsening", "allowed"):
            value = out[name]
            out[name] = value if isinstance(value, float) and math.isfinite(value) else str(value)
        return out


# -- what changed between the runs ----------------------------------------------------------------------
def _flat(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, sub in value.items():
            _flat(f"{prefix}.{key}" if prefix else str(key), sub, out)
    else:
        out[prefix] = value


def _differences(base: Mapping[str, Any], cand: Mapping[str, Any]) -> dict[str, str]:
    flat_b: dict[str, Any] = {}
    flat_c: dict[str, Any] = {}
    _flat("", base, flat_b)
    _flat("", cand, flat_c)
    out: dict[str, str] = {}
    for key in sorted(set(flat_b) | set(flat_c)):
        b, c = flat_b.get(key, "<absent>"), flat_c.get(key, "<absent>")
        if b != c:
            out[key] = f"{key}: {_show(b)} -> {_show(c)}"
    return out


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


def env_changes(base: Record, cand: Record) -> dict[str, str]:
    """Environment fields that differ: library versions, machine, thread settings."""
    keep = ("versions", "threads", *MACHINE_FIELDS)
    return _differences({k: v for k, v in base.env.items() if k in keep},
                        {k: v for k, v in cand.env.items() if k in keep})


def settings_changes(base: Record, cand: Record) -> dict[str, str]:
    """Result-changing settings that differ (only those that apply at the case's precision)."""
    precision = cand.precision or base.precision or ""

    def relevant(settings: Mapping[str, Any]) -> dict[str, Any]:
        out = {}
        for key, value in settings.items():
            if key in _IGNORED_SETTINGS:
                continue
            prefix = key.split("_", 1)[0]
            if prefix in ("int8", "fp16") and prefix != precision:
                continue
            out[key] = value
        return out

    return _differences(relevant(base.settings), relevant(cand.settings))


def artifact_changes(base: Record, cand: Record) -> list[str]:
    """Artifacts whose content differs (same name, another sha256), and changed model weights."""
    out = []
    if base.model_sha256 and cand.model_sha256 and base.model_sha256 != cand.model_sha256:
        out.append("model weights changed (model_sha256 differs)")
    for name, art in cand.artifacts.items():
        old = base.artifacts.get(name)
        if isinstance(art, Mapping) and isinstance(old, Mapping) and art.get("sha256") != old.get("sha256"):
            out.append(f"artifact {name} rebuilt (sha256 differs)")
    return out


def plausible_causes(spec: MetricSpec, base: Record, cand: Record) -> list[str]:
    """What changed between the two cases that could move ``spec``'s number, most specific first:
    settings, artifacts, then library versions the case depends on, the machine, threads."""
    causes = list(settings_changes(base, cand).values()) + artifact_changes(base, cand)
    env = env_changes(base, cand)
    libraries = set(REFERENCE_LIBRARIES)
    if cand.artifacts or base.artifacts:
        libraries |= set(ARTIFACT_LIBRARIES)
    if spec.scope in (Scope.GENERATION, Scope.TEXT):
        libraries |= set(TEXT_LIBRARIES)
    for backend in (base.backend, cand.backend):
        if backend:
            libraries.add(backend)
    for key, text in env.items():
        section, _, name = key.partition(".")
        if (section == "versions" and name in libraries) or section in MACHINE_FIELDS or section == "threads":
            causes.append(text)
    return causes


def _listing(items: list[str], shown: int = 6) -> str:
    """A few names, then how many more (the JSON lists them all)."""
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f", +{more} more (all in the JSON)" if more > 0 else "")


# -- the comparison -----------------------------------------------------------------------------------
@dataclass
class AccuracyComparison:
    rows: list[AccuracyRow]
    missing: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    env_differences: list[str] = field(default_factory=list)
    settings_differences: list[str] = field(default_factory=list)
    unjudged: int = 0  # context metrics (no margin): recorded, never compared
    #: ``--allow-missing``: missing cases or nothing compared do not fail (the headline says so)
    allow_missing: bool = False
    #: False inside ``harness compare``, which counts coverage per case itself
    coverage_gated: bool = True

    @property
    def exit_code(self) -> int:
        """1 when a non-advisory metric regressed, or nothing / not everything was compared."""
        return 1 if any(r.gating_regression for r in self.rows) or self.compared.failed else 0

    @property
    def compared(self) -> Compared:
        """What was judged: zero metrics, or baseline cases/metrics missing, fail the gate."""
        return Compared("accuracy metrics", len(self.rows), tuple(self.missing), self.allow_missing,
                        self.coverage_gated)

    def counts(self) -> dict[str, int]:
        out = {v.value: 0 for v in (Verdict.PASS, Verdict.REGRESSION, Verdict.IMPROVEMENT)}
        for row in self.rows:
            out[row.verdict.value] = out.get(row.verdict.value, 0) + 1
        return out

    def headline(self) -> str:
        gating = sum(r.gating_regression for r in self.rows)
        tally = ", ".join(f"{n} {v.lower()}" for v, n in self.counts().items() if n) or "nothing compared"
        cases = len({r.case for r in self.rows})
        text = f"{len(self.rows)} accuracy metrics of {cases} cases: {tally}"
        worst = sorted({r.metric for r in self.rows if r.gating_regression})
        return self.compared.headline(f"OK: no accuracy regression; {text}",
                                      f"FAIL: {gating} accuracy regression(s) ({', '.join(worst)}); {text}"
                                      if gating else None)

    def notes(self) -> list[str]:
        out: list[str] = []
        if self.settings_differences:
            out.append("settings differ from the baseline: " + "; ".join(self.settings_differences))
        if self.env_differences:
            out.append("environment differs from the baseline (compared anyway): " + "; ".join(self.env_differences))
        if self.missing:
            out.append("missing in candidate: " + _listing(self.missing))
        if self.new:
            out.append("new in candidate (no baseline): " + _listing(self.new))
        return out

    def shown(self, everything: bool = False) -> list[AccuracyRow]:
        """Rows for the table: gating regressions first, then advisory ones and improvements;
        PASS rows only when ``everything`` (a run has hundreds; JSON always has all)."""
        def rank(r: AccuracyRow) -> int:
            if r.verdict is Verdict.REGRESSION:
                return 1 if r.advisory else 0
            return 2 if r.verdict is Verdict.IMPROVEMENT else 3

        rows = [r for r in self.rows if everything or r.verdict is not Verdict.PASS]
        return sorted(rows, key=lambda r: (rank(r), r.case, r.key))

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "exit_code": self.exit_code,
            "headline": self.headline(),
            "counts": self.counts(),
            "rows": [r.as_dict() for r in self.rows],
            "missing": list(self.missing),
            "new": list(self.new),
            "env_differences": list(self.env_differences),
            "settings_differences": list(self.settings_differences),
            "unjudged": self.unjudged,
            "compared": self.compared.as_dict(),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent)

    def _cells(self, r: AccuracyRow) -> list[str]:
        verdict = f"{r.verdict.value} (advisory)" if r.advisory else r.verdict.value
        spec = METRICS[r.metric]
        delta = f"{r.delta:+.3g}" if math.isfinite(r.delta) else "-"
        return [r.variant, r.key, fmt_value(spec, r.base), fmt_value(spec, r.cand), delta,
                fmt(r.allowed), verdict, r.reason]

    def to_markdown(self, everything: bool = False) -> str:
        lines = [f"**{self.headline()}**", ""]
        lines += [f"- {note}" for note in self.notes()]
        if self.notes():
            lines.append("")
        rows = self.shown(everything)
        if rows:
            cells = [self._cells(r) for r in rows]
            for r, row in zip(rows, cells):
                if r.gating_regression:
                    row[6] = f"**{row[6]}**"
            lines += table(["variant", "metric", "baseline", "candidate", "delta", "margin", "verdict", "reason"],
                           cells, align="llrrrrll")
        elif self.rows:
            lines.append(f"All {len(self.rows)} compared accuracy metrics within their margins.")
        return "\n".join(lines) + "\n"

    def render_table(self, console: Console, everything: bool = False) -> None:
        from rich.markup import escape
        from rich.table import Table
        from rich.text import Text

        styles = {Verdict.PASS: "green", Verdict.IMPROVEMENT: "cyan", Verdict.REGRESSION: "bold red"}
        rows = self.shown(everything)
        if rows:
            table = Table(title="accuracy vs baseline", show_lines=False)
            for header, justify in (("variant", "left"), ("metric", "left"), ("baseline", "right"),
                                    ("candidate", "right"), ("delta", "right"), ("margin", "right"),
                                    ("verdict", "left"), ("reason", "left")):
                table.add_column(header, justify=justify)  # type: ignore[arg-type]
            for r in rows:
                cells = self._cells(r)
                style = "dim" if r.advisory and r.verdict is Verdict.REGRESSION else styles.get(r.verdict, "")
                table.add_row(*(Text(c) for c in cells[:6]), Text(cells[6], style=style), Text(cells[7]))
            console.print(table)
        for note in self.notes():
            console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
        colour = "red" if self.exit_code else "green"
        console.print(f"[bold {colour}]{escape(self.headline())}[/]", highlight=False)


def margin_table(config: str | Path | None = None, cli: Iterable[str] = (), *,
                 rootdir: Path | None = None) -> MarginTable:
    """The margin overrides of a comparison: the config file's ``[margins]`` tables (the explicit
    ``config``, else a ``harness.toml`` / ``[tool.harness]`` found in ``rootdir`` or the working
    directory), then ``--accuracy-margin`` texts (later, so they win among equally specific rules)."""
    found = find_config(config, rootdir)
    rules = list(load_config(found).margin_rules()) if found is not None else []
    rules += [parse_cli_margin(text) for text in cli]
    return MarginTable(rules)


def compare_accuracy(
    baseline_records: Iterable[RecordLike],
    candidate_records: Iterable[RecordLike],
    margins: MarginTable | None = None,
) -> AccuracyComparison:
    """Judge every accuracy metric present in both runs (matched by case id and metric key).

    Metrics without a declared margin (context numbers) are counted, not judged; cases or keys
    on one side only are listed as missing/new and never fail the gate (the absolute suites
    already fail a case that errored).
    """
    table = margins or MarginTable()
    base = collect_accuracy(baseline_records)
    cand = collect_accuracy(candidate_records)
    rows: list[AccuracyRow] = []
    unjudged = 0
    causes_cache: dict[tuple[str, str], list[str]] = {}
    for (case, key), b in sorted(base.values.items()):
        c = cand.values.get((case, key))
        if c is None:
            continue
        spec = b.spec
        margin = table.resolve(spec, c.model or b.model, c.precision or b.precision)
        if margin is None:
            unjudged += 1
            continue
        j = judge(spec, b.value, c.value, margin)
        reason = j.reason
        explained: tuple[str, ...] = ()
        if j.verdict is not Verdict.PASS:
            cache_key = (case, spec.scope.value)
            if cache_key not in causes_cache:
                causes_cache[cache_key] = plausible_causes(spec, base.records[case], cand.records[case])
            explained = tuple(causes_cache[cache_key])
            if explained:
                shown = "; ".join(explained[:3]) + (f"; +{len(explained) - 3} more" if len(explained) > 3 else "")
                reason += f"; changed since baseline: {shown}"
        delta = c.value - b.value if math.isfinite(c.value) and math.isfinite(b.value) else math.nan
        rows.append(AccuracyRow(case, c.variant, c.model, c.precision, key, spec.name, b.value, c.value, delta,
                                j.worsening, j.allowed, margin.describe(), j.verdict, reason, margin.advisory,
                                explained))
    shared = base.cases & cand.cases
    missing = sorted(base.cases - cand.cases)
    new = sorted(cand.cases - base.cases)
    missing += [f"{case} {key}" for case, key in sorted(set(base.values) - set(cand.values)) if case in shared]
    new += [f"{case} {key}" for case, key in sorted(set(cand.values) - set(base.values)) if case in shared]
    env: dict[str, str] = {}
    settings: dict[str, str] = {}
    for case in sorted(shared):
        env.update(env_changes(base.records[case], cand.records[case]))
        settings.update(settings_changes(base.records[case], cand.records[case]))
    return AccuracyComparison(rows, missing, new, list(env.values()), list(settings.values()), unjudged)
