"""Artifacts a team's own pipeline built, listed in the suite config, judged inside the run.

``[models.<name>.artifacts]`` in ``harness.toml`` maps a precision to an ONNX file or an
optimum-layout directory (optimum-cli, a hand-written ``torch.onnx.export``, a vendor tool).
Each becomes one case per ONNX Runtime provider (``test_artifact_parity[ticket-router-int8-ort_cpu]``),
judged against the PyTorch FP32 reference by the case engine's files source, as ``harness check``
judges them: inputs and outputs matched by name and shape, numeric parity per graph and, for
seq2seq / decoder-only models, generation parity. Models without listed artifacts are not part
of this suite.
"""

from __future__ import annotations

import pytest

from harness.case.collector import Case
from harness.core import Variant
from harness.suites import has_config_artifacts, runs_config_artifact


@pytest.mark.harness(where=has_config_artifacts, accepts=runs_config_artifact)
def test_artifact_parity(variant: Variant, harness: Case) -> None:
    # imported here: the engine loads the judging machinery (harness.judge.workspace), which a warm
    # rerun whose cases all replay (harness/plugins/replay.py) must not import at collection
    from harness.engine.inside import config_artifact_request, judge_inside

    judge_inside(harness, config_artifact_request(variant, harness)).tell_pytest()
