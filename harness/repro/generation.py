"""Generation repro bundles (``kind: generation``): a failing decode, re-decoded anywhere.

Layout (besides ``bundle.json``)::

    tokenizer/          the tokenizer (``save_pretrained``) with config.json and generation_config.json:
                        what tokenizing, the stepper's cache layout and the search settings read
    data.npz            batch<i>.input_ids / batch<i>.attention_mask: the tokenizer's outputs,
                        the prompts exactly as decoded (padded per batch)
    artifact/<graph>/   the ONNX graphs decoding ran (encoder, decoder, decoder_with_past / model),
                        when small enough or asked for (``--repro-bundles bytes``)

``bundle.json`` holds the sources, corpus references, the PyTorch reference's and the variant's
token ids and texts, the generation settings, the thresholds, the recorded metrics and failures
and the forensics of the divergent steps. ``harness repro`` decodes the sources again with the
bundled graphs and tokenizer on the recorded provider -- no zoo, no cache, no PyTorch model, the
reference is the bundled one -- re-scores with the run's own scorer (``score_rows``) and the
recorded thresholds, and replays the recorded divergent steps on the variant's side.
"""

from __future__ import annotations

import json
import shutil
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np

from harness.core import Check, Precision, Variant
from harness.families import family_for
from harness.generation import Decoded, GenerationSettings, decode_texts
from harness.generation.decode import load_runners, torch_threads
from harness.generation.forensics import replay_side
from harness.repro.bundle import (
    DATA,
    FORMAT,
    Bundle,
    BundleError,
    Outcome,
    bundle_graphs,
    check_artifact,
    checks_from,
    checks_json,
    here_vs_recorded,
    onnx_file,
    recorded_facts,
    runtime_from,
    runtime_json,
    sha256_file,
    verdict_line,
    write_manifest,
)
from harness.runners import parse_provider
from harness.runners.base import GraphRef
from harness.runners.prebuilt import open_onnx
from harness.zoo.base import ModelSpec
from harness.zoo.loading import LoadedModel, load_tokenizer

if TYPE_CHECKING:  # pragma: no cover
    from harness.families import Family
    from harness.judge.generation import GenerationResult
    from harness.judge.workspace import Workspace
    from harness.repro.bundle import Outcome
    from harness.runners.base import GraphRunner
    from harness.zoo.loading import LoadedModel

TOKENIZER = "tokenizer"
#: the generation settings a bundle records (what ``GenerationSettings`` takes)
SETTINGS = ("max_new_tokens", "num_beams", "repetition_penalty", "length_penalty", "early_stopping", "use_cache",
            "eos_token_ids", "pad_token_id", "forced_eos_token_id", "suppress_tokens", "decoder_start_token_id")


def bundle_tokenizer(model: "LoadedModel", directory: Path) -> dict[str, str]:
    """Tokenizer and configs into ``directory/tokenizer`` (enough to tokenize, lay out the cache and
    read the search settings); their checksums for the manifest's ``files``."""
    target = directory / TOKENIZER
    target.mkdir(parents=True, exist_ok=True)
    model.tokenizer.save_pretrained(str(target))
    for name in ("config.json", "generation_config.json"):
        if (model.path / name).is_file():
            shutil.copyfile(model.path / name, target / name)
    return {f"{TOKENIZER}/{p.name}": sha256_file(p) for p in sorted(target.iterdir())}


def save_prompt_batches(directory: Path, model: "LoadedModel", family: "Family", texts: Sequence[str],
                        batch_size: int) -> str:
    """The tokenizer's outputs, as the decode saw them (``batch<i>.input_ids`` / ``attention_mask``
    per batch of ``batch_size``), into ``data.npz``; its sha256."""
    arrays: dict[str, np.ndarray] = {}
    for i, lo in enumerate(range(0, len(texts), batch_size)):
        arrays[f"batch{i}.input_ids"], arrays[f"batch{i}.attention_mask"] = family.prompt_batch(
            model, texts[lo: lo + batch_size])
    np.savez_compressed(directory / DATA, **arrays)  # type: ignore[arg-type]  # **arrays vs allow_pickle: bool
    return sha256_file(directory / DATA)


