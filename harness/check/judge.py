"""Judge pre-built ONNX artifacts against the PyTorch FP32 reference (``harness check``).

The artifact is what ships, built by someone else's pipeline; the harness only reads it.
Every file is read and validated before the model loads (a truncated file is exit 2 in
a second), every job's I/O is matched before anything runs, and then each job goes through
the suites' own comparison (``run_graph_parity``) on real corpus batches. Seq2seq and
decoder-only artifacts are also decoded with the generation loops and scored against
PyTorch's decode. Results are the suites' records, so one summary, baseline and gate
serve both.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from harness.check.io_match import IOMatch, match_io, reference_info
from harness.check.jobs import Job, fit_sequence, job_feeds, plan_jobs, reference_outputs
from harness.check.layout import ArtifactFile, discover
from harness.check.record import compose
from harness.results.checks import failure_text
from harness.check.runners import MappedRunner, PrebuiltBackend, SplitLMRunner, synthesizers
from harness.config import (Precision, Provider, RunOptions, UsageError, Variant, describe_error, parse_precision,
                            parse_provider)
from harness.families import Family, family_for
from harness.parity import OutputResult, ParityResult, lint_result, run_graph_parity
from harness.workspace import Workspace
from harness.zoo.base import ModelSpec

#: from the most to the least accurate: a set of files of mixed precision is judged at the loosest
_ORDER = (Precision.FP32, Precision.FP16, Precision.INT8)


@dataclass
class CheckRequest:
    reference: str
    onnx: Path
    precision: str | None = None  # None: detected from the files
    provider: str = "ort_cpu"
    corpus: str | None = None
    samples: int | None = None
    batch_size: int | None = None
    maps: Mapping[str, str] = field(default_factory=dict)
    tolerances: Mapping[str, float] = field(default_factory=dict)  # for the judged precision
    trust_remote_code: bool = False
    allow_pickle: bool = False
    generation: bool = True
    gen_samples: int | None = None
    threads: int | None = None
    spec: ModelSpec | None = None  # a config's model; else resolved from ``reference``


@dataclass
class JobResult:
    job: Job
    match: IOMatch | None = None
    outputs: list[OutputResult] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    runner: MappedRunner | None = None


@dataclass
class CheckOutcome:
    spec: ModelSpec
    variant: Variant
    precision_note: str
    artifacts: list[ArtifactFile]
    jobs: list[JobResult]
    records: list[dict] = field(default_factory=list)
    generation: Any = None  # harness.generation_parity.GenerationResult
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 0 if all(r["verdict"] in ("pass", "skip") for r in self.records) else 1


class CheckWorkspace(Workspace):
    """The suites' workspace around one already-loaded reference model; ONNX Runtime
    variants run the foreign artifacts (``PrebuiltBackend``), PyTorch stays PyTorch."""

    def __init__(self, options: RunOptions, model) -> None:
        super().__init__(options)
        self.loaded = model
        self.prebuilt: PrebuiltBackend | None = None

    def model(self, name: str):
        return self.loaded

    def backend(self, variant: Variant, model):
        if variant.backend == "onnxruntime" and self.prebuilt is not None:
            return self.prebuilt
        return super().backend(variant, model)


# -- the request -> the pieces ----------------------------------------------------------------------
def reference_spec(text: str) -> ModelSpec:
    """An HF model directory, or a zoo name; a zoo model's own directory keeps its tolerances."""
    from harness.zoo import registered
    from harness.zoo.base import spec_for_directory

    path = Path(text).expanduser()
    if path.is_dir():
        resolved = path.resolve()
        for spec in registered().values():
            if spec.path is not None and Path(spec.path).resolve() == resolved:
                return spec
        return spec_for_directory(path)
    if text in registered():
        return registered()[text]
    if path.exists():
        raise UsageError(f"--reference: {path} is a file; give the HF model directory (config.json, weights, tokenizer)")
    raise UsageError(f"--reference: {text}: no such directory (give an HF model directory or a zoo model name)")


def choose_precision(given: str | None, artifacts: list[ArtifactFile]) -> tuple[Precision, str]:
    if given:
        return parse_precision(given, option="--precision"), "given"
    found = {a.path.name: Precision(a.precision) for a in artifacts}
    loosest = max(found.values(), key=_ORDER.index)
    details = "; ".join(f"{a.path.name}: {a.precision} ({a.precision_reason})" for a in artifacts)
    if len(set(found.values())) > 1:
        return loosest, f"detected, files disagree ({details}); judged at the loosest, {loosest.value}"
    return loosest, f"detected ({details})"


