"""Generation parity: decode a corpus with a variant and score its text against PyTorch FP32.

Equal logits on one step are not enough for translation and LLM decoding: small errors
compound over steps, and what users ship is text. So a variant decodes a fixed corpus
with the same loop as the PyTorch FP32 reference (``harness.generation``), and its
output is scored against the reference's output (BLEU, chrF, edit distance, exact
match, first divergent token, repetition) and, where the corpus has references, against
those. Gates are per precision (declared in ``harness.metrics.registry``), overridable per model through
``ModelSpec.tolerances`` with the ``gen_*`` metric names.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from harness.core import Check, Precision, Settings, Variant, describe_error, precision_overrides
from harness.core.cachedir import source_digest
from harness.core.phases import phase
from harness.families import family_for
from harness.generation import Decoded, GenerationSettings, decode_texts, settings_for_model
from harness.generation.decode import load_runners, torch_threads
from harness.generation.forensics import investigate, pick_rows
from harness.judge.cached_decoding import NAME, ReferenceSteps, cached_decoding
from harness.judge.coverage import generation_coverage
from harness.judge.decoding import decode_parts, decode_threads
from harness.metrics import text as text_metrics
from harness.metrics.registry import METRICS, Scope
from harness.metrics.text import (
    corpus_scores,
    first_divergence,
    is_unspaced,
    repetition_rate,
    sentence_edit,
    target_language,
    token_agreement,
    worst_pairs,
)
from harness.results.checks import CheckResult, raise_failures
from harness.results.coverage import Coverage
from harness.results.sections import Generation
from harness.runners import PROVIDERS
from harness.runners.base import GraphRef
from harness.zoo.consistency import check_generation, limits_of

if TYPE_CHECKING:  # pragma: no cover
    from harness.data.corpus import Corpus
    from harness.families import Family
    from harness.families.steppers import Start
    from harness.generation.forensics import SentenceForensics
    from harness.judge.cached_decoding import CachedDecoding, RecordedSide
    from harness.judge.workspace import Workspace
    from harness.zoo.loading import LoadedModel

#: Default generation gates per precision, declared with the metrics in ``harness.metrics.registry``
#: (docs/generation.md has the measurements behind them). FP32 must reproduce PyTorch's greedy
#: tokens exactly; reduced precisions are judged on the text: how much of PyTorch's output survives
#: (BLEU vs PyTorch), how much quality against the references is lost (BLEU points), and whether the
#: output starts looping.
GEN_TOLERANCES: dict[Precision, dict[str, float]] = {p: METRICS.defaults(p, Scope.GENERATION) for p in Precision}

#: How much a default run decodes; a model's ``extra["generation"]`` and the pytest
#: options override these. ``samples`` None decodes the whole corpus.
DEFAULT_REQUEST: dict[str, Any] = {"samples": 48, "max_new_tokens": 32, "batch_size": 16, "use_cache": True,
                                   "num_beams": 1, "worst": 5}

#: metrics that only exist when the corpus has references
REFERENCE_METRICS = frozenset(s.name for s in METRICS.of(Scope.GENERATION) if s.needs_references)

LONG_SOURCE_WORDS = 30  # INT8 was seen to repeat words on sentences this long


@dataclass(frozen=True)
class GenerationRequest:
    """What a run asks for (pytest options); None leaves the model's / default choice."""

    samples: int | None = None
    max_new_tokens: int | None = None
    num_beams: int | None = None
    use_cache: bool | None = None
    repetition_penalty: float | None = None
    batch_size: int | None = None
    worst: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> "GenerationRequest":
        """The run's ``gen_*`` options (``harness.settings.options``, group ``gen``)."""
        cache = settings.gen_cache
        return cls(samples=settings.gen_samples, max_new_tokens=settings.gen_max_new_tokens,
                   num_beams=settings.gen_beams, use_cache=None if cache is None else cache == "on",
                   repetition_penalty=settings.gen_repetition_penalty, batch_size=settings.gen_batch_size,
                   worst=settings.gen_worst)

    def resolved(self, model: "LoadedModel") -> dict[str, Any]:
        """Defaults < the model's ``extra["generation"]`` < this request."""
        out = dict(DEFAULT_REQUEST)
        out.update(dict(model.spec.extra.get("generation", {}) or {}))
        out.update({k: v for k, v in self.__dict__.items() if v is not None})
        return out


