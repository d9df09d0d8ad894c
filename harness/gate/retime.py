"""``baseline compare --perf``: the blessed artifacts and the candidate's re-timed, interleaved, here.

Two recorded runs carry the machine's drift between them (measured: -39 % .. +68 % on
A/A pairs of runs of one build on this VM); the canary (``gate.canary``) can only call such a
comparison INCONCLUSIVE. When the files the baseline timed are still at hand -- kept beside the
baseline (``baseline save --keep-artifacts``) or in this machine's export cache under their
recorded key (``harness.gate.blessed``) -- and the candidate's are too, each latency metric is
timed again on both sides *in this job*, in alternating blocks (``gate.paired.interleave``, the
engine of ``harness perf-compare``, through the variant's own backend -- ONNX Runtime, OpenVINO --
and synthetic inputs of the recorded shape: ``gate.onnxpair``), and judged by ``gate.paired.judge_paired``. Only the
latency rows change; scalars (memory, size, cold start) stay the recorded comparison.

A variant that cannot be paired keeps its unpaired rows (with the canary drift rule), and the
comparison says which mode each variant got and why (``Comparison.mode``, ``mode_reason``,
``pairing``).
"""

from __future__ import annotations

import shlex
import sys
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from harness.core import UsageError
from harness.gate.baseline import Baseline
from harness.gate.blessed import TimedFile, default_cache_root, located, timed_files, timed_graphs
from harness.gate.compare import (
    NOISY_MARGIN,
    Comparison,
    EnvironmentMismatch,
    MetricPolicy,
    Row,
    Verdict,
    fmt_change,
    merge_policies,
)
from harness.gate.envpair import interleave_envs
from harness.gate.onnxpair import DEFAULT_BLOCK, DEFAULT_PAIRS, FileRuntime, same_inputs, synthetic_feeds
from harness.gate.paired import interleave, judge_paired
from harness.results.record import Record, RecordLike
from harness.results.sections import PerfSetup

#: why a variant was not paired, by kind: how the summary line names it
_KINDS = {
    "blessed": "blessed artifacts of {n} variant(s) not in the cache nor kept ({names}): run `baseline save "
               "--keep-artifacts`, or restore the cache the baseline run used",
    "candidate": "the candidate's artifacts of {n} variant(s) are gone from the cache ({names})",
    "unrecorded": "the baseline recorded no timed artifacts for {n} variant(s) ({names}): saved by an older "
                  "harness or from a run without latency records",
    "backend": "{n} variant(s) run on a backend that runs no ONNX files ({names})",
    "shape": "{n} variant(s) timed other graphs or shapes than the baseline ({names})",
    "inputs": "{n} variant(s) cannot be fed generated inputs ({names})",
    "suites": "{n} variant(s) were timed by more than one suite ({names}): a paired re-timing re-times one "
              "file per variant (baseline.json keeps one per variant), so their recorded samples are compared",
}


_SOURCES = {"kept": "kept in the baseline", "run": "from the cache", "cache": "from the cache"}


@dataclass(frozen=True)
class Pairing:
    """How the re-timing runs: ``pairs`` x ``block`` calls per side, ``warmup`` calls first."""

    pairs: int = DEFAULT_PAIRS
    block: int = DEFAULT_BLOCK
    warmup: int = 20
    seed: int = 0
    #: the blessed environment's interpreter command (``harness.gate.blessedenv``): when given, the
    #: blessed artifacts are timed in it and the candidate's in this job's environment, by timing
    #: children alternating in blocks (``harness.gate.envpair``); empty: both in this process
    baseline_env: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Plan:
    variant: str
    key: str
    stats: tuple[str, ...]
    base: Path
    cand: Path
    runtime: FileRuntime
    batch: int
    seq: int
    #: where the blessed file was found: ``kept`` (the baseline), ``run`` or ``cache`` (the export cache)
    source: str


def _latency_records(records: Iterable[RecordLike]) -> dict[str, Record]:
    out: dict[str, Record] = {}
    for rec in map(Record.coerce, records):
        if rec.variant and timed_graphs(rec):
            out.setdefault(rec.variant, rec)
    return out