def ort_provider(name: str) -> Provider:
    from harness.runners.ort_runner import OrtBackend

    provider = parse_provider(name, option="--provider")
    if provider.backend != "onnxruntime":
        raise UsageError(f"--provider: {name!r} is not an ONNX Runtime provider; artifacts run on ort_* providers")
    reason = OrtBackend.unavailable_reason(Variant("check", Precision.FP32, provider))
    if reason:
        raise UsageError(f"--provider: {name}: {reason}")
    return provider


def open_session(path: Path, provider: Provider, threads: int | None):
    from harness.runners.ort_runner import OrtGraphRunner

    try:
        return OrtGraphRunner(str(path), provider.device, threads)
    except Exception as exc:  # onnxruntime's Fail / InvalidGraph / NotImplemented...
        text = str(exc).strip().splitlines()[0][:240] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{path}: onnxruntime cannot load it ({text})") from None


# -- one job ------------------------------------------------------------------------------------------
def judge_job(job: Job, session, family: Family, model, texts: list[str], batch_size: int,
              precision: Precision, overrides: Mapping, maps: Mapping[str, str]) -> JobResult:
    """Match the job's I/O on a probe batch (UsageError if impossible), then compare."""
    result = JobResult(job)
    factories = synthesizers(model, family.name)
    feeds0 = job_feeds(job, family, model, texts[:batch_size])
    ref0 = reference_outputs(job, family, model, feeds0)
    ref_in = reference_info({n: feeds0[n] for n in job.graph.input_names if n in feeds0})
    art = job.artifact
    match = match_io(job.label, ref_in, reference_info(ref0), art.inputs, art.outputs,
                     synthesizable={k: v[0] for k, v in factories.items()}, gated_outputs=job.graph.gated_outputs,
                     user_map=maps)
    result.match = match
    infos = {t.name: t for t in art.inputs}
    synth = {name: factories[what][1](infos[name]) for name, what in match.synthesized.items()}
    runner = MappedRunner(session, match, synth, job.label)
    result.runner = runner

    main = infos[match.input_map[job.graph.input_names[0]]]
    static_batch = main.shape[0] if main.shape and isinstance(main.shape[0], int) else None
    static_seq = (main.shape[1] if family.name == "encoder" and main.shape and len(main.shape) == 2
                  and isinstance(main.shape[1], int) else None)
    size = static_batch or batch_size
    chunks = [texts[i: i + size] for i in range(0, len(texts), size)]
    if static_batch and len(chunks[-1]) != static_batch:
        result.notes.append(f"static batch {static_batch}: the last {len(chunks[-1])} sentence(s) are not judged")
        chunks = chunks[:-1]
    if static_seq:
        result.notes.append(f"static sequence length {static_seq}: inputs padded (masked) or cut to it")
    if not chunks:
        raise UsageError(f"{art.path}: static batch size {static_batch} exceeds the {len(texts)} corpus sentences")
    pad = int(getattr(model.tokenizer, "pad_token_id", 0) or 0)
    batches = []
    for chunk in chunks:
        feeds = job_feeds(job, family, model, chunk)
        if static_seq:
            feeds = fit_sequence(feeds, static_seq, pad)
        ref = reference_outputs(job, family, model, feeds)
        batches.append((feeds, ref, family.valid_masks(job.graph, feeds, ref)))
    pooling = _pooling(model, family, match)
    runner.recorded = [] if pooling else None
    graph = replace(job.graph, name=job.key)
    start = time.perf_counter()
    try:
        result.outputs = run_graph_parity(runner, graph, batches, precision, overrides,
                                          output_map={r: r for r in match.output_map})
    except Exception as exc:  # the artifact ran and broke: its verdict is "error", others still run
        result.error = f"{job.label}: {describe_error(exc, 300)}"
        return result
    finally:
        result.seconds = time.perf_counter() - start
    if pooling:
        result.outputs.append(_embedding_result(job.key, pooling, batches, runner.recorded or [], precision,
                                                overrides))
    return result


def _pooling(model, family: Family, match: IOMatch):
    if family.name != "encoder" or "last_hidden_state" not in match.output_map:
        return None
    from harness.zoo.minilm import sentence_pooling

    return sentence_pooling(model.path)


def _embedding_result(key: str, pooling, batches, recorded, precision: Precision, overrides) -> OutputResult:
    """The sentence vector a search index stores, judged like any other output."""
    from harness.zoo.minilm import embedding_metrics, embedding_tolerance, pool

    ref = np.concatenate([pool(r["last_hidden_state"], f["attention_mask"], pooling) for f, r, _ in batches])
    got = np.concatenate([pool(g["last_hidden_state"], f["attention_mask"], pooling)
                          for (f, _, _), g in zip(batches, recorded)])
    return OutputResult(key, "sentence_embedding", embedding_metrics(ref, got), None, ("batch", "index"),
                        embedding_tolerance(precision.value, overrides), int(ref.shape[0]))


