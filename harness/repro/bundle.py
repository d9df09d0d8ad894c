"""The repro bundle format (``harness.repro/1``): writing one, reading one back, re-judging it.

One format for every kind of failing case: ``bundle.json`` says its ``kind`` (``numeric``, the
default and what a bundle without one is; ``generation``, ``perf`` and ``error`` live in their
own modules, each with ``validate`` and ``outcome``) and the helpers here -- copying an artifact
or recording its path and sha256, checksums, runtime settings, versions and environment, the
verdict line -- are shared by all. Layout of a numeric bundle directory::

    bundle.json      what was judged and how: case, graph, precision, provider, runtime settings,
                     artifact (path, sha256, size, bundled copy or not), each output's thresholds,
                     the recorded verdict (metrics and failed checks), versions, environment
    data.npz         batch<i>.input.<name>, batch<i>.reference.<name>, batch<i>.mask.<name>,
                     batch<i>.variant.<name>: the corpus batches exactly as they were judged
    artifact/<file>  the ONNX file(s), when small enough or asked for (``--repro-bundles bytes``)

``bundle.json`` lists the sha256 of every other file in it, so an edited or truncated bundle is
refused (exit 2) instead of silently judging something else. Re-judging reuses the run's own
comparison (``harness.judge.numeric.run_graph_parity``) with the *recorded* thresholds, not the
installed harness's defaults: the question a bundle answers is "do the same checks still fail
here", so the yardstick must not move with the harness version.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field, replace
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from harness.core import Check, Precision, Tolerance, UsageError
from harness.core.direction import Direction
from harness.core.runtime import RuntimeSettings, section_of
from harness.families.heads import AnswerSpan
from harness.families.pooling import Pooling
from harness.judge.embedding import embedding_parity
from harness.judge.numeric import run_graph_parity
from harness.metrics.registry import gate
from harness.results.envinfo import environment, versions
from harness.runners import backends, parse_provider
from harness.runners.prebuilt import open_onnx

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Variant
    from harness.core.runtime import RuntimeSettings
    from harness.families import GraphSpec
    from harness.judge.numeric import Batch, OutputResult
    from harness.runners.base import GraphRunner

FORMAT = "harness.repro/1"
MANIFEST = "bundle.json"
DATA = "data.npz"
#: ``auto`` copies the artifact into the bundle up to this size; larger ones are path + sha256
AUTO_ARTIFACT_BYTES = 32 * 1024 * 1024
#: ``--repro-bundles`` values: off (none written), auto (artifact bytes when small), bytes (always)
MODES = ("auto", "off", "bytes")
#: what ``bundle.json`` must hold per ``kind`` (a bundle without ``kind`` is a numeric one)
REQUIRED: dict[str, tuple[str, ...]] = {
    "numeric": ("graph", "precision", "provider", "artifact", "outputs", "batches", "inputs", "verdict", "files"),
    "generation": ("family", "precision", "provider", "artifacts", "settings", "sources", "reference", "variant",
                   "thresholds", "verdict", "files"),
    "perf": ("precision", "provider", "budget", "measured", "files"),  # + what its ``measure`` needs
    "error": ("precision", "provider", "error", "files"),
}


class BundleError(UsageError):
    """A bundle that cannot be read or fails its own checksums: exit 2, one line."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _artifact_files(path: Path) -> list[Path]:
    """The ONNX file and its external-data siblings (``<name>.data`` / ``<name>_data``), which
    ONNX Runtime resolves relative to the file."""
    siblings = [path.with_name(path.name + ".data"), path.with_name(path.stem + ".onnx_data"),
                path.with_name(path.name + "_data")]
    return [path, *(p for p in siblings if p.is_file())]


@dataclass(frozen=True)
class _RecordedGraph:
    """The few ``GraphSpec`` facts ``run_graph_parity`` reads, rebuilt from a bundle."""

    name: str
    output_names: tuple[str, ...]
    logits_outputs: tuple[str, ...]
    gated: tuple[str, ...]
    #: outputs derived from these and judged beside them (``GraphSpec.derived``: a QA head's answer span)
    derived: tuple[Any, ...] = ()

    def is_gated(self, output: str) -> bool:
        return output in self.gated


