"""Every metric the harness computes, gates or budgets: declared here once, derived everywhere.

The default tolerances (``harness.judge.tolerances``), the generation gates, ``harness bisect``'s
per-tensor rule, the perf budgets and how each is read from a record, the config-file validator,
the ``--tolerance`` parsers, the report tables and the docs tables (``scripts/render_metric_docs.py``)
all read these declarations. ``tests/test_metric_registry.py`` proves that what the code computes,
what the docs name and what the CLI and the config accept are exactly what is declared here.

Adding a metric: compute it (``metrics/numeric.py``, ``metrics/text.py``, ``generation_parity.score_rows``
or a perf field), declare it below, run ``python scripts/render_metric_docs.py``.

The default thresholds were chosen from measurements on the built-in zoo (docs/tolerances.md and
docs/generation.md have them): each sits well above the worst value a *correct* export showed and
well below what a broken one produces. Numeric gates are scale-free because random-weight models
have tiny logits (PITFALLS #7). Generation: FP32 must reproduce PyTorch's greedy tokens exactly;
the BLEU-vs-PyTorch floors are sized for the worst correct export measured, a random-weight LM whose
near-flat logits make greedy paths fragile (llama-tiny FP16 93.7, INT8 37.9 beam 3 / 52.7 greedy);
a broken export decodes garbage (BLEU < 10).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.core import Check, Precision
from harness.metrics.spec import (
    TOLERANCE_SCOPES,
    Direction,
    Margin,
    MetricPolicy,
    MetricRegistry,
    MetricSpec,
    Outputs,
    PerfReading,
    Scope,
    Thresholds,
)

__all__ = ["METRICS", "TOLERANCE_SCOPES", "Direction", "Margin", "MetricPolicy", "MetricRegistry", "MetricSpec",
           "Outputs", "PerfReading", "Scope", "Thresholds", "budget_names", "gate", "metric", "perf_policies",
           "tensor_metric_names", "tolerance_names"]

HIGHER, LOWER = Direction.HIGHER, Direction.LOWER
MiB = float(2 ** 20)


#: span_agreement floors below FP32's exact 1.0: correct variants of the tiny QA models moved at most 1 of 32
#: spans at INT8 (0.969, ORT and PyTorch, dynamic and static) and none at FP16; 0.90 allows 3 of 32, 0.95 one
#: (docs/tolerances.md, "Answer spans")
SPAN_FP16, SPAN_INT8 = 0.95, 0.90


#: INT4 weight-only (MatMulNBits, block 32, symmetric) numeric floors, measured on the trained numbers-llama
#: (``harness run --models numbers-llama --precisions int8 int4 --providers ort_cpu``, 32 prompts of
#: numbers_en_zh, logits at every position): INT4 logits norm_max_abs 0.212, cosine 0.991, top-1 0.914,
#: KL 0.077 (INT8 on the same model: 0.085, 0.9993, 0.962, 0.0085), while INT4 still decoded all 332
#: held-out answers exactly as PyTorch did (cached decoding: logits cosine 0.9978, presents 0.995). INT8's
#: gates would fail that correct file; these leave ~1.6-2x headroom over it (docs/tolerances.md). Top-1 also
#: covers the random-weight zoo, whose near-tied logits flip more argmaxes at INT4 (llama-tiny 0.831,
#: marian-tiny 0.833, at KL 2e-4 and cosine >= 0.994; bert-tiny 1.0).
INT4_NORM_MAX_ABS, INT4_COSINE, INT4_TOP1, INT4_KL = 0.35, 0.98, 0.75, 0.15


#: a latency summary's fields (``harness.perf.stats.LatencySummary``) that are not in the samples'
#: unit (milliseconds), with the unit they are in: how many calls were timed and the spread
#: relative to the mean. Neither is better higher or lower
#: (more calls are a longer run, a wider spread a noisier machine): a nightly series of either is
#: shown, never judged a regression -- read as milliseconds, 550 calls -> 2130 calls had failed
#: ``history changes`` as "+287.7 % worse".
NOT_IN_SAMPLE_UNIT: dict[str, str] = {"n": "calls", "cv": ""}


def _numeric(name: str, direction: Direction, outputs: Outputs, description: str, unit: str = "",
             thresholds: Thresholds | None = None, bounds: tuple[float, float] | None = None) -> MetricSpec:
    return MetricSpec(name, direction, Scope.NUMERIC, description, unit, thresholds, outputs=outputs, bounds=bounds)


#: a similarity threshold: 1 is identical, 0 unrelated; below 0 would accept anti-correlated output
SIMILARITY = (0.0, 1.0)


def _gen(name: str, direction: Direction, description: str, unit: str = "", thresholds: Thresholds | None = None,
         *, refs: bool = False, context: bool = False, headline: bool = False) -> MetricSpec:
    return MetricSpec(name, direction, Scope.GENERATION, description, unit, thresholds, needs_references=refs,
                      context=context, headline=headline)


def _text(name: str, direction: Direction, description: str, unit: str = "",
          target: float | None = None) -> MetricSpec:
    return MetricSpec(name, direction, Scope.TEXT, description, unit, target=target)


def _budget(name: str, label: str, unit: str, measured_by: str, *paths: tuple[str, ...],
            divisor: float = 1.0, description: str, gate: str = "", **policy: Any) -> MetricSpec:
    """A budget; ``gate`` (a kind: latency, memory, size, cold) and ``policy`` (``MetricPolicy``'s
    knobs) say how the perf gate judges its number against a baseline, under the name the gate
    reads it by (``MetricSpec.gate_name``)."""
    spec = MetricSpec(name, LOWER, Scope.PERF_BUDGET, description, unit, reading=PerfReading(paths, divisor),
                      measured_by=measured_by, label=label)
    return replace(spec, perf_gate=MetricPolicy(spec.gate_name, gate, **policy)) if gate else spec


def _latency(stat: str, what: str, **policy: Any) -> MetricSpec:
    return _budget(f"{stat}_ms", f"latency {stat}", "ms", "test_latency", ("latency_ms", "summary", stat),
                   description=f"{what} per-call latency of `latency_ms` (entry graph, first batch size x "
                               "sequence length)", gate="latency", **policy)


def _generation_step(key: str, label: str) -> MetricSpec:
    return _budget(f"{key}_ms", f"{label} p50", "ms", "test_generation_perf",
                   (f"latency_ms[gen={key},kv=on]", "summary", "p50"),
                   description=f"p50 {label}, KV cache on (generative models)")


METRICS = MetricRegistry([
    # -- numeric parity (harness/metrics/numeric.py: compare_arrays) -----------------------------------------
    _numeric("max_abs", LOWER, Outputs.ALL, "Largest |got - ref| over valid elements.", "output units"),
    _numeric("mean_abs", LOWER, Outputs.ALL, "Mean |got - ref| over valid elements.", "output units"),
    _numeric("p99_abs", LOWER, Outputs.FLOAT, "99th percentile of |got - ref| (linear interpolation); ignores a "
             "handful of outliers that max_abs would report.", "output units"),
    _numeric("max_rel", LOWER, Outputs.FLOAT, "Largest |got - ref| / (|ref| + eps) with eps = 1e-6 * max|ref|, so "
             "elements of the reference that are ~0 do not turn a tiny absolute error into a huge relative one."),
    _numeric("norm_max_abs", LOWER, Outputs.FLOAT, "max_abs / max|ref|: scale-free, so one threshold fits "
             "random-weight models whose logits are tiny (std ~0.16, PITFALLS #7) and trained models whose "
             "logits are large.", thresholds=Thresholds(fp32=1e-4, fp16=1e-2, int8=0.15, int4=INT4_NORM_MAX_ABS)),
    _numeric("rel_l2", LOWER, Outputs.FLOAT, "||got - ref||_2 / ||ref||_2 over valid elements."),
    _numeric("cosine", HIGHER, Outputs.FLOAT, "Cosine similarity of the flattened valid elements; 1.0 when both "
             "are all zero, 0.0 when exactly one is.", thresholds=Thresholds(fp32=0.99999, fp16=0.9999, int8=0.99,
                                                                    int4=INT4_COSINE),
             bounds=SIMILARITY),
    _numeric("top1_agreement", HIGHER, Outputs.LOGITS, "Fraction of valid positions whose argmax over the last "
             "axis matches.", "fraction", Thresholds(fp32=1.0, fp16=0.98, int8=0.90, int4=INT4_TOP1)),
    _numeric("topk_agreement", HIGHER, Outputs.LOGITS, "Mean over valid positions of |topk(ref) & topk(got)| / k, "
             "k = min(5, last dim).", "fraction"),
    _numeric("kl", LOWER, Outputs.LOGITS, "Mean over valid positions of KL(softmax(ref) || softmax(got)) over the "
             "last axis.", "nats", Thresholds(fp32=1e-6, fp16=1e-3, int8=0.02, int4=INT4_KL)),
    _numeric("kl_max", LOWER, Outputs.LOGITS, "The largest per-position KL divergence.", "nats"),
    _numeric("mismatch_rate", LOWER, Outputs.EXACT, "Fraction of valid elements that differ at all (no tolerance "
             "for token ids and masks).", "fraction"),
    # -- artifact lint (harness/export/lint.py, gated by harness.judge.numeric.lint_result) ---------------------------
    MetricSpec("training_mode_ops", LOWER, Scope.ARTIFACT_LINT, "Training-mode Dropout / random ops in the "
               "exported ONNX graph; must be 0 whatever the runtime's optimisations would delete.", "nodes",
               Thresholds.uniform(0.0)),
    # --- shape coverage (harness/export/lint.py tied_axes, gated by harness.judge.numeric.lint_result) ---
    MetricSpec("tied_axes", LOWER, Scope.ARTIFACT_LINT, "Dynamic axes the artifact names alike although the "
               "model's graph declares them as different lengths (a decoder whose target and source length share "
               "one name, as a widely copied Marian export recipe does): the file fails as soon as they differ. "
               "Must be 0.", "axes", Thresholds.uniform(0.0)),
    MetricSpec("shape_failures", LOWER, Scope.ARTIFACT_LINT, "Shape probes inside the declared dynamic ranges "
               "(decoder target length != source length, other past lengths) the artifact could not run; the "
               "probes that ran are judged with the corpus batches. Must be 0.", "probes", Thresholds.uniform(0.0)),
    MetricSpec("sentences_cut", LOWER, Scope.ARTIFACT_LINT, "Corpus sentences longer than the sequence length a "
               "static-shape artifact bakes in (cut to fit it): the file cannot take them. Must be 0 unless the "
               "artifact's protocol declares the static shape intended (then reported only).", "sentences",
               Thresholds.uniform(0.0)),
    # -- sentence embeddings (harness/zoo/minilm.py: embedding_metrics, models with a pooling recipe) -----------
    MetricSpec("embedding_cosine", HIGHER, Scope.EMBEDDING, "Mean over sentences of the cosine between the "
               "reference's and the variant's pooled sentence embeddings.", "",
               Thresholds(fp32=0.99999, fp16=0.9999, int8=0.93), bounds=SIMILARITY),
    MetricSpec("embedding_cosine_min", HIGHER, Scope.EMBEDDING, "The worst sentence's embedding cosine.", "",
               Thresholds(fp32=0.9999, fp16=0.999, int8=0.90), bounds=SIMILARITY),
    # -- extractive-QA answer spans (harness/metrics/spans.py; a graph's derived ``answer_span``, judged by
    #    harness.judge.numeric.run_graph_parity) ---------------------------------------------------------------
    MetricSpec("span_agreement", HIGHER, Scope.SPAN, "Fraction of question + context rows whose answer span is "
               "the reference's exactly: the (start, end) token pair a QA pipeline returns (transformers' "
               "QuestionAnsweringPipeline: the best start <= end pair of context tokens by start + end logit, "
               "at most 15 tokens; never the question, a special token or padding).", "fraction",
               Thresholds(fp32=1.0, fp16=SPAN_FP16, int8=SPAN_INT8)),
    MetricSpec("span_token_f1", HIGHER, Scope.SPAN, "Mean over rows of the token-overlap F1 of the variant's "
               "span with the reference's (SQuAD's F1, over token positions): a span that moved by one token "
               "keeps partial credit, a disjoint one scores 0.", "fraction"),
    # -- text scores (harness/metrics/text.py: corpus_scores, token_agreement, repetition_rate) ----------------
    _text("bleu", HIGHER, "sacrebleu corpus BLEU; 0 when the corpus has no 4-gram.", "BLEU (0-100)"),
    _text("chrf", HIGHER, "sacrebleu corpus chrF2: character n-grams, robust for CJK.", "chrF (0-100)"),
    _text("ter", LOWER, "sacrebleu corpus TER: word edits (insertions, deletions, substitutions, block shifts) "
          "per reference word, x100; Chinese and Japanese normalised to one edit per character. 0 is identical; "
          "it can exceed 100.", "TER"),
    _text("exact_match", HIGHER, "Fraction of sentences equal to the reference (outer whitespace ignored).",
          "fraction"),
    _text("char_edit_distance", LOWER, "Mean character Levenshtein distance per sentence.", "characters"),
    _text("norm_edit_distance", LOWER, "Mean Levenshtein distance / length of the longer string, per sentence.",
          "fraction"),
    _text("length_ratio", LOWER, "Total hypothesis length / total reference length (characters for zh, "
          "whitespace tokens otherwise). Best at 1; a threshold on it is an upper bound.", "ratio", target=1.0),
    _text("repetition_rate", LOWER, "Fraction of n-grams repeating an earlier one (degenerate loops).",
          "fraction"),
    _text("exact_sequence_match", HIGHER, "Fraction of token sequences identical to PyTorch's.", "fraction"),
    _text("mean_first_divergence", HIGHER, "Mean index of the first token differing from PyTorch (sequence "
          "length when equal).", "tokens"),
    _text("position_match", HIGHER, "Fraction of aligned token positions equal to PyTorch's; positions past the "
          "shorter sequence count as mismatches.", "fraction"),
    # -- generation parity (harness/judge/generation.py: score_rows) -----------------------------------------
    _gen("gen_sentences", LOWER, "Sentences decoded and scored.", "sentences", context=True),
    _gen("gen_token_exact_match", HIGHER, "Fraction of sentences whose token ids equal PyTorch's.", "fraction",
         Thresholds(fp32=1.0), headline=True),
    _gen("gen_position_match", HIGHER, "Fraction of aligned token positions equal to PyTorch's.", "fraction",
         headline=True),
    _gen("gen_mean_first_divergence", HIGHER, "Mean index of the first token differing from PyTorch's.", "tokens"),
    _gen("gen_bleu_vs_torch", HIGHER, "sacrebleu corpus BLEU of the variant's text with PyTorch's as reference "
         "(`tok:zh` for Chinese).", "BLEU (0-100)", Thresholds(fp16=85.0, int8=30.0), headline=True),
    _gen("gen_chrf_vs_torch", HIGHER, "sacrebleu corpus chrF2 of the variant's text with PyTorch's as reference.",
         "chrF (0-100)", headline=True),
    _gen("gen_ter_vs_torch", LOWER, "sacrebleu corpus TER of the variant's text with PyTorch's as reference: the "
         "edits a reviewer would make to turn one into the other.", "TER"),
    _gen("gen_exact_match_vs_torch", HIGHER, "Fraction of sentences whose text equals PyTorch's.", "fraction"),
    _gen("gen_char_edit_vs_torch", LOWER, "Mean character edit distance to PyTorch's text.", "characters"),
    _gen("gen_norm_edit_vs_torch", LOWER, "Mean normalised edit distance to PyTorch's text.", "fraction"),
    _gen("gen_length_ratio_vs_torch", LOWER, "Length of the variant's text / PyTorch's.", "ratio"),
    _gen("gen_bleu_vs_ref", HIGHER, "Corpus BLEU of the variant's text against the corpus references.",
         "BLEU (0-100)", refs=True),
    _gen("gen_chrf_vs_ref", HIGHER, "Corpus chrF2 of the variant's text against the references.", "chrF (0-100)",
         refs=True),
    _gen("gen_ter_vs_ref", LOWER, "Corpus TER of the variant's text against the references.", "TER", refs=True),
    _gen("gen_exact_match_vs_ref", HIGHER, "Fraction of sentences equal to their reference.", "fraction",
         refs=True),
    _gen("gen_norm_edit_vs_ref", LOWER, "Mean normalised edit distance to the references.", "fraction", refs=True),
    _gen("gen_length_ratio_vs_ref", LOWER, "Length of the variant's text / the references'.", "ratio", refs=True),
    _gen("gen_torch_bleu_vs_ref", HIGHER, "PyTorch FP32's own BLEU against the references, for context.",
         "BLEU (0-100)", refs=True, context=True),
    _gen("gen_torch_exact_match_vs_ref", HIGHER, "PyTorch FP32's own exact match against the references, for "
         "context.", "fraction", refs=True, context=True),
    _gen("gen_bleu_ref_drop", LOWER, "BLEU points lost against the references: PyTorch's minus the variant's.",
         "BLEU points", Thresholds(fp16=1.0, int8=2.0), refs=True, headline=True),
    _gen("gen_repetition_rate", LOWER, "Mean 3-gram repetition of the variant's text (words; characters for "
         "Chinese).", "fraction"),
    _gen("gen_torch_repetition_rate", LOWER, "The same for PyTorch's text, for context.", "fraction",
         context=True),
    _gen("gen_repetition_increase", LOWER, "The variant's repetition minus PyTorch's: catches low-precision "
         "decoders that start looping.", "fraction", Thresholds(fp16=0.02, int8=0.05), headline=True),
    _gen("gen_long_sentences", LOWER, "Sentences with 30+ source words (where INT8 was seen to repeat words).",
         "sentences", context=True),
    _gen("gen_token_exact_match_long", HIGHER, "gen_token_exact_match on the 30+ word sentences.", "fraction"),
    _gen("gen_bleu_vs_torch_long", HIGHER, "gen_bleu_vs_torch on the 30+ word sentences.", "BLEU (0-100)"),
    # -- perf budgets (suites/test_perf.py; harness/perf/budgets.py enforces them) ----------------------------
    # With the perf gate's policy of each number against a baseline (harness.gate.compare; the defaults
    # and their reasons are in docs/perf-gate.md, the numbers from scripts/bench_gate_power.py on a
    # shared 2-core CPU box). A latency policy judges its statistic of every latency_ms* series.
    _latency("p50", "Median", min_effect=0.05),
    _latency("p90", "90th percentile", min_effect=0.10),
    _latency("p95", "95th percentile", min_effect=0.10),
    _latency("p99", "99th percentile", min_effect=0.20, advisory=True, gate_when_precise=True),
    _latency("mean", "Mean", min_effect=0.05, advisory=True),
    _budget("load_ms", "cold-start load", "ms", "test_cold_start_memory", ("cold_start_ms", "load"),
            description="Fresh process: sessions created / weights loaded, every graph (median over processes)",
            gate="cold", min_effect=0.25, advisory=True),
    _budget("first_inference_ms", "cold-start first inference", "ms", "test_cold_start_memory",
            ("cold_start_ms", "first_inference"),
            description="Fresh process: the first call of every graph (median over processes)",
            gate="cold", min_effect=0.25, advisory=True),
    _budget("cold_start_ms", "cold start (load + first inference)", "ms", "test_cold_start_memory",
            ("cold_start_ms", "load"), ("cold_start_ms", "first_inference"),
            description="Fresh process: loaded and answered once, load_ms + first_inference_ms"),
    _budget("peak_rss_mb", "peak RSS (MiB)", "MiB", "test_cold_start_memory", ("peak_rss_bytes",), divisor=MiB,
            description="Peak resident memory of a fresh process that loaded the variant and ran it",
            gate="memory", min_effect=0.05, min_abs=32 * MiB),
    _budget("artifact_mb", "artifact size (MiB)", "MiB", "test_cold_start_memory", ("artifact_bytes",),
            divisor=MiB, description="Bytes on disk of what the variant ships (ONNX files with external data, or "
                                     "the PyTorch weight files)",
            gate="size", min_effect=0.01),
    _budget("served_ms_per_request", "served cost per request at the sustainable rate", "ms", "check_perf",
            ("serving_rate", "ms_per_request"),
            description="1000 / the highest offered request rate whose p99 met `--p99-budget` (`harness check "
                        "--endpoint --perf --request-rate`, harness/serving/rate.py): lower is more requests/s "
                        "sustained", gate="load", min_effect=0.10),
    _generation_step("ttft", "time to first token"),
    _generation_step("tpot", "time per output token"),
])


# --- accuracy-baseline margins (harness.gate.accuracy; docs/accuracy-gate.md) --------------------
# How far each metric may move against a blessed baseline: its badness (distance from the ideal) may
# grow by at most max(rel x baseline badness, floor at the precision). Floors of continuous metrics come
# from scripts/measure_accuracy_noise.py on the default zoo (32 sentences): FP32 = 2 x the largest
# movement across thread counts (1 vs 2) and ORT optimisation levels (float32 rounding of another kernel
# is no regression), FP16/INT8 = max(FP32 floor, 2 x the largest movement across thread counts), each
# rounded up to 1-2-5. rel 25%: the largest relative movement of an error well above its floor was 7%.
# Discrete metrics (agreements, decoded text) did not move at all; their floors are a resolution of the
# default 32-sentence corpus (about two sentences). Metrics without a margin (context numbers) are listed,
# never judged.
FP32 = (Precision.FP32,)
_UNIT = 1.0  # the ideal of a similarity / agreement / fraction-equal
_PCT = 100.0  # the ideal of BLEU and chrF
_MARGINS: dict[str, Margin] = {
    # numeric parity: errors of an output against PyTorch FP32 (measured floors)
    "max_abs": Margin(0.25, Thresholds(1e-5, 1e-5, 1e-5)),
    "mean_abs": Margin(0.25, Thresholds(5e-8, 5e-8, 5e-8)),
    "p99_abs": Margin(0.25, Thresholds(5e-7, 5e-7, 5e-7)),
    # one near-zero reference element decides it: thread counts alone moved INT8 max_rel by 93
    "max_rel": Margin(1.0, Thresholds(0.05, 2.0, 200.0), advisory=True),
    "norm_max_abs": Margin(0.25, Thresholds(5e-7, 5e-7, 5e-7)),
    "rel_l2": Margin(0.25, Thresholds(1e-7, 1e-7, 1e-7)),
    "cosine": Margin(0.25, Thresholds(1e-13, 5e-11, 1e-8), ideal=_UNIT),
    "kl": Margin(0.25, Thresholds(2e-13, 2e-13, 2e-13)),
    "kl_max": Margin(0.25, Thresholds(2e-11, 2e-11, 2e-11)),
    # discrete: one flipped position of 32 sentences is tolerated at FP16/INT8, none at FP32
    "top1_agreement": Margin(0.25, Thresholds(0.0, 0.05, 0.05), ideal=_UNIT, exact=FP32),
    "topk_agreement": Margin(0.25, Thresholds(0.0, 0.05, 0.05), ideal=_UNIT, exact=FP32),
    "mismatch_rate": Margin(0.25, Thresholds(0.0, 0.05, 0.05), exact=FP32),
    "training_mode_ops": Margin(0.0, Thresholds.uniform(0.0)),
    # shape coverage (counts that must stay 0): any growth is a regression
    "tied_axes": Margin(0.0, Thresholds.uniform(0.0)),
    "shape_failures": Margin(0.0, Thresholds.uniform(0.0)),
    "sentences_cut": Margin(0.0, Thresholds.uniform(0.0)),
    # sentence embeddings (measured floors)
    "embedding_cosine": Margin(0.25, Thresholds(1e-13, 5e-11, 2e-8), ideal=_UNIT),
    "embedding_cosine_min": Margin(0.25, Thresholds(5e-13, 1e-9, 5e-8), ideal=_UNIT),
    # answer spans: discrete, like top-1 agreement (none may move at FP32)
    "span_agreement": Margin(0.25, Thresholds(0.0, 0.05, 0.05), ideal=_UNIT, exact=FP32),
    "span_token_f1": Margin(0.25, Thresholds(0.0, 0.05, 0.05), ideal=_UNIT, exact=FP32),
    # text building blocks (harness check / config thresholds): about two sentences of 32
    "bleu": Margin(0.25, Thresholds(0.0, 3.0, 3.0), ideal=_PCT, exact=FP32),
    "chrf": Margin(0.25, Thresholds(0.0, 2.0, 2.0), ideal=_PCT, exact=FP32),
    "ter": Margin(0.25, Thresholds(0.0, 3.0, 3.0), exact=FP32),
    "exact_match": Margin(0.25, Thresholds(0.0, 0.07, 0.07), ideal=_UNIT, exact=FP32),
    "char_edit_distance": Margin(0.25, Thresholds(0.0, 0.5, 0.5), exact=FP32),
    "norm_edit_distance": Margin(0.25, Thresholds(0.0, 0.02, 0.02), exact=FP32),
    "length_ratio": Margin(0.25, Thresholds(0.0, 0.02, 0.02), exact=FP32),
    "repetition_rate": Margin(0.25, Thresholds(0.0, 0.02, 0.02)),
    "exact_sequence_match": Margin(0.25, Thresholds(0.0, 0.07, 0.07), ideal=_UNIT, exact=FP32),
    "mean_first_divergence": Margin(0.25, Thresholds(0.0, 1.0, 1.0)),
    "position_match": Margin(0.25, Thresholds(0.0, 0.03, 0.03), ideal=_UNIT, exact=FP32),
    # generation parity against PyTorch's text (exact at FP32: greedy tokens must stay PyTorch's)
    "gen_token_exact_match": Margin(0.25, Thresholds(0.0, 0.07, 0.07), ideal=_UNIT, exact=FP32),
    "gen_position_match": Margin(0.25, Thresholds(0.0, 0.03, 0.03), ideal=_UNIT, exact=FP32),
    "gen_mean_first_divergence": Margin(0.25, Thresholds(0.0, 1.0, 1.0)),
    "gen_bleu_vs_torch": Margin(0.25, Thresholds(0.0, 3.0, 3.0), ideal=_PCT, exact=FP32),
    "gen_chrf_vs_torch": Margin(0.25, Thresholds(0.0, 2.0, 2.0), ideal=_PCT, exact=FP32),
    "gen_ter_vs_torch": Margin(0.25, Thresholds(0.0, 3.0, 3.0), exact=FP32),
    "gen_exact_match_vs_torch": Margin(0.25, Thresholds(0.0, 0.07, 0.07), ideal=_UNIT, exact=FP32),
    "gen_char_edit_vs_torch": Margin(0.25, Thresholds(0.0, 0.5, 0.5), exact=FP32),
    "gen_norm_edit_vs_torch": Margin(0.25, Thresholds(0.0, 0.02, 0.02), exact=FP32),
    "gen_length_ratio_vs_torch": Margin(0.25, Thresholds(0.0, 0.02, 0.02), ideal=1.0, exact=FP32),
    # generation against the corpus references (the reference's own quality is context, not judged)
    "gen_bleu_vs_ref": Margin(0.1, Thresholds(2.0, 2.0, 2.0), ideal=_PCT),
    "gen_chrf_vs_ref": Margin(0.1, Thresholds(2.0, 2.0, 2.0), ideal=_PCT),
    "gen_ter_vs_ref": Margin(0.1, Thresholds(2.0, 2.0, 2.0)),
    "gen_exact_match_vs_ref": Margin(0.25, Thresholds(0.07, 0.07, 0.07), ideal=_UNIT),
    "gen_norm_edit_vs_ref": Margin(0.25, Thresholds(0.02, 0.02, 0.02)),
    "gen_length_ratio_vs_ref": Margin(0.25, Thresholds(0.02, 0.02, 0.02), ideal=1.0),
    "gen_bleu_ref_drop": Margin(0.25, Thresholds(1.0, 1.0, 1.0)),
    "gen_repetition_rate": Margin(0.25, Thresholds(0.02, 0.02, 0.02)),
    "gen_repetition_increase": Margin(0.25, Thresholds(0.02, 0.02, 0.02)),
    "gen_token_exact_match_long": Margin(0.25, Thresholds(0.0, 0.1, 0.1), ideal=_UNIT, exact=FP32),
    "gen_bleu_vs_torch_long": Margin(0.25, Thresholds(0.0, 5.0, 5.0), ideal=_PCT, exact=FP32),
}
METRICS = MetricRegistry(replace(s, margin=_MARGINS.pop(s.name, s.margin)) for s in METRICS)
if _MARGINS:  # pragma: no cover - a typo in the table above
    raise ValueError(f"margins declared for unknown metrics: {', '.join(_MARGINS)}")

def metric(name: str) -> MetricSpec:
    """The declaration of ``name``; an unknown name is a UsageError with a did-you-mean."""
    return METRICS.lookup(name)


def gate(name: str, threshold: float) -> Check:
    """The check on ``name`` at ``threshold``, built by its declaration (``MetricSpec.check``). A
    name qualified by the part of a case it gates (``cached_decoding.logits.cosine``) is the
    metric after the last dot; an unknown metric is a UsageError with a did-you-mean."""
    within, _, base = name.rpartition(".")
    return metric(base).check(threshold, within=within)


def perf_policies() -> dict[str, MetricPolicy]:
    """The perf gate's default policies by the gate's names (``p50``, ``peak_rss_bytes``), in
    declaration order: derived from the budgets that declare one."""
    return {s.perf_gate.name: s.perf_gate for s in METRICS.of(Scope.PERF_BUDGET) if s.perf_gate is not None}


def tolerance_names() -> tuple[str, ...]:
    """What a tolerance may name: the config file, ``ModelSpec.tolerances``, ``harness check --tolerance``."""
    return METRICS.names(*TOLERANCE_SCOPES)


def budget_names() -> tuple[str, ...]:
    """What a ``[budgets]`` table / ``ModelSpec.budgets`` may name."""
    return METRICS.names(Scope.PERF_BUDGET)


def tensor_metric_names() -> tuple[str, ...]:
    """Numeric metrics of any float tensor (not logits-only, not integer-only): ``harness bisect``'s."""
    return tuple(s.name for s in METRICS.of(Scope.NUMERIC) if s.outputs in (Outputs.ALL, Outputs.FLOAT))