def gen_checks(precision: Precision, overrides: Mapping[str, Mapping[str, float]] | None = None, *,
               has_references: bool = True) -> tuple[Check, ...]:
    """Gates for ``precision``: defaults merged with the model's ``gen_*`` overrides.

    Checks against references are dropped for a corpus without references; any other
    gated metric that is missing fails (NaN never passes).
    """
    values = dict(GEN_TOLERANCES[precision])
    for metric, threshold in precision_overrides(overrides, precision).items():
        if metric.startswith("gen_"):  # other scopes' overrides belong to other gates; a typo is an error
            values[metric] = threshold
    specs = {m: METRICS.lookup(m, Scope.GENERATION, what="generation metric") for m in values}
    return tuple(specs[m].check(t) for m, t in values.items() if has_references or not specs[m].needs_references)


def select_indices(total: int, samples: int | None) -> list[int]:
    """``samples`` indices spread evenly over the corpus (all when None or >= total), so a
    bounded run still sees short and long sentences in their corpus proportions."""
    if samples is None or samples <= 0 or samples >= total:
        return list(range(total))
    return sorted({round(i * (total - 1) / (samples - 1)) for i in range(samples)}) if samples > 1 else [0]


# -- scoring ---------------------------------------------------------------------------------
#: a text score's name inside the generation metrics named after it (``gen_char_edit_vs_torch``)
_SHORT_NAMES = {"char_edit_distance": "char_edit", "norm_edit_distance": "norm_edit"}


def _declared(scores: Mapping[str, float], against: str) -> dict[str, float]:
    """``gen_<score>_<against>`` for every text score the registry declares such a generation metric
    for: declaring ``gen_ter_vs_ref`` is what makes the scorer report TER against the references."""
    named = {f"gen_{_SHORT_NAMES.get(name, name)}_{against}": value for name, value in scores.items()}
    return {key: value for key, value in named.items() if key in METRICS}