def checks_json(checks: Iterable[Check]) -> list[dict[str, Any]]:
    """The gates a bundle records (every kind): metric, threshold and the direction judged in."""
    return [{"metric": c.metric, "threshold": c.threshold, "higher_is_better": c.higher_is_better} for c in checks]


def checks_from(rows: Iterable[Mapping[str, Any]]) -> tuple[Check, ...]:
    """The recorded gates rebuilt by their declarations (``harness.metrics.registry.gate``), so a
    re-judged bundle compares in the metric's declared direction. An unknown metric, or a row whose
    direction is not the declared one (an edited manifest), is malformed: ValueError."""
    out = []
    for row in rows:
        name = str(row["metric"])
        try:
            check = gate(name, float(row["threshold"]))
        except UsageError:
            raise ValueError(f"unknown metric {name!r}") from None
        if bool(row["higher_is_better"]) != check.higher_is_better:
            raise ValueError(f"{name}: recorded as {Direction.of(bool(row['higher_is_better'])).value} is better, "
                             f"declared {check.direction.value}")
        out.append(check)
    return tuple(out)


def _tolerance_json(tol: Tolerance | None) -> list[dict[str, Any]] | None:
    return None if tol is None else checks_json(tol.checks)


def _tolerance_from(rows: Any) -> Tolerance | None:
    return None if rows is None else Tolerance(checks_from(rows))


def _failures_json(outputs: Sequence["OutputResult"]) -> list[dict[str, Any]]:
    return [{"output": f.output, "metric": f.metric, "value": f.value, "op": f.op, "threshold": f.threshold,
             "where": f.where} for o in outputs for f in o.failures()]


@dataclass(frozen=True)
class EmbeddingDerived:
    """A sentence-embedding output derived from a graph's token states by a pooling recipe."""

    mode: str
    normalize: bool
    hidden: str = "last_hidden_state"


#: the derivation kind of a QA head's answer span in a bundle's outputs
ANSWER_SPAN = "answer_span"


def _answer_spans(graph: Any) -> dict[str, Any]:
    """The graph's answer-span outputs by name (``AnswerSpan``); a graph renamed to a file's own
    names (``_renamed``) carries none: its span is judged by the case's rerun, not the bundle."""
    return {d.name: d for d in getattr(graph, "derived", ()) if isinstance(d, AnswerSpan)}


def _outputs_json(graph: "GraphSpec", judged: Sequence["OutputResult"],
                  embedding: EmbeddingDerived | None) -> list[dict[str, Any]]:
    """One row per graph output (its thresholds when judged, null when only reported) and one
    per derived output (the sentence vector, with its recipe)."""
    by_name = {o.output: o for o in judged}
    rows: list[dict[str, Any]] = []
    for name in graph.output_names:
        o = by_name.get(name)
        rows.append({"name": name, "is_logits": name in graph.logits_outputs,
                     "tolerance": _tolerance_json(o.tolerance) if o else None, "metrics": o.metrics if o else {},
                     "worst": o.worst.describe(o.axis_names) if o and o.worst else (o.where if o else None)})
    spans = _answer_spans(graph)
    for o in judged:
        if o.output in spans:  # re-derived from the bundled feeds and outputs by run_graph_parity
            rows.append({"name": o.output, "is_logits": False, "tolerance": _tolerance_json(o.tolerance),
                         "metrics": o.metrics, "worst": o.where or None,
                         "derived": {"kind": ANSWER_SPAN, **spans[o.output].recipe()}})
        elif o.output not in graph.output_names and embedding is not None:
            rows.append({"name": o.output, "is_logits": False, "tolerance": _tolerance_json(o.tolerance),
                         "metrics": o.metrics, "worst": o.where or None,
                         "derived": {"kind": "sentence_embedding", "pooling": embedding.mode,
                                     "normalize": embedding.normalize, "from": embedding.hidden}})
    return rows