def _runtime(rec: Record) -> FileRuntime | None:
    """How the candidate's variant ran its files, or None when its backend runs none (PyTorch)."""
    try:
        return FileRuntime.named(rec.provider or "ort_cpu", precision=rec.precision or "fp32",
                                 threads=PerfSetup.of(rec).ort_intra_op_threads)
    except UsageError:
        return None


def _shape(entry: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return entry.get("graph"), entry.get("batch_size"), entry.get("seq_len")


def _row_stats(rows: Iterable[Row], variant: str, key: str) -> tuple[str, ...]:
    prefix = f"{key}."
    return tuple(r.metric[len(prefix):] for r in rows
                 if r.variant == variant and r.kind == "latency" and r.metric.startswith(prefix))


def _timing_suites(rows: Iterable[Row], variant: str) -> list[str]:
    """The tests whose latency rows a variant has when more than one timed it: the comparison then
    names each row ``<test>:latency_ms...`` (``harness.gate.compare.collect``), e.g. the perf
    suite's ``test_latency`` on the harness's export and ``test_artifact_perf`` on a configured
    artifact -- two different files under one variant."""
    return sorted({r.metric.split(".", 1)[0].split(":", 1)[0] for r in rows
                   if r.variant == variant and r.kind == "latency" and ":" in r.metric.split(".", 1)[0]})


def _plan_variant(variant: str, comparison: Comparison, baseline: Baseline, b_rec: Record | None,
                  c_rec: Record | None, cand_files: Mapping[str, Mapping[str, TimedFile]],
                  cache_root: Path) -> tuple[list[_Plan], tuple[str, str] | None]:
    """What to re-time for one variant, or (kind, detail) saying why it cannot be paired."""
    if b_rec is None or c_rec is None:
        return [], ("shape", "no latency record on one side")
    runtime = _runtime(c_rec)
    if runtime is None:
        return [], ("backend", f"backend {c_rec.backend or '?'}, provider {c_rec.provider or '?'}")
    suites = _timing_suites(comparison.rows, variant)
    if len(suites) > 1:
        return [], ("suites", " and ".join(suites))
    blessed = baseline.artifacts.get(variant)
    if not blessed:
        return [], ("unrecorded", "no artifacts in baseline.json")
    cand = cand_files.get(variant) or {}
    b_graphs, c_graphs = timed_graphs(b_rec), timed_graphs(c_rec)
    plans: list[_Plan] = []
    for key, entry in sorted(b_graphs.items()):
        stats = _row_stats(comparison.rows, variant, key)
        if not stats:
            continue
        other = c_graphs.get(key)
        shape, cand_shape = _shape(entry), (None if other is None else _shape(other))
        if shape != cand_shape:
            return [], ("shape", f"{key}: graph/batch/seq {shape} vs {cand_shape}")
        graph = str(entry["graph"])
        base_path, source = located(blessed, graph, baseline_dir=baseline.info.path, cache_root=cache_root)
        if base_path is None:
            return [], ("blessed", source)
        cand_path, why = located(cand, graph, cache_root=cache_root)
        if cand_path is None:
            return [], ("candidate", why)
        plans.append(_Plan(variant, key, stats, base_path, cand_path, runtime, int(entry.get("batch_size") or 1),
                           int(entry.get("seq_len") or 1), source))
    if not plans:
        return [], ("shape", "no latency metric recorded on both sides")
    return plans, None


def _time(plan: _Plan, pols: Mapping[str, MetricPolicy], pairing: Pairing) -> list[Row]:
    """One latency metric re-timed paired: a row per statistic (``judge_paired``'s verdict)."""
    feeds = synthetic_feeds(plan.base, plan.batch, plan.seq, pairing.seed)
    same_inputs(plan.base, plan.cand, feeds, plan.key)
    seed = zlib.crc32(f"{plan.variant}\0{plan.key}".encode())
    if pairing.baseline_env:
        samples, _ = interleave_envs(list(pairing.baseline_env), [sys.executable], plan.base, plan.cand, feeds,
                                     runtime=plan.runtime, pairs=pairing.pairs, block=pairing.block,
                                     warmup=pairing.warmup, seed=seed)
    else:
        with plan.runtime.open(plan.base) as a, plan.runtime.open(plan.cand) as b:
            try:
                call_a, call_b = a.timed_call(feeds), b.timed_call(feeds)
                call_a()
                call_b()
            except Exception as exc:  # noqa: BLE001 - a graph the generated inputs do not fit: reported, unpaired
                raise UsageError(f"{plan.key}: {str(exc).splitlines()[0][:160]}") from None
            samples = interleave(call_a, call_b, pairs=pairing.pairs, block=pairing.block, warmup=pairing.warmup,
                                 seed=seed)
    return judge_paired(samples, plan.stats, pols, seed=seed, variant=plan.variant, metric=plan.key)


def _summary(paired: Mapping[str, str], unpaired: Mapping[str, tuple[str, str]], pairing: Pairing) -> str:
    parts = []
    if paired:
        sources = sorted(set(paired.values()))
        where = (f"; the blessed ones in the blessed environment ({shlex.join(pairing.baseline_env)}), the "
                 "candidate's in this one" if pairing.baseline_env else "")
        parts.append(f"paired: {len(paired)} variant(s) re-timed interleaved in this job ({pairing.pairs} pairs x "
                     f"{pairing.block} calls per side; blessed artifacts {', '.join(sources)}{where})")
    by_kind: dict[str, list[str]] = {}
    for variant, (kind, _) in sorted(unpaired.items()):
        by_kind.setdefault(kind, []).append(variant)
    for kind, names in by_kind.items():
        shown = ", ".join(names[:3]) + (f", +{len(names) - 3} more" if len(names) > 3 else "")
        parts.append(("unpaired: " if not paired else "unpaired ") + _KINDS[kind].format(n=len(names), names=shown))
    return "; ".join(parts)


def pair(comparison: Comparison, baseline: Baseline, candidate_records: Iterable[RecordLike],
         policies: Mapping[str, MetricPolicy] | Iterable[MetricPolicy] | None = None,
         pairing: Pairing = Pairing(), *, force_env: bool = False, cache_root: Path | None = None,
         progress: Callable[[str], None] | None = None) -> Comparison:
    """``comparison`` (from ``compare_runs(..., force_env=True)``) with the latency rows of every
    variant that can be paired re-timed paired; the rest as they were, each variant's mode stated.

    Environment differences refuse the comparison (``EnvironmentMismatch``) unless ``force_env``
    or every latency row was re-timed here: then both sides ran on this machine, and the recorded
    memory and cold-start rows, which did not, become advisory.
    """
    candidate_records = [Record.coerce(r) for r in candidate_records]
    pols = merge_policies(policies)
    root = cache_root if cache_root is not None else default_cache_root()
    b_recs, c_recs = _latency_records(baseline.records), _latency_records(candidate_records)
    cand_files = timed_files(candidate_records)
    variants = sorted({r.variant for r in comparison.rows if r.kind == "latency"})
    paired: dict[str, str] = {}
    unpaired: dict[str, tuple[str, str]] = {}
    new_rows: dict[tuple[str, str], list[Row]] = {}
    for variant in variants:
        plans, why = _plan_variant(variant, comparison, baseline, b_recs.get(variant), c_recs.get(variant),
                                   cand_files, root)
        if why is not None:
            unpaired[variant] = why
            continue
        if progress is not None:
            progress(f"re-timing {variant}: {len(plans)} latency metric(s), blessed vs candidate, {pairing.pairs} "
                     f"pairs x {pairing.block} calls")
        try:
            timed = {(p.variant, p.key): _time(p, pols, pairing) for p in plans}
        except UsageError as exc:
            unpaired[variant] = ("inputs", str(exc))
            continue
        new_rows.update(timed)
        paired[variant] = " and ".join(sorted({_SOURCES[p.source] for p in plans}))
    rows: list[Row] = []
    recorded: list[Row] = []
    for r in comparison.rows:
        key = r.metric.rsplit(".", 1)[0]
        if r.kind == "latency" and (r.variant, key) in new_rows:
            recorded.append(r)
            continue
        rows.append(r)
    for (_, _), judged in sorted(new_rows.items()):
        rows.extend(judged)
    mode = "paired" if paired and not unpaired else "mixed" if paired else "unpaired"
    reason = _summary(paired, unpaired, pairing) if variants else "unpaired: no latency metric to re-time"
    diffs = list(comparison.env_differences)
    forced = comparison.forced_env and force_env
    machine = [d for d in diffs if not d.startswith(("versions.", "threads."))]
    if diffs and not force_env:
        if mode != "paired":
            raise EnvironmentMismatch(diffs)
        rows = [replace(r, advisory=True, reason=f"{r.reason}; advisory: recorded in another environment")
                if r.kind in ("memory", "cold") else r for r in rows]
        reason += "; environment differs from the baseline: latency re-timed here on both sides, recorded " \
                  "memory and cold-start rows advisory"
        versions = [d for d in diffs if d.startswith("versions.")]
        if versions and not pairing.baseline_env:
            reason += (f"; library versions differ ({'; '.join(versions[:3])}): the re-timing ran both artifacts on "
                       "this job's versions, the recorded rows beside it see the difference, and `--baseline-env "
                       "$(harness baseline env ...)` pairs the two environments")
    recorded = beside_paired(recorded, rows, pols, other_machine=bool(machine) and not force_env)
    detail = {v: f"paired ({s})" for v, s in paired.items()}
    detail.update({v: f"unpaired: {text}" for v, (_, text) in unpaired.items()})
    return replace(comparison, rows=rows, mode=mode, mode_reason=reason, pairing=dict(sorted(detail.items())),
                   forced_env=forced, recorded=recorded)


def beside_paired(recorded: Iterable[Row], paired: Iterable[Row], policies: Mapping[str, MetricPolicy], *,
                  other_machine: bool) -> list[Row]:
    """The recorded runs' latency rows of the paired variants, each saying what its paired twin
    found. A recorded REGRESSION whose twin re-timed here is none is what only the recorded runs
    can see -- the candidate ran in a slower environment (a runtime, a thread setting, a dependency
    invisible to the fingerprint) -- and gates like any other when it is *far* beyond the
    threshold: its lower bound at least ``NOISY_MARGIN`` thresholds up (an unpaired interval
    cannot see what two runs' machines did apart from the canary, so a claim against the paired
    finding must not hinge on the bar); nearer, it is INCONCLUSIVE and the paired row decides. A row
    whose level came from every process of both runs (``Row.process_levels``: the fresh processes'
    change combined, their measured spread in the interval) has seen what the processes did apart,
    and gates at the threshold itself.
    Recorded on another machine (the fingerprint's machine fields differ), the rows are advisory."""
    twins = {(r.variant, r.metric): r for r in paired}
    out = []
    for r in recorded:
        twin = twins.get((r.variant, r.metric))
        said = f"recorded runs: {r.reason}"
        verdict = r.verdict
        if twin is not None and r.verdict is Verdict.REGRESSION and twin.verdict is not Verdict.REGRESSION:
            pol = policies[r.metric.rsplit(".", 1)[-1]]
            margin = 1.0 if r.process_levels else NOISY_MARGIN
            bar = 1.0 + margin * pol.min_effect
            paired_said = f"re-timed paired here: {twin.verdict.value} {fmt_change(twin.ratio)}"
            if r.ci_lo is not None and r.ci_lo >= bar:
                said += (f"; {paired_said}: the candidate's environment (or its machine, beyond the canary) is "
                         "slower, not its artifact")
            else:
                verdict = Verdict.INCONCLUSIVE
                said += f"; {paired_said}, and the recorded interval is within {margin:g}x the threshold"
        if other_machine:
            out.append(replace(r, verdict=verdict, advisory=True, reason=f"{said}; advisory: recorded on another machine"))
        else:
            out.append(replace(r, verdict=verdict, reason=said))
    return out
