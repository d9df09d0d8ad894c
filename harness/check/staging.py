"""Judge a large model's files in stages, so its PyTorch module and their sessions never overlap.

A check needs two copies of the weights: the PyTorch FP32 reference's module and each file's
session. Judged job by job, both were alive together -- a 0.57 GB decoder's check peaked at 3.3x
its weights, a 7 B FP16 export would need more than a 32 GB machine has. The reference side of
every job is a function of the reference and the corpus alone, so it is computed first: each
job's batches and shape probes with their FP32 outputs, PyTorch's greedy decode and its steps of
the closed-loop cache check (all in the workspace's memo and the reference cache). Then the
module is freed and the allocator trimmed, and only then do the files' sessions open; the judging
that follows reads every reference from the memo. Time stays linear in the size (each stage runs
once); the one cost is that a file the runtime refuses is reported after the reference pass
instead of before it (it is still inspected first: a truncated or malformed file is exit 2 at once).

``--release-models`` decides: ``auto`` stages files of at least ``RELEASE_BYTES`` (the point from
which ``harness run`` frees a module between cases), ``always`` stages every check (CI proves the
path on a tiny model), ``never`` judges job by job as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from harness.check.jobs import plan_jobs
from harness.check.layout import ArtifactFile
from harness.core.rss import release_freed_memory
from harness.judge.cached_decoding import ReferenceSteps, reference_side, reference_steps

if TYPE_CHECKING:  # pragma: no cover
    from harness.engine.source import JobRun


def artifact_bytes(artifacts: Sequence[ArtifactFile]) -> int:
    """The files' bytes on disk, external data included: what their sessions will hold."""
    total = 0
    for art in artifacts:
        total += art.bytes
        for location in art.external_data:
            data = art.path.parent / location
            total += data.stat().st_size if data.is_file() else 0
    return total


def stages(release_models: str, artifacts: Sequence[ArtifactFile]) -> bool:
    """Whether a check of ``artifacts`` computes its references before any session opens."""
    from harness.judge.memory import RELEASE_BYTES  # deferred: read per call (tests patch harness.judge.memory)

    if release_models != "auto":
        return release_models == "always"
    return artifact_bytes(artifacts) >= RELEASE_BYTES


def reference_pass(run: JobRun) -> None:
    """Every reference the check will read, computed now with the PyTorch module; then the module
    freed and the freed heap handed back, before the files' sessions open."""
    from harness.check.judge import checked_graphs, generation_request, prepare_job
    from harness.judge.generation import decode_plan, reference_decode

    ws, req, model, family = run.ws, run.req, run.model, run.family
    prepared = [(job, prepare_job(ws, job, model, family, req.maps, req.protocol, req.protocol_origin))
                for job in plan_jobs(run.outcome.artifacts, family, model)]
    if req.generation and run.outcome.spec.generates:
        _, use_cache, why = family.decoding_runners(checked_graphs([(job, p.match, None) for job, p in prepared]))
        if not why:
            wanted, settings, indices, texts = decode_plan(ws, model, generation_request(req.gen_settings,
                                                                                        req.gen_samples, use_cache))
            batch_size = int(wanted["batch_size"])
            # the closed loop's PyTorch side is the greedy decode's own steps, recorded as it decodes
            # (as generation_parity does): PyTorch steps the corpus once, not twice
            steps = ReferenceSteps() if use_cache and settings.num_beams == 1 else None
            decoded = reference_decode(ws, model, indices, texts, settings, batch_size, steps)
            if use_cache:  # the closed loop's PyTorch side
                side, key = reference_side(ws, model)
                recorded = steps.sides(decoded.tokens, batch_size) if steps is not None else None
                reference_steps(ws, model, family, side, decoded.tokens, texts, settings, batch_size, key, recorded)
    if model.release_module():
        release_freed_memory()
    run.source.graphs.open_sessions()


__all__ = ["artifact_bytes", "reference_pass", "stages"]
