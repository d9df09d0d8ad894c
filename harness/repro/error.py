"""Error repro bundles (``kind: error``): a case whose artifact the runtime refused to load or run.

A case that *errors* has no numbers to re-judge, but its question is just as portable: does this
file, fed these inputs on this provider, still raise the same error? The bundle holds the ONNX
file (or its path and sha256), every batch the case fed it (``data.npz``
``batch<i>.input.<name>``), which batch failed (or that loading failed), the exception's type,
message and traceback, the runtime settings, versions and environment.

When it is written the error is first re-raised from the file itself, outside the harness's
caches, so the recorded type is the runtime's own (a warm rerun replays a cached refusal as
``ReplayedError``); an exception the file does not raise (an error in the harness's own code,
an export that failed before there was a file) writes no bundle -- the case's rerun command is
then the way to reproduce it.

``harness repro`` opens the file on the recorded provider, runs the failing batch, and compares
type and normalised message (``normalize``: addresses, paths and source locations removed, so
another machine's install prefix or an ORT source line does not read as a different error).
A generation case's error (a decoding graph that fails to load or to run) is the same kind with a
``decode`` section and several graphs: ``error_decode.py``.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.core import Precision, Variant
from harness.repro import error_decode
from harness.repro.bundle import (
    DATA,
    FORMAT,
    Bundle,
    BundleError,
    Outcome,
    bundle_artifact,
    check_artifact,
    here_vs_recorded,
    recorded_facts,
    resolve_artifact,
    runtime_from,
    runtime_json,
    sha256_file,
    write_manifest,
)
from harness.repro.errortext import clip, normalize
from harness.runners import backends, parse_provider

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Provider
    from harness.core.runtime import RuntimeSettings



@dataclass(frozen=True)
class Raised:
    """What the file did with the feeds: where it failed (load / run of batch i) and how."""

    stage: str  # "load" or "run"
    batch: int | None
    type: str
    message: str

    @property
    def normalized(self) -> str:
        return normalize(self.message)


def provoke(path: Path, provider: "Provider", precision: Precision, threads: int | None,
            runtime: "RuntimeSettings | None", batches: Sequence[Mapping[str, np.ndarray]],
            only: int | None = None) -> Raised | None:
    """Open ``path`` with the provider's backend and run the batches (or batch ``only``) until it
    raises; None when it loads and runs them all."""
    backend = backends()[provider.backend]
    try:
        runner = backend.open_onnx_file(path, provider, precision, threads, runtime)
    except Exception as exc:  # noqa: BLE001 - any failure to load is the evidence this bundle replays
        return Raised("load", None, type(exc).__name__, str(exc).strip())
    try:
        for i, feeds in enumerate(batches):
            if only is not None and i != only:
                continue
            try:
                runner.run(dict(feeds))
            except Exception as exc:  # noqa: BLE001 - any failure to run is the evidence this bundle replays
                return Raised("run", i, type(exc).__name__, str(exc).strip())
    finally:
        runner.close()
    return None


def write_error_bundle(directory: Path, *, variant: Variant, graph: str, artifact: Path,
                       batches: Sequence[Mapping[str, np.ndarray]], exc: BaseException,
                       runtime: "RuntimeSettings | None", threads: int | None, mode: str = "auto") -> Path | None:
    """Bundle the error ``exc`` of ``graph``'s artifact if the file itself raises it on these
    feeds; None otherwise (the error is not the file's: the rerun command reproduces it)."""

    if mode == "off" or not artifact.is_file() or not artifact.name.endswith(".onnx"):
        return None
    raised = provoke(artifact, variant.provider, variant.precision, threads, runtime, batches)
    if raised is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {f"batch{i}.input.{k}": np.asarray(v) for i, feeds in enumerate(batches) for k, v in feeds.items()}
    np.savez_compressed(directory / DATA, **arrays)  # type: ignore[arg-type]  # **arrays vs allow_pickle: bool
    art, copied = bundle_artifact(directory, artifact, mode)
    manifest = {
        "format": FORMAT, "kind": "error", "case": variant.id, "model": variant.model, "graph": graph,
        "precision": variant.precision.value, "provider": variant.provider.short, "backend": variant.provider.backend,
        "threads": threads, "runtime": runtime_json(runtime), "artifact": art, "batches": len(batches),
        "inputs": sorted(batches[0]) if batches else [],
        "error": {"stage": raised.stage, "batch": raised.batch, "type": raised.type, "message": raised.message,
                  "normalized": raised.normalized, "case_type": type(exc).__name__,
                  "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:]},
        "verdict": {"passed": False, "failures": [{"error": raised.type}]},
        **recorded_facts(threads),
        "files": {DATA: sha256_file(directory / DATA), **copied},
    }
    return write_manifest(directory, manifest)


def validate(manifest_path: Path, m: Mapping[str, Any]) -> None:
    if "decode" in m:  # a generation case's error: several graphs and a decode (error_decode.py)

        error_decode.validate(manifest_path, m)
        return
    check_artifact(manifest_path, m.get("artifact"))
    err = m["error"]
    if not isinstance(err, dict) or err.get("stage") not in ("load", "run") or not {"type", "message"} <= set(err):
        raise BundleError(f"{manifest_path}: error must have stage (load or run), type and message")
    if err["stage"] == "run" and not isinstance(err.get("batch"), int):
        raise BundleError(f"{manifest_path}: a run error must name its batch")


def _batches(bundle: Bundle) -> list[dict[str, np.ndarray]]:
    m = bundle.manifest
    try:
        with np.load(bundle.directory / DATA, allow_pickle=False) as data:
            return [{n: data[f"batch{i}.input.{n}"] for n in m["inputs"]} for i in range(int(m["batches"]))]
    except KeyError as exc:
        raise BundleError(f"{bundle.directory}: {DATA} has no array {exc.args[0]!r} that bundle.json names") from None


def outcome(bundle: Bundle, provider: str | None, threads: int | None) -> Outcome:
    """``harness repro`` of an error bundle: the same type and normalised message again?"""
    if "decode" in bundle.manifest:
        return error_decode.outcome(bundle, provider, threads)

    m = bundle.manifest
    path, source = resolve_artifact(bundle.directory, m["artifact"])
    prov = parse_provider(provider or m["provider"], option="--providers")
    workers = threads if threads is not None else m.get("threads")
    err = m["error"]
    batches = _batches(bundle)
    now = provoke(path, prov, Precision(m["precision"]), workers, runtime_from(m.get("runtime")), batches,
                  only=err.get("batch") if err["stage"] == "run" else None)
    recorded = Raised(err["stage"], err.get("batch"), err["type"], err["message"])
    where = "loading the file" if recorded.stage == "load" else f"running batch {recorded.batch}"
    lines = [f"artifact: {source}", f"recorded: {recorded.type} {where}: {clip(recorded.message)}"]
    same_type = now is not None and now.type == recorded.type and now.stage == recorded.stage
    same_message = now is not None and now.normalized == recorded.normalized
    if now is None:
        lines.append(f"now: no error ({where} succeeded)")
    else:
        lines.append(f"now: {now.type} {'loading the file' if now.stage == 'load' else f'running batch {now.batch}'}: "
                     f"{clip(now.message)}")
        lines.append(f"  type {'same' if same_type else 'DIFFERENT'}; normalised message "
                     f"{'same' if same_message else 'DIFFERENT'}")
    reproduces = same_type and same_message
    if reproduces:
        verdict = f"REPRODUCES: {recorded.type} again ({where})"
    elif now is None:
        verdict = "DOES NOT REPRODUCE: the file loads and runs here"
    else:
        verdict = f"DOES NOT REPRODUCE: a different error ({now.type})"
    versions, env = here_vs_recorded(m, workers)
    data = {"recorded_error": {"type": recorded.type, "stage": recorded.stage, "batch": recorded.batch,
                               "normalized": recorded.normalized},
            "error_now": None if now is None else {"type": now.type, "stage": now.stage, "batch": now.batch,
                                                   "message": now.message, "normalized": now.normalized},
            "same_type": same_type, "same_message": same_message, "artifact": source}
    return Outcome(lines, reproduces, verdict, data, versions, env)