def score_rows(rows: Sequence[Mapping[str, Any]], lang: str | None) -> tuple[dict[str, float], dict[str, str]]:
    """All generation metrics from decoded rows (``source``, ``reference``, ``pytorch``,
    ``variant`` texts and ``pytorch_tokens``/``variant_tokens``): the one scorer used live
    and when re-scoring a saved ``decoded.jsonl``."""
    torch_text = [r["pytorch"] for r in rows]
    var_text = [r["variant"] for r in rows]
    metrics: dict[str, float] = {"gen_sentences": float(len(rows))}
    signatures: dict[str, str] = {}
    agree = token_agreement([r["pytorch_tokens"] for r in rows], [r["variant_tokens"] for r in rows])
    metrics["gen_token_exact_match"] = agree["exact_sequence_match"]
    metrics["gen_position_match"] = agree["position_match"]
    metrics["gen_mean_first_divergence"] = agree["mean_first_divergence"]
    vs_torch = corpus_scores(var_text, torch_text, lang=lang)
    metrics.update(_declared(vs_torch.metrics, "vs_torch"))
    signatures.update({f"{k}_vs_torch": v for k, v in vs_torch.signatures.items()})
    given = [r.get("reference") for r in rows]
    refs = [ref for ref in given if ref is not None]
    if len(refs) == len(given):
        vs_ref = corpus_scores(var_text, refs, lang=lang)
        torch_ref = corpus_scores(torch_text, refs, lang=lang)
        metrics.update(_declared(vs_ref.metrics, "vs_ref"))
        metrics["gen_torch_bleu_vs_ref"] = torch_ref.metrics["bleu"]
        metrics["gen_torch_exact_match_vs_ref"] = torch_ref.metrics["exact_match"]
        metrics["gen_bleu_ref_drop"] = torch_ref.metrics["bleu"] - vs_ref.metrics["bleu"]
        signatures.update({f"{k}_vs_ref": v for k, v in vs_ref.signatures.items()})
    zh = is_unspaced(lang)

    def units(text: str) -> Sequence[str]:  # Chinese, Japanese...: characters; else words
        return text.replace(" ", "") if zh else text.split()

    def mean_repetition(texts: Sequence[str]) -> float:
        return sum(repetition_rate(units(t)) for t in texts) / len(texts)

    metrics["gen_repetition_rate"] = mean_repetition(var_text)
    metrics["gen_torch_repetition_rate"] = mean_repetition(torch_text)
    metrics["gen_repetition_increase"] = metrics["gen_repetition_rate"] - metrics["gen_torch_repetition_rate"]
    long_rows = [r for r in rows if len(r["source"].split()) >= LONG_SOURCE_WORDS]
    if long_rows:
        metrics["gen_long_sentences"] = float(len(long_rows))
        metrics["gen_token_exact_match_long"] = token_agreement(
            [r["pytorch_tokens"] for r in long_rows], [r["variant_tokens"] for r in long_rows])["exact_sequence_match"]
        metrics["gen_bleu_vs_torch_long"] = corpus_scores(
            [r["variant"] for r in long_rows], [r["pytorch"] for r in long_rows], lang=lang).metrics["bleu"]
    return metrics, signatures


def cached_scores(ws: "Workspace", rows: Sequence[Mapping[str, Any]], lang: str | None
                  ) -> tuple[dict[str, float], dict[str, str]]:
    """``score_rows`` through the workspace's store: the scores are a pure function of the rows'
    texts and tokens, the language, sacrebleu / rapidfuzz versions and the scoring code, and
    corpus BLEU/chrF over a corpus is the largest piece of work left in a warm rerun."""
    import rapidfuzz
    import sacrebleu


    keep = ("source", "reference", "pytorch", "variant", "pytorch_tokens", "variant_tokens")
    digest = hashlib.sha256(json.dumps([[r.get(k) for k in keep] for r in rows], ensure_ascii=False).encode())
    parts = {"rows": digest.hexdigest(), "lang": lang, "sacrebleu": sacrebleu.__version__, "rapidfuzz": rapidfuzz.__version__,
             "scoring": [source_digest(score_rows), source_digest(text_metrics)]}
    value = ws.references.json("scores", parts, lambda: list(score_rows(rows, lang)))
    return dict(value[0]), dict(value[1])


def make_rows(indices: Sequence[int], sources: Sequence[str], references: Sequence[str] | None,
              reference: Decoded, variant: Decoded, piece: Callable[[int], str] = str) -> list[dict[str, Any]]:
    """One row per sentence; ``piece`` names a token id (the tokenizer's token string)."""
    rows = []
    for k, (i, src) in enumerate(zip(indices, sources)):
        pt, var = reference.tokens[k], variant.tokens[k]
        first = first_divergence(pt, var)
        dist, norm = sentence_edit(variant.texts[k], reference.texts[k])
        at = None if first is None else [piece(t[first]) if first < len(t) else "<end>" for t in (pt, var)]
        rows.append({"index": i, "source": src, "reference": references[k] if references is not None else None,
                     "pytorch": reference.texts[k], "variant": variant.texts[k], "pytorch_tokens": pt,
                     "variant_tokens": var, "first_divergence": first, "divergent_pieces": at,
                     "edit_distance": dist, "norm_edit_distance": norm})
    return rows