# -- generation ------------------------------------------------------------------------------------------
def generation_runners(family: Family, jobs: list[JobResult]) -> tuple[dict[str, Any], bool, str]:
    """Runners by reference graph name for the decoding loops, whether a cache is usable,
    and '' -- or why generation cannot run on these files."""
    ok = [j for j in jobs if j.error is None and j.runner is not None]
    by_mode: dict[str, JobResult] = {}
    for j in ok:  # a dedicated file wins over the merged one for the same graph
        if j.job.mode not in by_mode or j.job.artifact.role != "merged":
            by_mode[j.job.mode] = j
    if family.name == "seq2seq":
        if "encoder" not in by_mode or "decoder" not in by_mode:
            return {}, False, f"needs the encoder and decoder graphs; judged: {', '.join(sorted(by_mode)) or 'none'}"
        runners = {m: by_mode[m].runner for m in ("encoder", "decoder", "decoder_with_past") if m in by_mode}
        cached = "decoder_with_past" in by_mode and _gives_cache(by_mode["decoder"]) and \
            _gives_cache(by_mode["decoder_with_past"])
        return runners, cached, ""
    prefill, step = by_mode.get("prefill"), by_mode.get("step")
    if prefill is None:
        return {}, False, "needs a graph that takes the prompt (decoder_model.onnx, model.onnx or merged)"
    if step is None or not (_gives_cache(prefill) and _gives_cache(step)):
        return {"model": prefill.runner}, False, ""
    if step.job.artifact.path == prefill.job.artifact.path:
        return {"model": step.runner}, True, ""
    return {"model": SplitLMRunner(prefill.runner, step.runner)}, True, ""


def _gives_cache(result: JobResult) -> bool:
    """Whether the artifact returns every KV-cache tensor the next step needs."""
    assert result.match is not None
    presents = [n for n in result.job.graph.output_names if n.startswith("present")]
    return bool(presents) and all(n in result.match.output_map for n in presents)


def judge_generation(ws: CheckWorkspace, variant: Variant, family: Family, jobs: list[JobResult],
                     artifacts: dict[str, dict], samples: int | None):
    """(GenerationResult | None, note): decode with the artifacts and with PyTorch, score."""
    from harness.export.artifacts import ExportSettings
    from harness.runners.base import BackendContext

    try:
        from harness.generation_parity import GenerationRequest, generation_parity
    except ImportError:  # pragma: no cover - the generation package ships with the harness
        return None, "generation parity is not available in this installation"
    runners, use_cache, why = generation_runners(family, jobs)
    if why:
        return None, f"generation parity skipped: {why}"
    ws.prebuilt = PrebuiltBackend(BackendContext(ws.artifacts, ExportSettings()), runners, artifacts)
    request = GenerationRequest(samples=samples, use_cache=use_cache)
    return generation_parity(ws, variant, request, family), ("" if use_cache else
                                                            "decoded without a KV cache (no cached graph given)")