def write_generation_bundle(directory: Path, ws: "Workspace", variant: Variant, model: "LoadedModel",
                            family: "Family", result: "GenerationResult", mode: str = "auto") -> Path | None:
    """Bundle a failing generation case; None when a decoding graph is not an ONNX file."""
    s = result.settings
    wanted = family.generation_graphs(bool(s["use_cache"]))
    found = {g: onnx_file(result.artifacts, g) for g in wanted}
    files = {g: f for g, f in found.items() if f is not None}
    if mode == "off" or len(files) != len(wanted):
        return None
    directory.mkdir(parents=True, exist_ok=True)
    checksums = bundle_tokenizer(model, directory)
    artifacts, copied = bundle_graphs(directory, files, mode)
    checksums.update(copied)
    sources = [r["source"] for r in result.rows]
    batch_size = int(s["batch_size"])
    checksums[DATA] = save_prompt_batches(directory, model, family, sources, batch_size)
    failed = result.failed_checks()
    manifest = {
        "format": FORMAT, "kind": "generation", "case": variant.id, "model": variant.model, "family": model.family,
        "precision": variant.precision.value, "provider": variant.provider.short, "backend": variant.provider.backend,
        "threads": ws.options.settings.threads,
        "runtime": runtime_json(ws.runtime_for(variant, model)),
        "artifacts": artifacts,
        "settings": {k: s[k] for k in SETTINGS},
        "batch_size": batch_size, "target_lang": s.get("target_lang"), "corpus": s.get("corpus"),
        "indices": [r["index"] for r in result.rows], "sources": sources,
        "references": [r.get("reference") for r in result.rows] if result.rows and all(
            r.get("reference") is not None for r in result.rows) else None,
        "tokenizer": {"dir": TOKENIZER, "class": type(model.tokenizer).__name__,
                      "outputs": "data.npz batch<i>.input_ids / batch<i>.attention_mask (batches of batch_size)"},
        "reference": {"tokens": [r["pytorch_tokens"] for r in result.rows], "texts": [r["pytorch"] for r in result.rows],
                      "backend": "PyTorch FP32 (torch_cpu)"},
        "variant": {"tokens": [r["variant_tokens"] for r in result.rows], "texts": [r["variant"] for r in result.rows]},
        "thresholds": checks_json(result.checks),
        "verdict": {"passed": not failed, "metrics": result.metrics,
                    "failures": [{"metric": c.metric, "value": result.metrics.get(c.metric), "op": c.symbol,
                                  "threshold": c.threshold} for c in failed]},
        "forensics": [f.as_dict() for f in result.forensics],
        "model_sha256": model.weights_sha256,
        **recorded_facts(ws.options.settings.threads),
        "files": checksums,
    }
    return write_manifest(directory, manifest)


def validate(manifest_path: Path, m: Mapping[str, Any]) -> None:
    """The shape ``rejudge_generation`` relies on; one line per problem (exit 2)."""
    arts = m["artifacts"]
    if not isinstance(arts, dict) or not arts:
        raise BundleError(f"{manifest_path}: artifacts must map each decoding graph to its file")
    for art in arts.values():
        check_artifact(manifest_path, art)
    n = len(m["sources"])
    for side in ("reference", "variant"):
        got = m[side]
        if not isinstance(got, dict) or len(got.get("tokens") or []) != n or len(got.get("texts") or []) != n:
            raise BundleError(f"{manifest_path}: {side} must hold tokens and texts for each of the {n} sources")
    try:
        _checks(m)
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"{manifest_path}: a threshold is malformed ({exc!r})") from None
    try:
        settings = _settings(m)
    except (TypeError, ValueError, AttributeError) as exc:
        raise BundleError(f"{manifest_path}: settings are not generation settings ({exc})") from None
    try:
        needed = family_for(str(m["family"])).generation_graphs(settings.use_cache)
    except ValueError as exc:
        raise BundleError(f"{manifest_path}: {exc}") from None
    missing = [g for g in needed if g not in arts]
    if missing:
        raise BundleError(f"{manifest_path}: artifacts lack the decoding graph(s) {', '.join(missing)}")


def _settings(m: Mapping[str, Any]) -> Any:
    given: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in dict(m["settings"]).items()}
    return GenerationSettings(**given)


def _checks(m: Mapping[str, Any]) -> tuple[Check, ...]:
    return checks_from(m["thresholds"])