def read_decoded(path: Path) -> list[dict[str, Any]]:
    """Rows of a case's ``decoded.jsonl`` (to re-score a run without decoding again)."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def write_decoded(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    with Path(path).open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


# -- the result and its gate -----------------------------------------------------------------
@dataclass
class GenerationResult:
    variant: str
    metrics: dict[str, float]
    checks: tuple[Check, ...]
    rows: list[dict[str, Any]]
    signatures: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    worst: list[dict[str, Any]] = field(default_factory=list)
    #: the worst diverging sentences at their first divergent step (failing cases only)
    forensics: list["SentenceForensics"] = field(default_factory=list)
    forensics_note: str | None = None  # why a failing case has no forensics (the replay itself failed)
    #: whether generation was gated at all (``harness.judge.coverage``); None: not accounted
    coverage: Coverage | None = None
    #: the closed-loop cached-decoding check (``harness.judge.cached_decoding``); None: not run
    cached: CachedDecoding | None = None

    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passes(self.metrics.get(c.metric, math.nan))]

    def coverage_problem(self) -> str | None:
        return self.coverage.problem() if self.coverage is not None else None

    @property
    def passed(self) -> bool:
        return not self.failed_checks() and self.coverage_problem() is None

    def thresholds(self) -> dict[str, dict[str, Any]]:
        return {c.metric: {"threshold": c.threshold, "op": c.symbol} for c in self.checks}

    def first_divergence(self) -> str:
        """Where the variant first left PyTorch's path: sentence, token position, the two tokens."""
        for row in self.rows:
            pos = row["first_divergence"]
            if pos is None:
                continue
            pt, var = row["pytorch_tokens"], row["variant_tokens"]
            ours = pt[pos] if pos < len(pt) else "<end>"
            theirs = var[pos] if pos < len(var) else "<end>"
            pieces = row.get("divergent_pieces") or ["", ""]
            ours, theirs = (f"{t} {p!r}" if p and p != "<end>" else str(t) for t, p in zip((ours, theirs), pieces))
            return (f"first divergence: sentence {row['index']} at token {pos} (pytorch {ours} vs variant {theirs}); "
                    f"source {_clip(row['source'])!r}; pytorch {_clip(row['pytorch'])!r}; "
                    f"variant {_clip(row['variant'])!r}")
        return "no token diverged"

    def assert_ok(self) -> None:
        failed = self.failed_checks()
        problem = self.coverage_problem()
        if failed or problem:
            lines = [CheckResult(c.metric, self.metrics.get(c.metric, math.nan), c.symbol, c.threshold).message()
                     for c in failed] + ([problem] if problem else [])
            trailer = [self.first_divergence()]
            if self.cached is not None and any(c.metric.startswith("cached_decoding.") for c in failed):
                trailer.insert(0, "cached-decoding check failed: " + self.cached.describe())
            if self.forensics:
                trailer += ["divergent steps (teacher-forced top-k: id 'token' logit (log-prob)):"]
                trailer += [f.describe() for f in self.forensics]
            elif self.forensics_note:
                trailer.append(self.forensics_note)
            raise_failures(self.variant, lines, "generation check(s) failed", trailer=trailer)


def _clip(text: str | None, n: int = 80) -> str:
    text = text or ""
    return text if len(text) <= n else text[: n - 1] + "…"