def runtime_json(runtime: "RuntimeSettings | None") -> dict[str, Any] | None:
    """The case's runtime settings as plain JSON (paths as text), for a manifest: every field by
    name, the backends' sections flattened beside the shared fields."""
    if runtime is None:
        return None
    plain: dict[str, Any] = json.loads(json.dumps(runtime.fields_dict(), default=str))  # a record, not objects
    return plain


def write_bundle(directory: Path, *, variant: "Variant", graph: "GraphSpec", runner: "GraphRunner",
                 batches: Sequence["Batch"], judged: Sequence["OutputResult"],
                 runtime: "RuntimeSettings | None", threads: int | None, mode: str = "auto",
                 texts: Sequence[Sequence[str]] | None = None,
                 embedding: "EmbeddingDerived | None" = None) -> Path | None:
    """Write the bundle of one failing graph into ``directory``; None when it cannot be
    re-judged from files (the runner runs no single ONNX file: PyTorch, a native engine --
    ``GraphRunner.file_view``) -- the case's rerun command is then the way to reproduce it. A foreign
    file (``harness check``) is bundled under its own input and output names, so ``harness repro``
    runs it as it is. ``texts`` are the
    corpus batches' sentences: the tokenizer's inputs, whose outputs are the bundled feeds.
    ``embedding``: the judged output is the pooled sentence vector computed from the graph's token
    states (the embedding suite), recorded with its pooling recipe and re-derived on repro."""
    view = runner.file_view()
    if mode == "off" or view is None or not batches:
        return None
    graph = _bundled_derivations(graph, view, batches[0][0])
    own = set(graph.output_names) | {d.name for d in getattr(graph, "derived", ())}
    if not any(o.failures() for o in judged if o.output in own or embedding is not None):
        return None  # what failed (an answer span the file's own names cannot re-derive) is the rerun's to show
    artifact = Path(view.path)
    directory.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    names = [n for n in graph.output_names if view.outputs is None or n in view.outputs]  # what the file returns
    kept = 0
    inputs = sorted(view.feeds(batches[0][0]))
    for feeds, ref, masks in batches:
        try:
            got = runner.run(feeds)  # the variant's outputs as judged (a cached runner replays them)
        except Exception:  # noqa: BLE001 - a shape probe the runtime refused: judged as <graph>/shapes, not by numbers
            continue
        i, kept = kept, kept + 1
        theirs = view.feeds(feeds)  # the file's own input names (a foreign file's mapping applied)
        arrays.update({f"batch{i}.input.{k}": np.asarray(v) for k, v in theirs.items()})
        for name in names:
            file_name = view.output_name(name)
            arrays[f"batch{i}.reference.{file_name}"] = np.asarray(ref[name])
            arrays[f"batch{i}.variant.{file_name}"] = np.asarray(got[name])
            mask = masks.get(name)
            if mask is not None:
                arrays[f"batch{i}.mask.{file_name}"] = np.asarray(mask)
    if view.outputs is not None:  # the manifest speaks the file's names too
        graph, judged = _renamed(graph, names, judged, view.output_name)
        if embedding is not None:
            embedding = replace(embedding, hidden=view.output_name(embedding.hidden))
    np.savez_compressed(directory / DATA, **arrays)  # type: ignore[arg-type]  # **arrays vs allow_pickle: bool
    art, copied = bundle_artifact(directory, artifact, mode)
    checksums = {DATA: sha256_file(directory / DATA), **copied}
    rows = _outputs_json(graph, judged, embedding)
    kept_outputs = [o for o in judged if o.output in {r["name"] for r in rows}]  # the shape-probe row is not numbers
    manifest = {
        "format": FORMAT,
        "kind": "numeric",
        "case": variant.id,
        "model": variant.model,
        "graph": graph.name,
        "precision": variant.precision.value,
        "provider": variant.provider.short,
        "backend": variant.provider.backend,
        "threads": threads,
        "runtime": runtime_json(runtime),
        "artifact": art,
        "batches": kept,
        "inputs": inputs,
        "outputs": rows,
        "tokenizer": {"texts": [list(b) for b in texts], "outputs": "data.npz batch<i>.input.<name> "
                      "(corpus batches first, then the shape probes)"} if texts else None,
        "verdict": {"passed": not any(o.failures() for o in kept_outputs), "failures": _failures_json(kept_outputs)},
        **recorded_facts(threads),
        "files": checksums,
    }
    return write_manifest(directory, manifest)


