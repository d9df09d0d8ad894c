"""The performance of a run as a reviewer reads it: per model, one table of its variants.

Each row is one variant, gathered from every perf record it has (latency, cold start and memory,
generation, a team's artifact): p50, p99 with its 95 % interval, throughput in its own unit, peak
RSS, size on disk, cold start, the speedup against the model's PyTorch FP32 variant (its
reference) and the p50's change against the baseline where ``--harness-baseline-compare`` judged
one (``perf-compare.json`` in the run directory). Rows that regressed come first (a gated perf
case that failed, or a baseline regression), then the fastest. The HTML report, ``summary.md``
and the terminal's end-of-run summary render these rows; the cells' text is written here once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping

from harness.core.types import Precision
from harness.core.units import value_text
from harness.report.variants import VariantParts, split_variant
from harness.results import Record
from harness.results.reason import reason_line
from harness.results.sections import DecodeSpeed, Generation, LatencyHeadline, PerfHeadlines

#: the gate's file beside a run's results when the run was judged against a baseline
BASELINE_FILE = "perf-compare.json"
#: the reference of a model's speedups: its PyTorch variant at FP32
REFERENCE_BACKEND, REFERENCE_PRECISION = "pytorch", Precision.FP32.value
#: the table's columns, in order (every surface uses these headers)
COLUMNS = ("variant", "verdict", "p50", "p99 (95% interval)", "throughput", "peak RSS", "size", "cold start",
           "vs PyTorch FP32", "p50 vs baseline")


@dataclass(frozen=True)
class BaselineChange:
    """The p50's ratio against the baseline (candidate / baseline) and whether the gate called
    any of the variant's rows a gating regression."""

    ratio: float | None
    regressed: bool


@dataclass(frozen=True)
class VariantPerf:
    """One variant's numbers, merged from its perf records."""

    variant: str
    parts: VariantParts
    backend: str
    latency: LatencyHeadline
    fresh: PerfHeadlines
    decode: DecodeSpeed
    #: why a perf case of this variant failed or errored (its first failing check); '' when none did
    failure: str = ""
    baseline: BaselineChange | None = None
    #: reference p50 / this p50 (None: no reference or no latency)
    speedup: float | None = None

    @property
    def is_reference(self) -> bool:
        return self.backend == REFERENCE_BACKEND and self.parts.precision == REFERENCE_PRECISION \
            and not self.parts.setting

    @property
    def regressed(self) -> bool:
        return bool(self.failure) or (self.baseline is not None and self.baseline.regressed)

    @property
    def sort_key(self) -> tuple[bool, bool, float, tuple[str, int, str, str]]:
        """Regressions first, then by p50 (fastest first; unmeasured last), then by name."""
        p50 = self.latency.p50_ms
        return not self.regressed, p50 is None, p50 if p50 is not None else 0.0, self.parts.sort_key

    def cells(self) -> tuple[str, ...]:
        """The row's text, one cell per :data:`COLUMNS` entry ('' where not measured)."""
        lat = self.latency
        p99 = value_text(lat.p99_ms, "ms")
        if p99 and lat.p99_interval is not None:
            p99 += f" [{value_text(lat.p99_interval[0], 'ms')}, {value_text(lat.p99_interval[1], 'ms')}]"
        elif p99 and lat.p99_low_confidence:
            p99 += f" (n={lat.calls}, too few to bound it)"
        rates = [value_text(lat.throughput, lat.throughput_unit), value_text(self.decode.tokens_per_s, "tokens/s")]
        return (self.variant, self.verdict_text, value_text(lat.p50_ms, "ms"), p99, ", ".join(r for r in rates if r),
                value_text(self.fresh.peak_rss_bytes, "bytes"), value_text(self.fresh.artifact_bytes, "bytes"),
                value_text(self.fresh.cold_start_ms, "ms"), self.speedup_text, self.baseline_text)

    @property
    def verdict_text(self) -> str:
        """``pass``, or what failed: the failing check (the case's reason) and/or the baseline regression."""
        parts = [self.failure] if self.failure else []
        if self.baseline is not None and self.baseline.regressed:
            parts.append("slower than the baseline")
        return "; ".join(parts) or "pass"

    @property
    def speedup_text(self) -> str:
        if self.is_reference and self.latency.measured:
            return "1.00× (reference)"
        return "" if self.speedup is None else f"{self.speedup:.2f}×"

    @property
    def baseline_text(self) -> str:
        """The p50's change against the baseline (``+31.0%``); whether it regressed is the verdict's."""
        if self.baseline is None or self.baseline.ratio is None:
            return ""
        return f"{self.baseline.ratio - 1:+.1%}"