# -- running it ------------------------------------------------------------------------------
def reference_decode(ws: "Workspace", model: "LoadedModel", indices: Sequence[int], texts: Sequence[str],
                     settings: GenerationSettings, batch_size: int,
                     observe: "Callable[[Start], Start] | None" = None) -> Decoded:
    """PyTorch FP32 decode of the *correct* graphs, memoised per model, texts and settings in
    the process and kept in the workspace's reference cache across runs (keyed by weights,
    model files, texts and their corpus indices, decode settings, batch size, threads and
    library versions: ``harness.judge.refcache``). ``observe`` sees each batch's steps when the
    decode is computed now (not when it is read from a cache)."""
    key = ("gen-reference", tuple(indices), settings.key(), batch_size)
    if key not in model.cache:
        family = family_for(model.family)

        def compute() -> dict[str, Any]:
            variant = Variant(model.name, Precision.FP32, PROVIDERS["torch_cpu"])
            assert not model.model.training, "reference model left training mode"
            return _as_json(decode_texts(ws.backend(variant, model), model, family, variant, texts, settings,
                                         batch_size, decode_threads(ws), observe))

        parts = decode_parts(ws, model, family, indices, texts, settings, batch_size)
        model.cache[key] = _decoded(ws.references.json(f"{model.name}-decode", parts, compute))
    decoded: Decoded = model.cache[key]
    return decoded


def _decoded(value: Mapping[str, Any]) -> Decoded:
    return Decoded([list(map(int, t)) for t in value["tokens"]], list(value["texts"]), float(value["seconds"]),
                   int(value["calls"]), dict(value["artifacts"]))


def _as_json(decoded: Decoded) -> dict[str, Any]:
    return {"tokens": decoded.tokens, "texts": decoded.texts, "seconds": decoded.seconds, "calls": decoded.calls,
            "artifacts": decoded.artifacts}


def variant_decode(ws: "Workspace", model: "LoadedModel", family: "Family", variant: Variant,
                   indices: Sequence[int], texts: Sequence[str], settings: GenerationSettings,
                   batch_size: int) -> Decoded:
    """The variant's decode of ``texts``. When every graph decoding runs has deterministic
    outputs (``Backend.outputs_key``), the decode is kept in the output cache: a warm rerun of an
    unchanged variant replays it (``Decoded.seconds`` is then the decode's measured time, and
    the artifacts are re-read from the artifact cache)."""
    backend = ws.backend(variant, model)
    wanted = family.generation_graphs(settings.use_cache)
    graphs = [g for g in family.graphs(model) if g.name in wanted]
    keys = {g.name: backend.outputs_key(GraphRef(model, family, g, variant)) for g in graphs}
    if any(k is None for k in keys.values()):
        ws.memory.before_session(backend, model, family, variant, graphs)
        return decode_texts(backend, model, family, variant, texts, settings, batch_size, decode_threads(ws))
    parts = {**decode_parts(ws, model, family, indices, texts, settings, batch_size), "variant": keys}
    fresh: list[Decoded] = []

    def compute() -> dict[str, Any]:
        ws.memory.before_session(backend, model, family, variant, graphs)
        fresh.append(decode_texts(backend, model, family, variant, texts, settings, batch_size, decode_threads(ws)))
        return _as_json(fresh[0])

    value = ws.references.json(f"{model.name}-decode-{variant.precision.value}-{variant.provider.short}", parts,
                               compute)
    if fresh:
        return fresh[0]
    decoded = _decoded(value)
    decoded.artifacts = {k: v for g in graphs for k, v in backend.artifacts(GraphRef(model, family, g, variant)).items()}
    decoded.replayed = True
    return decoded


def decode_plan(ws: "Workspace", model: "LoadedModel", request: GenerationRequest | None
                ) -> tuple[dict[str, Any], GenerationSettings, list[int], list[str]]:
    """What a case decodes and how: (resolved request, settings, corpus indices, source texts)."""
    wanted = (request or GenerationRequest()).resolved(model)
    settings = settings_for_model(model.generation_source(), max_new_tokens=wanted["max_new_tokens"],
                                  num_beams=wanted["num_beams"], use_cache=wanted["use_cache"],
                                  repetition_penalty=wanted.get("repetition_penalty"))
    # more new tokens than learned positions: one line naming both, not an IndexError mid-decode
    check_generation(model.path, limits_of(model.path, model.config), settings.max_new_tokens,
                     option="generation max_new_tokens")
    # a decoder-only prompt is cut so prompt + new tokens fit the positions (recorded)
    wanted = {**wanted, "budget": ws.family(model).generation_budget(model, settings.max_new_tokens).as_dict()}
    corpus = ws.corpora.corpus(model)
    indices = select_indices(len(corpus.sources), wanted["samples"])
    return wanted, settings, indices, [corpus.sources[i] for i in indices]