def _bundled_derivations(graph: Any, view: Any, feeds: Mapping[str, np.ndarray]) -> Any:
    """``graph`` with the answer spans a bundle can derive again: the file returns their logits
    under the reference's names and takes ``input_ids`` / ``attention_mask`` as such (the span's
    context is read from them); the others are left to the case's rerun."""
    spans = _answer_spans(graph)
    if not spans:
        return graph
    inputs = set(view.feeds(feeds))
    keep = tuple(d for d in spans.values() if {"input_ids", "attention_mask"} <= inputs
                 and all(view.output_name(n) == n for n in d.needs))
    return graph if len(keep) == len(spans) else replace(graph, derived=keep)


def _renamed(graph: "GraphSpec", names: Sequence[str], judged: Sequence["OutputResult"],
             rename: Any) -> tuple[Any, list["OutputResult"]]:
    """The graph facts and judged outputs under the file's own output names (``FileView``)."""
    recorded = _RecordedGraph(graph.name, tuple(rename(n) for n in names),
                              tuple(rename(n) for n in names if n in graph.logits_outputs),
                              tuple(rename(n) for n in names if graph.is_gated(n)), graph.derived)
    return recorded, [replace(o, output=rename(o.output)) for o in judged]


def write_manifest(directory: Path, manifest: Mapping[str, Any]) -> Path:
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n")
    return directory


def bundle_artifact(directory: Path, artifact: Path, mode: str, sub: str = "artifact"
                    ) -> tuple[dict[str, Any], dict[str, str]]:
    """An ONNX file (and its external data) as a bundle records it -- copied into ``sub/`` under
    ``bytes``, or under ``auto`` when small, else path + sha256 -- and the checksums of the copies."""
    files = _artifact_files(artifact)
    size = sum(f.stat().st_size for f in files)
    bundled = mode == "bytes" or size <= AUTO_ARTIFACT_BYTES
    checksums: dict[str, str] = {}
    if bundled:
        (directory / sub).mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copyfile(f, directory / sub / f.name)
            checksums[f"{sub}/{f.name}"] = sha256_file(directory / sub / f.name)
    art = {"path": str(artifact.resolve()), "file": artifact.name, "sha256": sha256_file(artifact), "bytes": size,
           "bundled": bundled, "files": {f.name: sha256_file(f) for f in files}, "dir": sub}
    return art, checksums


def bundle_graphs(directory: Path, files: Mapping[str, Path], mode: str) -> tuple[dict[str, Any], dict[str, str]]:
    """:func:`bundle_artifact` for each graph of a multi-graph bundle (``artifact/<graph>/``): the
    ``artifacts`` entry per graph and the checksums of what was copied."""
    artifacts: dict[str, Any] = {}
    checksums: dict[str, str] = {}
    for graph, path in files.items():
        art, copied = bundle_artifact(directory, path, mode, sub=f"artifact/{graph}")
        artifacts[graph] = art
        checksums.update(copied)
    return artifacts, checksums


def onnx_file(artifacts: Mapping[str, Mapping[str, Any]], graph: str) -> Path | None:
    """The one ONNX file a case ran for ``graph``, from its ``artifacts`` (keys ``<graph>/<file>``);
    None when the graph is not exactly one existing ONNX file (PyTorch, a native engine, a failed
    export): nothing portable to bundle."""
    paths = [Path(str(info["path"])) for key, info in artifacts.items()
             if key.split("/")[0] == graph and str(info.get("path", "")).endswith(".onnx")]
    return paths[0] if len(paths) == 1 and paths[0].is_file() else None