@dataclass(frozen=True)
class ModelPerf:
    """One model's variants, in reading order."""

    model: str
    rows: tuple[VariantPerf, ...]
    #: the variant speedups are measured against (None: the run timed no PyTorch FP32 variant)
    reference: str | None = None


def baseline_changes(run_dir: Path | None) -> dict[str, BaselineChange]:
    """Per variant, what the baseline gate said (``perf-compare.json``); {} when the run was not
    judged against a baseline or the file cannot be read (the table then has no baseline column)."""
    if run_dir is None:
        return {}
    try:
        raw = json.loads((Path(run_dir) / BASELINE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    rows = [r for r in (raw.get("rows") or []) if isinstance(r, Mapping)] if isinstance(raw, Mapping) else []
    out: dict[str, BaselineChange] = {}
    for variant in dict.fromkeys(str(r.get("variant")) for r in rows):
        own = [r for r in rows if str(r.get("variant")) == variant]
        p50 = next((r for r in own if str(r.get("metric", "")).endswith("latency_ms.p50")), None)
        ratio = p50.get("ratio") if p50 is not None else None
        regressed = any(r.get("verdict") == "REGRESSION" and not r.get("advisory") for r in own)
        out[variant] = BaselineChange(float(ratio) if isinstance(ratio, (int, float)) else None, regressed)
    return out


def _merge(variant: str, records: list[Record], baseline: BaselineChange | None) -> VariantPerf:
    """A variant's row from its records: each number from the first record that measured it."""
    latency = next((lat for r in records if (lat := LatencyHeadline.of(r)).measured), LatencyHeadline())
    fresh = [PerfHeadlines.of(r) for r in records]
    decodes = [_decode(r) for r in records]
    merged = PerfHeadlines(
        next((f.cold_load_ms for f in fresh if f.cold_start_ms is not None), None),
        next((f.cold_first_inference_ms for f in fresh if f.cold_start_ms is not None), None),
        next((f.peak_rss_bytes for f in fresh if f.peak_rss_bytes is not None), None),
        next((f.artifact_bytes for f in fresh if f.artifact_bytes is not None), None))
    decode = next((d for d in decodes if d.tokens_per_s is not None), DecodeSpeed())
    # a perf case's failure (a budget); a generation parity case's accuracy verdict is not the row's
    failure = next((f"{r.verdict.upper()}: {reason_line(r)}" for r in records if r.failed and r.perf), "")
    return VariantPerf(variant, split_variant(variant), records[0].backend or "", latency, merged, decode,
                       failure=failure[:160], baseline=baseline)


def _decode(record: Record) -> DecodeSpeed:
    """A generation perf case's decode, else a generation parity case's tokens/s (its decode was
    timed too, beside the reference's)."""
    speed = DecodeSpeed.of(record)
    return speed if speed.tokens_per_s is not None else DecodeSpeed(tokens_per_s=Generation.of(record).tokens_per_s)


def _is_perf(record: Record) -> bool:
    return LatencyHeadline.of(record).measured or PerfHeadlines.of(record) != PerfHeadlines() \
        or _decode(record).tokens_per_s is not None


def model_tables(records: Iterable[Record], run_dir: Path | None = None) -> list[ModelPerf]:
    """Per model (in name order), its variants' rows: regressions first, then by speed."""
    changes = baseline_changes(run_dir)
    by_variant: dict[str, list[Record]] = {}
    for r in records:
        if _is_perf(r):
            by_variant.setdefault(r.variant or r.id, []).append(r)
    by_model: dict[str, list[VariantPerf]] = {}
    for variant, recs in by_variant.items():
        row = _merge(variant, recs, changes.get(variant))
        by_model.setdefault(recs[0].model or row.parts.model, []).append(row)
    out = []
    for model in sorted(by_model):
        rows = by_model[model]
        reference = next((r for r in sorted(rows, key=lambda r: r.parts.sort_key)
                          if r.is_reference and r.latency.measured), None)
        base = reference.latency.p50_ms if reference is not None else None
        rows = [_with_speedup(r, base) for r in rows]
        ordered = tuple(sorted(rows, key=lambda r: r.sort_key))
        out.append(ModelPerf(model, ordered, reference.variant if reference is not None else None))
    return out


def _with_speedup(row: VariantPerf, reference_p50: float | None) -> VariantPerf:
    p50 = row.latency.p50_ms
    if reference_p50 is None or not p50 or row.is_reference:
        return row
    return replace(row, speedup=reference_p50 / p50)


def shown_columns(table: ModelPerf) -> tuple[int, ...]:
    """Indices of :data:`COLUMNS` some row of ``table`` fills (the variant and verdict always): a run
    without cold-start cases or a baseline gets no empty columns."""
    cells = [row.cells() for row in table.rows]
    return tuple(i for i in range(len(COLUMNS)) if i < 2 or any(c[i] for c in cells))
