"""Error bundles of a generation case (``kind: error`` with ``decode``): a decode the files refused.

A generation case errors when one of its decoding graphs fails to load, or raises on a call the
decoding loop makes (a graph exported with a fixed sequence length refuses the one-token step, a
graph that lacks an input the family feeds...). Like a numeric error bundle (``error.py``) the
question is portable -- do these files, decoding these prompts with these settings on this
provider, raise the same error? -- but the evidence is a decode, not a batch: every graph
decoding runs, the tokenizer and configs (``tokenizer/``), the prompts as token ids
(``data.npz`` ``batch<i>.input_ids`` / ``batch<i>.attention_mask``), the generation settings
and batch size, and ``error`` with the graph that raised, the stage (``load`` or ``run``), the
decode batch and the graph's call number.

The rule is error.py's: the bundle is written only when the error is the files' own. The decode
is first run again outside the harness's caches with fresh sessions whose every load and call
is watched (``_Watch``); the error counts only when it was raised by a graph's load or call
(the runtime, or the runner refusing feeds the graph declares), never by the harness's decoding
code around them -- that is a harness bug, and the case's rerun command reproduces it.
"""

from __future__ import annotations

import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.core import Precision, Variant
from harness.families import family_for
from harness.generation import decode_texts
from harness.repro.bundle import (
    DATA,
    FORMAT,
    Bundle,
    BundleError,
    Outcome,
    bundle_graphs,
    check_artifact,
    here_vs_recorded,
    onnx_file,
    recorded_facts,
    runtime_from,
    runtime_json,
    write_manifest,
)
from harness.repro.errortext import clip, normalize
from harness.repro.generation import (
    SETTINGS,
    TOKENIZER,
    FilesBackend,
    _settings,
    bundle_tokenizer,
    bundled_model,
    save_prompt_batches,
)
from harness.runners import backends, parse_provider
from harness.runners.base import FileView, GraphRef, GraphRunner

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Provider
    from harness.core.runtime import RuntimeSettings
    from harness.families import Family
    from harness.generation import GenerationSettings
    from harness.judge.workspace import Workspace
    from harness.runners.base import Backend
    from harness.zoo.loading import LoadedModel

@dataclass(frozen=True)
class DecodeRaised:
    """Which graph raised, where (load / run, decode batch, the graph's n-th call) and how."""

    graph: str
    stage: str  # "load" or "run"
    batch: int
    call: int | None
    type: str
    message: str

    @property
    def normalized(self) -> str:
        return normalize(self.message)

    def where(self) -> str:
        if self.stage == "harness":
            return f"in the harness's decoding code (decode batch {self.batch})"
        if self.stage == "load":
            return f"loading graph {self.graph}"
        return f"graph {self.graph} call {self.call} (decode batch {self.batch})"


class _Watched(Exception):
    """Carries the runtime's own exception out of the decoding loop, tagged with where it rose."""

    def __init__(self, raised: DecodeRaised) -> None:
        super().__init__(raised.message)
        self.raised = raised