def resolve_artifact(directory: Path, art: Mapping[str, Any]) -> tuple[Path, str]:
    """The ONNX file to run and where it came from: the bundled copy, else the recorded path
    when its sha256 still matches (the same file), else a ``BundleError``."""
    if art["bundled"]:
        return directory / str(art.get("dir") or "artifact") / art["file"], "bundled copy"
    recorded = Path(art["path"])
    if not recorded.is_file():
        raise BundleError(f"{directory}: the artifact is not in the bundle and {recorded} does not exist "
                          "here (write bundles with --repro-bundles bytes to carry it)")
    if sha256_file(recorded) != art["sha256"]:
        raise BundleError(f"{directory}: {recorded} is not the judged artifact (sha256 differs)")
    return recorded, f"recorded path {recorded} (not bundled; sha256 matches)"


def check_artifact(manifest_path: Path, art: Any) -> None:
    if not isinstance(art, dict) or not {"path", "file", "sha256", "bundled"} <= set(art):
        raise BundleError(f"{manifest_path}: artifact must have path, file, sha256 and bundled")


def runtime_from(recorded: Mapping[str, Any] | None) -> "RuntimeSettings | None":
    """The recorded runtime settings, less what the backend derives anew where it runs (the
    TensorRT shape profile, provider options, profiling)."""
    if not recorded:
        return None
    backends()  # the sections are declared in the backends' modules
    derived = ("trt_profile", "provider_options", "profile", "custom_op_library")  # a bundle never loads native code
    shared = {k: v for k, v in recorded.items() if k in ("intra_op_threads", "inter_op_threads") and v is not None}
    own = {k: v for k, v in recorded.items() if k not in derived and section_of(k) is not None}
    return RuntimeSettings(**shared).merged(own)


def here_vs_recorded(manifest: Mapping[str, Any], threads: int | None) -> tuple[list[str], list[str]]:
    """(version differences, environment differences) between the recording and this machine."""
    env_here = environment(threads)
    env_rec = manifest.get("environment") or {}
    env_keys = ("cpu", "cores", "os", "machine", "gpu")
    return (_diffs(manifest.get("versions") or {}, versions()),
            _diffs({k: env_rec.get(k) for k in env_keys}, {k: env_here.get(k) for k in env_keys}))


def recorded_facts(threads: int | None) -> dict[str, Any]:
    """``versions`` and ``environment`` of this machine, for a manifest."""
    return {"versions": versions(), "environment": environment(threads)}