class FilesBackend:
    """What the decoding loop asks a backend for (``load``, ``artifacts``), served by fresh
    sessions of given ONNX files: no zoo, no cache, no replay. ``open`` is the one way a graph's
    file becomes a runner (``runners.prebuilt.open_onnx``: a file the runtime refuses is a usage
    error); a subclass that must see the runtime's own exceptions overrides it."""

    def __init__(self, files: Mapping[str, Path], provider: Any, threads: int | None, precision: Precision,
                 runtime: Any) -> None:
        self.files, self.provider, self.threads, self.precision, self.runtime = files, provider, threads, precision, runtime

    def open(self, graph: str) -> "GraphRunner":
        return open_onnx(self.files[graph], self.provider, self.threads, self.precision, self.runtime)

    @contextmanager
    def load(self, ref: GraphRef) -> Iterator["GraphRunner"]:
        graph = ref.graph
        runner = self.open(graph.name)
        try:
            yield runner
        finally:
            runner.close()

    def artifacts(self, ref: GraphRef) -> dict[str, dict[str, Any]]:
        return {}


def bundled_model(bundle: Bundle) -> "LoadedModel":
    """A ``LoadedModel`` over the bundle's tokenizer and configs whose PyTorch module cannot load:
    a bundle carries no weights, and nothing in a repro may need them."""
    m = bundle.manifest
    path = bundle.directory / str((m.get("tokenizer") or {}).get("dir") or TOKENIZER)
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BundleError(f"{bundle.directory}: {path.name}/config.json unreadable ({exc})") from None
    spec = ModelSpec(str(m.get("model") or "bundle"), str(m["family"]), "a repro bundle's tokenizer and configs",
                     path=path, generates=True)

    def no_weights() -> Any:
        raise BundleError(f"{bundle.directory}: a repro bundle carries no PyTorch weights")

    tokenizer = load_tokenizer(path, False, config.get("model_type") == "harness-encoder-custom")
    return LoadedModel(spec, path, no_weights, tokenizer, config, str(m.get("model_sha256") or ""))


@dataclass
class GenerationRepro:
    """The re-decoded verdict next to the recorded one."""

    recorded: list[str]
    now: list[str]
    metrics: dict[str, float]
    checks: tuple[Check, ...]
    artifact_sources: dict[str, str]
    tokenizer_matches: bool
    same_tokens: int  # sentences whose variant tokens equal the recorded variant tokens
    sentences: int
    steps: list[dict[str, Any]] = field(default_factory=list)  # recorded divergent steps replayed (variant side)
    version_diffs: list[str] = field(default_factory=list)
    environment_diffs: list[str] = field(default_factory=list)

    @property
    def reproduces(self) -> bool:
        return bool(self.recorded) and set(self.recorded) <= set(self.now)


def rejudge_generation(bundle: Bundle, provider: str | None = None, threads: int | None = None) -> GenerationRepro:
    """Decode the bundled sources with the bundled graphs and score against the bundled reference."""
    from harness.judge.generation import make_rows, score_rows

    m = bundle.manifest
    model = bundled_model(bundle)
    family = family_for(str(m["family"]))
    files, sources_of = bundle.graph_artifacts()
    prov = parse_provider(provider or m["provider"], option="--providers")
    workers = threads if threads is not None else m.get("threads")
    precision = Precision(m["precision"])
    settings = _settings(m)
    texts, batch_size = list(m["sources"]), int(m["batch_size"])
    tokenizer_matches = _tokenizer_matches(bundle, model, family, texts, batch_size)
    backend = FilesBackend(files, prov, workers, precision, runtime_from(m.get("runtime")))
    variant = Variant(model.name, precision, prov)
    got = decode_texts(backend, model, family, variant, texts, settings, batch_size,  # type: ignore[arg-type]
                       workers or 1)
    ref = Decoded([list(map(int, t)) for t in m["reference"]["tokens"]], list(m["reference"]["texts"]))
    rows = make_rows(list(m["indices"]), texts, m.get("references"), ref, got, model.tokenizer.convert_ids_to_tokens)
    metrics, _ = score_rows(rows, m.get("target_lang"))
    checks = _checks(m)
    now = [c.metric for c in checks if not c.passes(metrics.get(c.metric, float("nan")))]
    recorded = [str(f["metric"]) for f in m["verdict"]["failures"]]
    same = sum(list(a) == list(b) for a, b in zip(got.tokens, m["variant"]["tokens"]))
    steps = _replay_steps(m, backend, model, family, variant, texts, settings, batch_size, workers)
    version_diffs, env_diffs = here_vs_recorded(m, workers)
    return GenerationRepro(recorded, now, metrics, checks, sources_of, tokenizer_matches, same, len(texts), steps,
                           version_diffs, env_diffs)