def generation_parity(ws: "Workspace", variant: Variant, request: GenerationRequest | None = None,
                      family: "Family | None" = None) -> GenerationResult:
    """Decode the model's corpus with ``variant`` and with PyTorch FP32, score, attach gates."""
    model = ws.model(variant.model)
    family = family or ws.family(model)
    wanted, settings, indices, texts = decode_plan(ws, model, request)
    corpus = ws.corpora.corpus(model)
    began = time.perf_counter()
    # the variant's own cache, fed back (closed loop): a backend running the PyTorch module itself
    # decodes with transformers' cache, the reference's own code
    closed_loop = settings.use_cache and not ws.backend(variant, model).uses_torch_module
    steps = None
    if closed_loop and settings.num_beams == 1:  # the closed loop's reference side is this decode's steps
        steps = ReferenceSteps()
    with phase("reference"):
        reference = reference_decode(ws, model, indices, texts, settings, wanted["batch_size"], steps)
    ref_seconds = time.perf_counter() - began
    with phase("variant"):
        got = variant_decode(ws, model, family, variant, indices, texts, settings, wanted["batch_size"])
    with phase("metrics"):
        result = judged_generation(ws, variant, model, corpus, indices, texts, settings, wanted, reference, got,
                                   ref_seconds)
    if closed_loop:
        recorded = steps.sides(reference.tokens, int(wanted["batch_size"])) if steps is not None else None
        with phase("variant"):
            _add_cached_decoding(ws, model, family, variant, reference, texts, settings, int(wanted["batch_size"]),
                                 result, recorded)
    if not result.passed:  # only a failing case pays for the replay
        with phase("variant"):
            try:
                result.forensics = divergence_forensics(ws, model, family, variant, result.rows, texts, settings,
                                                        int(wanted["batch_size"]))
            except Exception as exc:  # noqa: BLE001 - evidence for a verdict already reached: never turn a fail into an error

                result.forensics_note = f"forensics unavailable: {describe_error(exc)}"
    return result


def _add_cached_decoding(ws: "Workspace", model: "LoadedModel", family: "Family", variant: Variant,
                         reference: Decoded, texts: Sequence[str], settings: GenerationSettings, batch_size: int,
                         result: GenerationResult, recorded: "Sequence[RecordedSide] | None" = None) -> None:
    """Judge the variant's KV cache in a closed loop (``harness.judge.cached_decoding``): its
    gates join the generation checks and it counts as gated coverage."""
    loop = cached_decoding(ws, model, family, variant, reference.tokens, texts, settings, batch_size, recorded)
    result.metrics.update(loop.metrics)
    result.checks = (*result.checks, *loop.checks)
    result.settings[NAME] = loop.as_dict()
    result.cached = loop
    if result.coverage is not None:
        gated = any(not math.isnan(result.metrics[c.metric]) for c in loop.checks)
        result.coverage = replace(result.coverage, required=(*result.coverage.required, NAME),
                                  gated=(*result.coverage.gated, NAME) if gated else result.coverage.gated,
                                  measured={**result.coverage.measured,
                                            **({} if gated else {NAME: "nothing compared in the closed loop"})})