class _Watch(GraphRunner):
    """A runner that tags an exception raised by its graph's call; everything else is the runner's
    (its declared capabilities are read through, never probed)."""

    def __init__(self, runner: GraphRunner, graph: str, batch: list[int]) -> None:
        self._runner, self._graph, self._batch, self.calls = runner, graph, batch, 0
        self.input_names, self.output_names = runner.input_names, runner.output_names
        self.path, self.replayed = runner.path, runner.replayed

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.calls += 1
        try:
            return self._runner.run(feeds)
        except Exception as exc:
            raise _Watched(DecodeRaised(self._graph, "run", self._batch[0], self.calls, type(exc).__name__,
                                        str(exc).strip())) from exc

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.run(feeds)

    def prepare(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self._runner.prepare(feeds)

    def synchronize(self) -> None:
        self._runner.synchronize()

    def end_profiling(self) -> str | None:
        return self._runner.end_profiling()

    def file_view(self) -> FileView | None:
        return self._runner.file_view()

    def close(self) -> None:
        self._runner.close()


class _FilesBackend(FilesBackend):
    """:class:`FilesBackend` that lets the runtime's own exceptions out, tagged with the graph,
    the stage (load / run) and the decode batch they rose in."""

    def __init__(self, files: Mapping[str, Path], provider: "Provider", threads: int | None, precision: Precision,
                 runtime: "RuntimeSettings | None", batch: list[int]) -> None:
        super().__init__(files, provider, threads, precision, runtime)
        self.batch = batch

    def open(self, graph: str) -> "GraphRunner":
        backend = backends()[self.provider.backend]
        try:  # not prebuilt.open_onnx: it turns the runtime's refusal into a usage error
            runner = backend.open_onnx_file(self.files[graph], self.provider, self.precision, self.threads,
                                            self.runtime)
        except Exception as exc:
            raise _Watched(DecodeRaised(graph, "load", self.batch[0], None, type(exc).__name__,
                                        str(exc).strip())) from exc
        return _Watch(runner, graph, self.batch)


def provoke(files: Mapping[str, Path], model: "LoadedModel", family: "Family", variant: Variant,
            texts: Sequence[str], settings: "GenerationSettings", batch_size: int, threads: int | None,
            runtime: "RuntimeSettings | None", only: int | None = None) -> DecodeRaised | None:
    """Decode ``texts`` batch by batch (or batch ``only``) with fresh sessions of ``files`` until a
    graph's load or call raises; None when every batch decodes. An exception raised by the
    decoding code itself propagates: it is not the files' error."""
    batch = [0]
    backend = _FilesBackend(files, variant.provider, threads, variant.precision, runtime, batch)
    for i, lo in enumerate(range(0, len(texts), batch_size)):
        if only is not None and i != only:
            continue
        batch[0] = i
        try:
            decode_texts(backend, model, family, variant, texts[lo: lo + batch_size], settings,  # type: ignore[arg-type]
                         batch_size, threads or 1)
        except _Watched as watched:
            return watched.raised
    return None


def decode_files(backend: Backend, model: "LoadedModel", family: "Family", variant: Variant,
                 settings: "GenerationSettings") -> dict[str, Path] | None:
    """The ONNX file of each graph decoding runs, from the backend's artifacts; None when a
    graph is not one ONNX file (PyTorch, a native engine) or cannot be had (a failed export)."""
    wanted = family.generation_graphs(settings.use_cache)
    out: dict[str, Path] = {}
    for graph in family.graphs(model):
        if graph.name in wanted:
            path = onnx_file(backend.artifacts(GraphRef(model, family, graph, variant)), graph.name)
            if path is None:
                return None
            out[graph.name] = path
    return out if set(out) == set(wanted) else None


def write_decode_error_bundle(directory: Path, ws: "Workspace", variant: Variant, model: "LoadedModel",
                              family: "Family", settings: "GenerationSettings", indices: Sequence[int],
                              texts: Sequence[str], batch_size: int, exc: BaseException,
                              mode: str = "auto") -> Path | None:
    """Bundle a generation case's error if the decoding graphs raise it themselves; None otherwise."""
    if mode == "off":
        return None
    files = decode_files(ws.backend(variant, model), model, family, variant, settings)
    if files is None:
        return None
    threads = ws.options.settings.threads
    runtime = ws.runtime_for(variant, model)
    try:
        raised = provoke(files, model, family, variant, texts, settings, batch_size, threads, runtime)
    except Exception:  # noqa: BLE001 - the decoding code raised, not a graph: not the files' error
        return None
    if raised is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    checksums = bundle_tokenizer(model, directory)
    artifacts, copied = bundle_graphs(directory, files, mode)
    checksums.update(copied)
    checksums[DATA] = save_prompt_batches(directory, model, family, texts, batch_size)
    described = asdict(settings)
    manifest = {
        "format": FORMAT, "kind": "error", "case": variant.id, "model": variant.model, "family": model.family,
        "precision": variant.precision.value, "provider": variant.provider.short, "backend": variant.provider.backend,
        "threads": threads, "runtime": runtime_json(runtime), "artifacts": artifacts,
        "decode": {"settings": {k: described[k] for k in SETTINGS}, "batch_size": batch_size,
                   "indices": list(indices), "sources": list(texts),
                   "tokenizer": {"dir": TOKENIZER, "class": type(model.tokenizer).__name__,
                                 "outputs": "data.npz batch<i>.input_ids / batch<i>.attention_mask"}},
        "error": {"graph": raised.graph, "stage": raised.stage, "batch": raised.batch, "call": raised.call,
                  "type": raised.type, "message": raised.message, "normalized": raised.normalized,
                  "case_type": type(exc).__name__,
                  "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:]},
        "verdict": {"passed": False, "failures": [{"error": raised.type}]},
        "model_sha256": model.weights_sha256,
        **recorded_facts(threads),
        "files": checksums,
    }
    return write_manifest(directory, manifest)


def validate(manifest_path: Path, m: Mapping[str, Any]) -> None:
    """The shape ``outcome`` relies on; one line per problem (exit 2)."""
    arts, decode, err = m.get("artifacts"), m["decode"], m["error"]
    if not isinstance(arts, dict) or not arts:
        raise BundleError(f"{manifest_path}: artifacts must map each decoding graph to its file")
    for art in arts.values():
        check_artifact(manifest_path, art)
    if not isinstance(decode, dict) or not {"settings", "batch_size", "sources"} <= set(decode):
        raise BundleError(f"{manifest_path}: decode must have settings, batch_size and sources")
    if not isinstance(err, dict) or err.get("stage") not in ("load", "run") or err.get("graph") not in arts \
            or not isinstance(err.get("batch"), int) or not {"type", "message"} <= set(err):
        raise BundleError(f"{manifest_path}: error must name a bundled graph, stage (load or run), batch, type "
                          "and message")
    try:
        settings = _settings(decode)
    except (TypeError, ValueError, AttributeError) as exc:
        raise BundleError(f"{manifest_path}: decode.settings are not generation settings ({exc})") from None
    try:
        needed = family_for(str(m.get("family"))).generation_graphs(settings.use_cache)
    except ValueError as exc:
        raise BundleError(f"{manifest_path}: {exc}") from None
    missing = [g for g in needed if g not in arts]
    if missing:
        raise BundleError(f"{manifest_path}: artifacts lack the decoding graph(s) {', '.join(missing)}")


def outcome(bundle: Bundle, provider: str | None, threads: int | None) -> Outcome:
    """``harness repro`` of a decode error bundle: the failing decode batch again, same error?"""
    m = bundle.manifest
    decode, err = m["decode"], m["error"]
    files, sources = bundle.graph_artifacts()
    prov = parse_provider(provider or m["provider"], option="--providers")
    workers = threads if threads is not None else m.get("threads")
    model = bundled_model(bundle)
    family = family_for(str(m["family"]))
    variant = Variant(model.name, Precision(m["precision"]), prov)
    recorded = DecodeRaised(str(err["graph"]), str(err["stage"]), int(err["batch"]), err.get("call"), str(err["type"]),
                            str(err["message"]))
    texts = list(decode["sources"])
    try:
        now = provoke(files, model, family, variant, texts, _settings(decode), int(decode["batch_size"]), workers,
                      runtime_from(m.get("runtime")), only=recorded.batch)
    except Exception as exc:  # noqa: BLE001 - the decoding code itself raised: not the graphs' error, and not the recorded one
        now = DecodeRaised("(decoding code)", "harness", recorded.batch, None, type(exc).__name__, str(exc).strip())
    lines = ["artifacts: " + ", ".join(f"{g}: {s}" for g, s in sources.items()),
             f"decoded: batch {recorded.batch} of {len(texts)} prompt(s) in batches of {decode['batch_size']}, "
             f"max_new_tokens {decode['settings'].get('max_new_tokens')}, beams {decode['settings'].get('num_beams')}, "
             f"cache {'on' if decode['settings'].get('use_cache') else 'off'}",
             f"recorded: {recorded.type} {recorded.where()}: {clip(recorded.message)}"]
    same_type = now is not None and (now.type, now.stage, now.graph) == (recorded.type, recorded.stage, recorded.graph)
    same_message = now is not None and now.normalized == recorded.normalized
    if now is None:
        lines.append(f"now: no error (decode batch {recorded.batch} finished)")
    else:
        lines.append(f"now: {now.type} {now.where()}: {clip(now.message)}")
        lines.append(f"  type {'same' if same_type else 'DIFFERENT'}; normalised message "
                     f"{'same' if same_message else 'DIFFERENT'}")
    reproduces = same_type and same_message
    if reproduces:
        verdict = f"REPRODUCES: {recorded.type} again ({recorded.where()})"
    elif now is None:
        verdict = "DOES NOT REPRODUCE: the graphs decode the batch here"
    else:
        verdict = f"DOES NOT REPRODUCE: a different error ({now.type} {now.where()})"
    versions, env = here_vs_recorded(m, workers)
    data = {"recorded_error": {"type": recorded.type, "graph": recorded.graph, "stage": recorded.stage,
                               "batch": recorded.batch, "call": recorded.call, "normalized": recorded.normalized},
            "error_now": None if now is None else {"type": now.type, "graph": now.graph, "stage": now.stage,
                                                   "batch": now.batch, "call": now.call, "message": now.message,
                                                   "normalized": now.normalized},
            "same_type": same_type, "same_message": same_message, "artifacts": sources}
    return Outcome(lines, reproduces, verdict, data, versions, env)