# -- the whole check -----------------------------------------------------------------------------------------
def run_check(req: CheckRequest, run_dir: Path) -> CheckOutcome:
    from harness.model import load_model
    from harness.options import merge_tolerances
    from harness.recording import Case

    began = time.perf_counter()
    spec = req.spec or reference_spec(req.reference)
    artifacts = discover(Path(req.onnx))  # bad files fail here, before the model loads
    provider = ort_provider(req.provider)
    if req.corpus:
        spec = replace(spec, corpus=_corpus(req.corpus))
    if req.trust_remote_code or req.allow_pickle:
        spec = replace(spec, extra={**spec.extra, "trust_remote_code": req.trust_remote_code,
                                    "allow_pickle": req.allow_pickle})
    precision, precision_note = choose_precision(req.precision, artifacts)
    overrides = merge_tolerances(spec.tolerances, {precision.value: dict(req.tolerances)})
    spec = replace(spec, tolerances=overrides)  # numeric and generation gates both read the spec
    model = load_model(spec)
    family = family_for(model.family)
    options = RunOptions(models=[spec.name], precisions=[precision], providers=[provider])
    options.batch_size = req.batch_size or options.batch_size
    options.num_samples = req.samples or options.num_samples
    options.intra_op_threads = req.threads
    ws = CheckWorkspace(options, model)
    texts = ws.texts(model)
    variant = Variant(spec.name, precision, provider)
    jobs = plan_jobs(artifacts, family, model)
    sessions = {a.path: open_session(a.path, provider, req.threads) for a in artifacts}
    outcome = CheckOutcome(spec, variant, precision_note, artifacts, [])
    linted: set[Path] = set()
    for job in jobs:
        result = judge_job(job, sessions[job.artifact.path], family, model, texts, options.batch_size, precision,
                           overrides, req.maps)
        if job.artifact.path not in linted:  # the suites' static checks (training-mode ops), once per file
            linted.add(job.artifact.path)
            result.outputs.insert(0, lint_result(job.key, str(job.artifact.path)))
        outcome.jobs.append(result)

    files = {a.path.name: a.record() for a in artifacts}
    settings = {"batch_size": options.batch_size, "num_samples": len(texts), "corpus": model.spec.corpus,
                "precision_source": "given" if req.precision else "detected", "maps": dict(req.maps),
                "tolerance_overrides": dict(req.tolerances)}
    outcome.records.append(numeric_record(outcome, Case(ws, variant, run_dir, f"check[{variant.id}]"), files,
                                          settings, time.perf_counter() - began))
    if req.generation and family.name in ("seq2seq", "causal_lm"):
        record = generation_record(outcome, ws, family, Case(ws, variant, run_dir, f"check_generation[{variant.id}]"),
                                   files, settings, req.gen_samples)
        if record is not None:
            outcome.records.append(record)
    for session in sessions.values():
        session.close()
    return outcome


def numeric_record(outcome: CheckOutcome, case, files: dict, settings: dict, seconds: float) -> dict:
    """One record for every job's outputs, like one suite case covers every graph."""
    variant = outcome.variant
    parity = ParityResult(variant.id, [o for j in outcome.jobs for o in j.outputs])
    case.metrics.update(parity.metrics())
    case.thresholds.update(parity.thresholds())
    case.artifacts.update(files)
    model = case.model
    case.data.update(
        reference={"path": str(model.path), "family": model.family, "name": outcome.spec.name},
        precision=outcome.precision_note, worst=parity.worst(),
        jobs={j.job.key: {"file": j.job.artifact.path.name, "mode": j.job.mode, "graph": j.job.graph.name,
                          "io_match": j.match.account() if j.match else [], "notes": j.notes,
                          "seconds": round(j.seconds, 4), "error": j.error} for j in outcome.jobs})
    errors = [j.error for j in outcome.jobs if j.error]
    failures = parity.failures
    if errors:
        verdict, reason = "error", "; ".join(e for e in errors if e)
    elif failures:
        verdict = "fail"
        reason = failure_text(variant.id, [f.message() for f in failures])
    else:
        verdict, reason = "pass", ""
    return compose(case, suite="check", verdict=verdict, reason=reason, duration_s=seconds, settings=settings)


def generation_record(outcome: CheckOutcome, ws: CheckWorkspace, family: Family, case, files: dict,
                      settings: dict, samples: int | None) -> dict | None:
    """Decode with the artifacts; None (with a note) when the files cannot decode."""
    from harness.generation_parity import record as record_generation

    began = time.perf_counter()
    try:
        result, note = judge_generation(ws, outcome.variant, family, outcome.jobs, files, samples)
    except Exception as exc:  # a decoding crash in the artifact is its verdict, not ours
        case.artifacts.update(files)
        return compose(case, suite="check_generation", verdict="error",
                       reason=f"{describe_error(exc, 300)}",
                       duration_s=time.perf_counter() - began, settings=settings)
    if note:
        outcome.notes.append(note)
    if result is None:
        return None
    outcome.generation = result
    record_generation(case, result)
    reason = ""
    try:
        result.assert_ok()
    except AssertionError as exc:
        reason = str(exc)
    return compose(case, suite="check_generation", verdict="fail" if reason else "pass", reason=reason,
                   duration_s=time.perf_counter() - began, settings=settings)


def _corpus(text: str) -> str:
    """``--corpus``: a manifest name, or a .txt/.tsv file (made absolute)."""
    from harness.corpus import CorpusError, list_corpora, load_corpus_file

    if text.endswith((".txt", ".tsv")):
        path = Path(text).expanduser()
        try:
            load_corpus_file(path)
        except CorpusError as exc:
            raise UsageError(f"--corpus: {exc}") from None
        return str(path.resolve())
    known = list_corpora()
    if text not in known:
        from harness.config import did_you_mean

        raise UsageError(f"--corpus: unknown corpus {text!r}{did_you_mean(text, known)}; known: {', '.join(known)} "
                         "(or a .txt/.tsv file)")
    return text