def divergence_forensics(ws: "Workspace", model: "LoadedModel", family: "Family", variant: Variant,
                         rows: Sequence[Mapping[str, Any]], texts: Sequence[str], settings: GenerationSettings,
                         batch_size: int) -> list["SentenceForensics"]:
    """Both sides' top-k at the first divergent step of the worst diverging sentences
    (``harness.generation.forensics``): PyTorch FP32 and the variant, each replayed
    teacher-forced on its own decode's history in the batch the sentence was decoded in."""

    if not pick_rows(rows):
        return []

    starters = []
    reference = Variant(model.name, Precision.FP32, PROVIDERS["torch_cpu"])
    with ExitStack() as stack:
        stack.enter_context(torch_threads(decode_threads(ws)))
        # the reference decoded the model's own family's graphs (``reference_decode``), the variant the case's
        for side, fam in ((reference, family_for(model.family)), (variant, family)):
            runners, _ = load_runners(ws.backend(side, model), model, fam, side, settings.use_cache, stack)
            starters.append(fam.starter(model, runners, settings.decoder_start_token_id))
        return investigate(starters[0], starters[1],
                           lambda batch: family.generation_prompts(model, batch, settings.max_new_tokens), texts, rows,
                           settings, batch_size, model.tokenizer.convert_ids_to_tokens)


def judged_generation(ws: "Workspace", variant: Variant, model: "LoadedModel", corpus: "Corpus", indices: Sequence[int],
            texts: Sequence[str], settings: GenerationSettings, wanted: Mapping[str, Any], reference: Decoded,
            got: Decoded, ref_seconds: float) -> GenerationResult:
    refs = [corpus.references[i] for i in indices] if corpus.references is not None else None
    rows = make_rows(indices, texts, refs, reference, got, model.tokenizer.convert_ids_to_tokens)
    lang, lang_from = target_language(ws.options.settings.target_lang, model.spec.target_lang, refs, reference.texts)
    metrics, signatures = cached_scores(ws, rows, lang)
    signatures["target_lang"] = f"{lang or 'spaced script'} ({lang_from})"
    worst = worst_pairs(texts, refs if refs is not None else [""] * len(texts), reference.texts, got.texts,
                        n=int(wanted["worst"]))
    if refs is None:
        for pair in worst:
            pair["reference"] = None
    seconds = {"reference_decode": round(ref_seconds, 4), "decode": round(got.seconds, 4),
               "tokens_per_s": round(got.new_tokens / got.seconds, 1) if got.seconds else 0.0}
    described = {**settings.describe(), "samples": len(indices), "batch_size": wanted["batch_size"],
                 "corpus": corpus.name, "corpus_sha256": corpus.sha256, "graph_calls": got.calls,
                 "target_lang": lang, "target_lang_from": lang_from,
                 "new_tokens": got.new_tokens, "replayed": got.replayed,
                 # how the request fits the model's positions (prompt cut / new tokens capped: recorded)
                 "budget": wanted.get("budget")}
    checks = gen_checks(variant.precision, model.spec.tolerances, has_references=refs is not None)

    result = GenerationResult(variant.id, metrics, checks, rows, signatures, described, seconds, got.artifacts, worst)
    result.coverage = generation_coverage(ws.family(model).task(model.config), metrics, checks)
    return result


class RecordedCase(Protocol):
    """What a generation result is recorded into (a suite case, a check's record builder): the
    record's sections and a file beside it for the decoded text."""

    metrics: dict[str, float]
    thresholds: dict[str, dict[str, Any]]
    artifacts: dict[str, dict[str, Any]]
    data: dict[str, Any]

    def side_file(self, name: str) -> Path: ...


def record(case: RecordedCase, result: GenerationResult) -> None:
    """Put everything into the case's record, and the decoded text next to it."""
    case.metrics.update(result.metrics)
    case.thresholds.update(result.thresholds())
    case.artifacts.update(result.artifacts)
    path = case.side_file("decoded.jsonl")
    write_decoded(path, result.rows)
    Generation(result.settings, result.signatures, result.seconds, str(path), tuple(result.worst),
               tuple(f.as_dict() for f in result.forensics), result.first_divergence()).write(case.data)
    if result.coverage is not None:  # whether generation was gated at all (``harness.results.coverage``)
        result.coverage.write(case.data)