def _tokenizer_matches(bundle: Bundle, model: "LoadedModel", family: "Family", texts: Sequence[str],
                       batch_size: int) -> bool:
    """Whether this machine's tokenizer turns the sources into the recorded token ids."""
    with np.load(bundle.directory / DATA, allow_pickle=False) as data:
        for i, lo in enumerate(range(0, len(texts), batch_size)):
            ids, mask = family.prompt_batch(model, texts[lo: lo + batch_size])
            key = f"batch{i}.input_ids"
            if key not in data.files or not (np.array_equal(data[key], ids)
                                             and np.array_equal(data[f"batch{i}.attention_mask"], mask)):
                return False
    return True


def _replay_steps(m: Mapping[str, Any], backend: FilesBackend, model: "LoadedModel", family: "Family",
                  variant: Variant, texts: Sequence[str], settings: Any, batch_size: int,
                  workers: int | None) -> list[dict[str, Any]]:
    """The variant's top-k now at each recorded divergent step, replayed on the recorded history:
    does the variant still choose that token, and by how much?"""
    recorded = list(m.get("forensics") or [])
    if not recorded:
        return []
    out = []
    positions = {int(i): k for k, i in enumerate(m["indices"])}
    with ExitStack() as stack:
        stack.enter_context(torch_threads(workers or 1))
        runners, _ = load_runners(backend, model, family, variant, settings.use_cache, stack)  # type: ignore[arg-type]
        starter = family.starter(model, runners, settings.decoder_start_token_id)
        for entry in recorded:
            k, step = positions.get(int(entry["index"])), int(entry["step"])
            if k is None:
                continue
            view, _ = replay_side(starter, lambda b: family.generation_prompts(model, b, settings.max_new_tokens),
                                  texts, m["variant"]["tokens"], k,
                                  step, settings, batch_size, model.tokenizer.convert_ids_to_tokens)
            was = entry["variant"]
            out.append({"index": entry["index"], "step": step, "recorded_top": was["top"],
                        "top_now": [c.__dict__ for c in view.top], "top1_recorded": was.get("replayed"),
                        "top1_now": view.replayed, "near_tie": entry.get("near_tie"),
                        "reference_margin": entry.get("reference_margin")})
    return out


def outcome_lines(bundle: Bundle, r: GenerationRepro) -> list[str]:
    """What ``harness repro`` prints for a generation bundle (before the verdict line)."""
    m = bundle.manifest
    lines = ["artifacts: " + ", ".join(f"{g}: {s}" for g, s in r.artifact_sources.items()),
             f"tokenizer outputs: {'identical to the recording' if r.tokenizer_matches else 'DIFFER from the recording'}",
             f"variant tokens identical to the recorded variant decode: {r.same_tokens}/{r.sentences} sentences"]
    recorded = {f["metric"]: f for f in m["verdict"]["failures"]}
    for c in r.checks:
        value = r.metrics.get(c.metric)
        if value is None:
            continue
        was = recorded.get(c.metric)
        then = f"recorded {float(was['value']):.6g} FAIL" if was else "recorded pass"
        lines.append(f"  {c.metric} = {value:.6g} {c.symbol} {c.threshold:.10g}: "
                     f"{'pass' if c.passes(value) else 'FAIL'} ({then})")
    for s in r.steps:
        now = ", ".join(f"{c['id']} {c['token']!r} {c['logit']:.3f}" for c in s["top_now"][:3])
        same = "same as" if s["top1_now"] == s["top1_recorded"] else "DIFFERENT from"
        lines.append(f"  sentence {s['index']} step {s['step']}: variant top-1 now {s['top1_now']} "
                     f"({same} recorded {s['top1_recorded']}; recorded reference margin "
                     f"{float(s['reference_margin']):.3f}, {'near-tie' if s['near_tie'] else 'clear decision'}); "
                     f"top-3 now: {now}")
    return lines


def outcome(bundle: Bundle, provider: str | None, threads: int | None) -> "Outcome":
    """``harness repro`` of a generation bundle."""
    r = rejudge_generation(bundle, provider, threads)
    data = {"recorded_failures": r.recorded, "failures_now": r.now, "metrics_now": r.metrics,
            "artifacts": r.artifact_sources, "tokenizer_matches": r.tokenizer_matches,
            "same_variant_tokens": r.same_tokens, "sentences": r.sentences, "divergent_steps_now": r.steps}
    return Outcome(outcome_lines(bundle, r), r.reproduces, verdict_line(r.reproduces, r.recorded, r.now), data,
                   r.version_diffs, r.environment_diffs)
