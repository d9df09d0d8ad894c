"""Results records for ``harness check``: the suites' schema, so one results store,
``summary.md``, baselines and gates serve both. Only the fields a pytest report would
fill (nodeid, duration) are composed here instead of by ``RecordCollector``."""

from __future__ import annotations

import time
from typing import Any

from harness import __version__
from harness.recording import RUN_ID, Case
from harness.results import SCHEMA


def compose(case: Case, *, suite: str, verdict: str, reason: str, duration_s: float,
            settings: dict[str, Any]) -> dict:
    assert case.variant is not None
    payload = case.payload()
    variant = case.variant
    case_id = f"{suite}[{variant.id}]"
    return {
        "schema": SCHEMA,
        "id": case_id,
        "nodeid": f"harness check::{case_id}",
        "run_id": RUN_ID,
        "suite": suite,
        "variant": variant.id,
        "model": variant.model,
        "model_sha256": payload["model_sha256"],
        "precision": variant.precision.value,
        "backend": variant.backend,
        "provider": variant.provider.short,
        "execution_provider": variant.provider.device,
        "verdict": verdict,
        "reason": reason,
        "metrics": payload["metrics"],
        "thresholds": payload["thresholds"],
        "artifacts": payload["artifacts"],
        "settings": settings,
        "env": payload["env"],
        "duration_s": round(duration_s, 4),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "harness_version": __version__,
        "data": payload["data"],
    }