@dataclass
class Bundle:
    """A bundle read back and verified against its own checksums."""

    directory: Path
    manifest: dict[str, Any]

    @property
    def precision(self) -> Precision:
        return Precision(self.manifest["precision"])

    def derived(self) -> list[dict[str, Any]]:
        """Outputs computed from the file's outputs (a pooled sentence vector), not produced by it."""
        return [o for o in self.manifest["outputs"] if (o.get("derived") or {}).get("kind") == "sentence_embedding"]

    def graph(self) -> _RecordedGraph:
        outs = [o for o in self.manifest["outputs"] if not o.get("derived")]
        spans = tuple(AnswerSpan.from_recipe(o["derived"]) for o in self.manifest["outputs"]
                      if (o.get("derived") or {}).get("kind") == ANSWER_SPAN)
        return _RecordedGraph(self.manifest["graph"], tuple(o["name"] for o in outs),
                              tuple(o["name"] for o in outs if o["is_logits"]),
                              tuple(o["name"] for o in outs if o["tolerance"] is not None), spans)

    def tolerances(self) -> dict[str, Tolerance | None]:
        return {o["name"]: _tolerance_from(o["tolerance"]) for o in self.manifest["outputs"]}

    def batches(self) -> list["Batch"]:
        try:
            return self._batches()
        except KeyError as exc:  # bundle.json names an array data.npz does not hold (an edited manifest)
            raise BundleError(f"{self.directory}: {DATA} has no array {exc.args[0]!r} that {MANIFEST} names") from None
        except (OSError, ValueError) as exc:
            raise BundleError(f"{self.directory}: {DATA} unreadable ({exc})") from None

    def _batches(self) -> list["Batch"]:
        with np.load(self.directory / DATA, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        out: list["Batch"] = []
        for i in range(int(self.manifest["batches"])):
            feeds = {n: arrays[f"batch{i}.input.{n}"] for n in self.manifest["inputs"]}
            names = [o["name"] for o in self.manifest["outputs"] if not o.get("derived")]
            ref = {n: arrays[f"batch{i}.reference.{n}"] for n in names}
            masks = {n: arrays.get(f"batch{i}.mask.{n}") for n in names}
            out.append((feeds, ref, masks))
        return out

    @property
    def kind(self) -> str:
        """numeric (also a bundle written before kinds existed), generation, perf or error."""
        return str(self.manifest.get("kind") or "numeric")

    def artifact(self) -> tuple[Path, str]:
        """The ONNX file to run and where it came from (``resolve_artifact``)."""
        return resolve_artifact(self.directory, self.manifest["artifact"])

    def graph_artifacts(self) -> tuple[dict[str, Path], dict[str, str]]:
        """Each graph's ONNX file and where it came from, for a multi-graph bundle (``artifacts``)."""
        files, sources = {}, {}
        for graph, art in self.manifest["artifacts"].items():
            files[graph], sources[graph] = resolve_artifact(self.directory, art)
        return files, sources


def load_bundle(path: Path) -> Bundle:
    """Read and verify a bundle directory (or its ``bundle.json``); every problem is one line."""
    directory = path.parent if path.name == MANIFEST else path
    manifest_path = directory / MANIFEST
    manifest = _read_manifest(path, manifest_path)
    kind = manifest.get("kind") or "numeric"
    from harness.repro.verify import verify  # deferred: harness.repro.verify imports this module at import time

    verify(directory, manifest)
    _verify_files(directory, manifest)
    try:
        Precision(manifest["precision"])
    except ValueError:
        raise BundleError(f"{manifest_path}: unknown precision {manifest['precision']!r}") from None
    if kind != "numeric":
        import_module(f"harness.repro.{kind}").validate(manifest_path, manifest)
        return Bundle(directory, manifest)
    _check_numeric(manifest_path, manifest)
    return Bundle(directory, manifest)


def _read_manifest(path: Path, manifest_path: Path) -> dict[str, Any]:
    """The manifest, parsed, of a known format and kind, with the kind's keys."""
    if not manifest_path.is_file():
        raise BundleError(f"{path}: not a repro bundle (no {MANIFEST})")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as exc:
        raise BundleError(f"{manifest_path}: unreadable ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else None
        raise BundleError(f"{manifest_path}: format {got!r} is not {FORMAT!r}")
    kind = manifest.get("kind") or "numeric"
    if kind not in REQUIRED:
        raise BundleError(f"{manifest_path}: unknown kind {kind!r} (one of {', '.join(REQUIRED)})")
    missing = [k for k in REQUIRED[kind] if k not in manifest]
    if missing:
        raise BundleError(f"{manifest_path}: missing keys {', '.join(missing)}")
    return manifest


def _verify_files(directory: Path, manifest: Mapping[str, Any]) -> None:
    """Every listed file present with its recorded sha256."""
    if not isinstance(manifest["files"], dict):
        raise BundleError(f"{directory / MANIFEST}: files must map file names to sha256")
    for name, digest in dict(manifest["files"]).items():
        file = directory / name
        if not file.is_file():
            raise BundleError(f"{directory}: {name} is missing")
        if sha256_file(file) != digest:
            raise BundleError(f"{directory}: {name} does not match its recorded sha256 (edited or truncated)")


def _check_numeric(manifest_path: Path, manifest: Mapping[str, Any]) -> None:
    """A numeric bundle's artifact and outputs (derivations, tolerances) are well formed."""
    art, outs = manifest["artifact"], manifest["outputs"]
    check_artifact(manifest_path, art)
    if not isinstance(outs, list) or not outs or not all(
            isinstance(o, dict) and {"name", "is_logits", "tolerance"} <= set(o) for o in outs):
        raise BundleError(f"{manifest_path}: outputs must be a non-empty list of {{name, is_logits, tolerance}}")
    for o in outs:
        d = o.get("derived")
        if d and d.get("kind") == ANSWER_SPAN:
            try:
                AnswerSpan.from_recipe(d)
            except ValueError as exc:
                raise BundleError(f"{manifest_path}: output {o['name']}: {exc}") from None
        elif d and (d.get("kind") != "sentence_embedding" or d.get("pooling") not in ("mean", "cls", "max")):
            raise BundleError(f"{manifest_path}: output {o['name']}: unknown derivation {d!r}")
    try:
        for o in outs:
            _tolerance_from(o["tolerance"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"{manifest_path}: a tolerance check is malformed ({exc!r})") from None


@dataclass
class ReproResult:
    """The re-judged verdict next to the recorded one."""

    recorded: list[tuple[str, str]]  # (output, metric) of the recorded failures
    now: list[tuple[str, str]]
    outputs: list["OutputResult"]
    artifact_source: str
    version_diffs: list[str] = field(default_factory=list)
    environment_diffs: list[str] = field(default_factory=list)

    @property
    def reproduces(self) -> bool:
        """The same checks fail (at least every recorded one; a new failure is reported too)."""
        return bool(self.recorded) and set(self.recorded) <= set(self.now)


@dataclass
class Outcome:
    """What ``harness repro`` prints and writes for a bundle of any kind but numeric: the kind's
    own lines, whether the failure reproduces, the verdict line, the JSON outcome."""

    lines: list[str]
    reproduces: bool
    verdict: str
    data: dict[str, Any]
    version_diffs: list[str] = field(default_factory=list)
    environment_diffs: list[str] = field(default_factory=list)


def verdict_line(reproduces: bool, recorded: Sequence[str], now: Sequence[str], what: str = "failing check(s)") -> str:
    """The closing line shared by every kind."""
    if reproduces:
        return f"REPRODUCES: {len(recorded)} recorded {what} fail again"
    if not recorded:
        return "DOES NOT REPRODUCE: the bundle records no failure"
    return "DOES NOT REPRODUCE: now passing " + ", ".join(sorted(set(recorded) - set(now)))


def _diffs(recorded: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    return [f"{k}: {recorded.get(k, 'absent')} -> {here.get(k, 'absent')}"
            for k in sorted(set(recorded) | set(here)) if recorded.get(k) != here.get(k)]


def _derived(bundle: Bundle, runner: "GraphRunner", batches: Sequence["Batch"]) -> list["OutputResult"]:
    """The derived outputs (sentence vectors) re-computed from this run's token states."""
    out: list["OutputResult"] = []
    for row in bundle.derived():
        d = row["derived"]
        outputs = [runner.run(feeds) for feeds, _, _ in batches]
        judged = embedding_parity(bundle.manifest["graph"], Pooling(d["pooling"], bool(d["normalize"])), batches,
                                  outputs, bundle.precision, hidden=d.get("from", "last_hidden_state"))
        out.append(replace(judged.output, output=row["name"]))
    return out


def rejudge(bundle: Bundle, provider: str | None = None, threads: int | None = None) -> ReproResult:
    """Run the bundled feeds through the artifact with the recorded runtime settings and judge
    the outputs against the bundled reference with the recorded thresholds."""
    m = bundle.manifest
    path, source = bundle.artifact()
    prov = parse_provider(provider or m["provider"], option="--providers")
    runtime = runtime_from(m.get("runtime"))
    workers = threads if threads is not None else m.get("threads")
    runner = open_onnx(path, prov, workers, bundle.precision, runtime)
    try:
        absent = [n for n in bundle.graph().output_names if n not in runner.output_names]
        if absent:
            raise BundleError(f"{bundle.directory}: {path.name} has no output(s) {', '.join(absent)}; "
                              f"it has {', '.join(runner.output_names)}")
        batches = bundle.batches()
        judged = run_graph_parity(runner, bundle.graph(), batches, bundle.precision)  # type: ignore[arg-type]
        judged += _derived(bundle, runner, batches)
    finally:
        runner.close()
    tolerances = bundle.tolerances()
    judged = [replace(o, tolerance=tolerances.get(o.output)) for o in judged]
    now = [(f.output, f.metric) for o in judged for f in o.failures()]
    recorded = [(f["output"], f["metric"]) for f in m["verdict"]["failures"]]
    version_diffs, env_diffs = here_vs_recorded(m, workers)
    return ReproResult(recorded, now, judged, source, version_diffs, env_diffs)
