"""A ``harness check`` request and what it resolves to, before any model loads.

Everything a user can get wrong -- a missing or corrupt file, a reference that is not a model
directory, a provider that cannot run ONNX files here, an unknown corpus -- is found here and
is a one-line ``UsageError`` (exit 2). The result is what the run pipeline needs: a model
spec (with the check's tolerances and corpus), the files, a variant and run options.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.check.layout import ArtifactFile, discover
from harness.core import Precision, Provider, RunOptions, Settings, UsageError, Variant, did_you_mean, parse_precision
from harness.data.corpus import CorpusError, list_corpora, load_corpus, load_corpus_file
from harness.judge.runtimes import RuntimeStore
from harness.runners import backends, parse_provider, provider_table
from harness.runners.prebuilt import runs_onnx_files
from harness.settings.resolve import merge_tolerances
from harness.zoo import registered
from harness.zoo.base import ModelCatalog, ModelSpec, spec_for_directory


@dataclass
class CheckRequest:
    reference: str
    onnx: Path | None = None  # None with an endpoint
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
    #: ``--perf``: also time the files (latency distribution, cold start, memory, generation)
    perf: Any = None  # harness.perf.measure.PerfSettings
    #: how the files run (harness.core.runtime.RuntimeSettings); None: the defaults
    runtime: Any = None
    #: ``--repro-bundles`` (off / auto / bytes); None: the run's default
    repro_bundles: str | None = None
    #: ``--release-models`` (auto / always / never): whether references are computed before the files'
    #: sessions open and the PyTorch module freed between; None: the run's default
    release_models: str | None = None
    #: judge a served model instead of files (harness.settings.endpoint.Endpoint; ``onnx`` unused)
    endpoint: Any = None
    #: the files' I/O protocol overrides (a ``--io-protocol`` file's or a config's ``[protocol]`` table)
    protocol: Mapping[str, Any] | None = None
    protocol_origin: str = "--io-protocol"
    #: the config's ``gen_*`` settings (harness.judge.generation.GenerationRequest); None: the defaults
    gen_settings: Any = None


@dataclass(frozen=True)
class CheckSetup:
    """A request resolved: the model (tolerances merged, corpus set), the files, the variant
    they are judged as, why at that precision, and the run options of the workspace."""

    spec: ModelSpec
    artifacts: list[ArtifactFile]
    variant: Variant
    precision_note: str
    options: RunOptions


def resolve(req: CheckRequest, artifacts: list[ArtifactFile] | None = None) -> CheckSetup:
    """``artifacts``: what another source (a served model's metadata) describes, instead of files."""
    spec = req.spec or reference_spec(req.reference)
    if artifacts is None:
        if req.onnx is None:
            raise UsageError("give --onnx PATH (or --endpoint URL)")
        artifacts = discover(Path(req.onnx))  # bad files fail here, before the model loads
    provider = onnx_provider(req.provider)
    if req.corpus:
        spec = replace(spec, corpus=corpus_option(req.corpus))
    verify_corpus(spec.corpus)  # a corpus that no longer matches its manifest: one line now, not a traceback later
    if req.trust_remote_code or req.allow_pickle:
        spec = replace(spec, extra={**spec.extra, "trust_remote_code": req.trust_remote_code,
                                    "allow_pickle": req.allow_pickle})
    precision, precision_note = choose_precision(req.precision, artifacts)
    overrides = merge_tolerances(spec.tolerances, {precision.value: dict(req.tolerances)})
    spec = replace(spec, tolerances=overrides)  # numeric and generation gates both read the spec
    catalog = ModelCatalog()
    catalog.add(spec)  # the checked model with its tolerances and corpus: this run's, like a config's models
    defaults = Settings()
    settings = Settings(batch_size=req.batch_size or defaults.batch_size, samples=req.samples or defaults.samples,
                        threads=req.threads, repro_bundles=req.repro_bundles or defaults.repro_bundles,
                        release_models=req.release_models or defaults.release_models)
    options = RunOptions(models=[spec.name], precisions=[precision], providers=[provider], catalog=catalog,
                         settings=settings)
    if req.runtime is not None:  # runtime settings of the check (--graph-optimization, --provider-option...)
        options.runtime = req.runtime
    variant = Variant(spec.name, precision, provider, options.runtime.axis_values())  # ...-opt_disabled when set
    return CheckSetup(spec, artifacts, variant, precision_note, options)


def reference_spec(text: str) -> ModelSpec:
    """An HF model directory, or a zoo name; a zoo model's own directory keeps its tolerances."""
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
        raise UsageError(f"--reference: {path} is a file; give the HF model directory (config.json, weights, "
                         "tokenizer)")
    raise UsageError(f"--reference: {text}: no such directory (give an HF model directory or a zoo model name)")


def choose_precision(given: str | None, artifacts: list[ArtifactFile]) -> tuple[Precision, str]:
    if given:
        return parse_precision(given, option="--precisions"), "given"
    found = {a.path.name: Precision(a.precision) for a in artifacts}
    loosest = max(found.values(), key=lambda p: p.accuracy_rank)  # mixed files: judged at the loosest
    details = "; ".join(f"{a.path.name}: {a.precision} ({a.precision_reason})" for a in artifacts)
    if len(set(found.values())) > 1:
        return loosest, f"detected, files disagree ({details}); judged at the loosest, {loosest.value}"
    return loosest, f"detected ({details})"


def onnx_provider(name: str) -> Provider:
    """``--providers``: a provider whose backend runs ONNX files, available here."""
    provider = parse_provider(name, option="--providers")
    if not runs_onnx_files(backends().get(provider.backend)):
        runs = [short for short, p in provider_table().items() if runs_onnx_files(backends().get(p.backend))]
        raise UsageError(f"--providers: {name!r} does not run ONNX files; providers that do: {', '.join(runs)}")
    reason = RuntimeStore.unavailable_reason(Variant("check", Precision.FP32, provider))
    if reason:
        raise UsageError(f"--providers: {name}: {reason}")
    return provider


def corpus_option(text: str) -> str:
    """``--corpus``: a manifest name, or a .txt/.tsv file (made absolute)."""
    if text.endswith((".txt", ".tsv")):
        path = Path(text).expanduser()
        try:
            load_corpus_file(path)
        except CorpusError as exc:
            raise UsageError(f"--corpus: {exc}") from None
        return str(path.resolve())
    try:
        known = list_corpora()
    except CorpusError as exc:
        raise UsageError(f"--corpus: {exc}") from None
    if text not in known:
        raise UsageError(f"--corpus: unknown corpus {text!r}{did_you_mean(text, known)}; known: {', '.join(known)} "
                         "(or a .txt/.tsv file)")
    return text


def verify_corpus(name: str | None) -> None:
    """Read the corpus the check will use (hash, line count, format) so a damaged or edited one is
    a one-line ``UsageError`` naming the file, as ``harness run`` reports it, before a model loads."""
    if not name:
        return
    try:
        load_corpus_file(Path(name)) if name.endswith((".txt", ".tsv")) else load_corpus(name)
    except CorpusError as exc:
        raise UsageError(f"corpus: {exc}") from None
