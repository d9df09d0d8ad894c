"""Artifacts a team's own pipeline built, listed in the suite config, judged inside the run.

``[models.<name>.artifacts]`` in ``harness.toml`` maps a precision to an ONNX file or an
optimum-layout directory (optimum-cli, a hand-written ``torch.onnx.export``, a vendor tool).
Each becomes one case per ONNX Runtime provider (``test_artifact_parity[ticket-router-int8-ort_cpu]``),
judged against the PyTorch FP32 reference by the same code as ``harness check``: inputs and
outputs matched by name and shape, numeric parity per graph and, for seq2seq / decoder-only
models, generation parity. Models without listed artifacts are not part of this suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core import Variant
from harness.results import Record, fail
from harness.results.collector import Case
from harness.suites import has_config_artifacts, runs_config_artifact


@pytest.mark.harness(where=has_config_artifacts, accepts=runs_config_artifact)
def test_artifact_parity(variant: Variant, harness: Case) -> None:
    from harness.check.judge import CheckRequest, run_check

    ws = harness.workspace
    spec = ws.spec(variant.model)
    options = ws.options
    request = CheckRequest(reference=spec.name, spec=spec, onnx=Path(spec.extra["artifacts"][variant.precision.value]),
                           precision=variant.precision.value, provider=variant.provider.short,
                           samples=options.settings.samples, batch_size=options.settings.batch_size,
                           threads=options.settings.threads)
    outcome = run_check(request, harness.run_dir)
    failures: list[str] = []
    errors: list[str] = []
    for record in map(Record.coerce, outcome.records):
        harness.metrics.update(record.metrics)
        harness.thresholds.update(record.thresholds)
        harness.artifacts.update(record.artifacts)
        harness.data[record.id.split("[")[0]] = record.data
        if record.verdict == "fail":
            failures.append(record.reason)
        elif record.verdict == "error":
            errors.append(record.reason)
    if errors:
        raise RuntimeError("; ".join(errors))
    if failures:
        fail("\n".join(failures))
