"""The one place a ``Record`` is put together.

Two producers make records: the pytest plugin's ``RecordCollector`` (from a test's reports, in the
controlling process) and ``harness check`` (from a judged artifact, without pytest). Both hand over
the same three things (who the case is, what it measured, how it ended) and get the same record;
only the pytest path knows a node id and a rerun command.

The run id is not a module global: each producer holds one per session (``new_run_id``) and passes
it, so two sessions in one process (nested pytest runs, a CLI calling the plugin) never share one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from harness import __version__
from harness.results.envinfo import environment
from harness.results.record import Record, Verdict

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Variant


def new_run_id() -> str:
    """A fresh id for one session's records (12 hex digits, as ``harness.result/1`` has always had)."""
    return uuid.uuid4().hex[:12]


def finished_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass(frozen=True)
class CaseIdentity:
    """Who a case is, as the record names it (the plugin ships it as the ``harness_case`` user
    property, a dict because xdist serialises user properties)."""

    variant: str | None = None
    model: str | None = None
    precision: str | None = None
    backend: str | None = None
    provider: str | None = None
    execution_provider: str | None = None
    suite: str | None = None
    #: the case's runtime axis values, ``graph_optimization=disabled`` (None: no axis in the run)
    runtime: str | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CaseIdentity:
        def get(key: str) -> str | None:
            value = raw.get(key)
            return None if value is None else str(value)

        return cls(get("variant"), get("model"), get("precision"), get("backend"), get("provider"),
                   get("execution_provider"), get("suite"), get("runtime"))

    @classmethod
    def of_variant(cls, variant: "Variant", suite: str, display_id: str | None = None) -> CaseIdentity:
        """From a ``harness.core.Variant`` (``display_id``: the id shown for a local-path model)."""
        axes = ",".join(f"{k}={v}" for k, v in variant.runtime) or None
        return cls(display_id or variant.id, variant.model, variant.precision.value, variant.backend,
                   variant.provider.short, variant.provider.device, suite, axes)

    def as_dict(self) -> dict[str, str | None]:
        return {"variant": self.variant, "model": self.model, "precision": self.precision, "backend": self.backend,
                "provider": self.provider, "execution_provider": self.execution_provider, "suite": self.suite,
                "runtime": self.runtime}


def compose(*, case_id: str, nodeid: str, run_id: str, identity: CaseIdentity, payload: Mapping[str, Any],
            verdict: Verdict, reason: str, duration_s: float, settings: Mapping[str, Any] | None = None,
            rerun: str | None = None, finished: str | None = None) -> Record:
    """The record of one case. ``payload`` is what the case collected (``Case.payload()``: metrics,
    thresholds, artifacts, data, perf, env, settings, model_sha256); ``settings`` overrides the
    payload's (``harness check`` records its own)."""
    env = payload.get("env")
    if not env:
        env = environment()
    return Record(
        id=case_id,
        nodeid=nodeid,
        run_id=run_id,
        suite=identity.suite,
        variant=identity.variant,
        model=identity.model,
        model_sha256=payload.get("model_sha256"),
        precision=identity.precision,
        backend=identity.backend,
        provider=identity.provider,
        execution_provider=identity.execution_provider,
        verdict=verdict,
        reason=reason,
        metrics=dict(payload.get("metrics") or {}),
        thresholds=dict(payload.get("thresholds") or {}),
        artifacts=dict(payload.get("artifacts") or {}),
        settings=dict(settings if settings is not None else payload.get("settings") or {}),
        env=dict(env),
        rerun=rerun,
        duration_s=round(float(duration_s), 4),
        finished=finished or finished_now(),
        harness_version=str(__version__),
        data=dict(payload.get("data") or {}),
        perf=dict(payload.get("perf") or {}),
        phases=dict(payload.get("phases") or {}),
        memory=dict(payload.get("memory") or {}),
    )


class StandaloneCase(Protocol):
    """What ``compose_standalone`` needs of a case (``harness.case.collector.Case``)."""

    @property
    def variant(self) -> "Variant | None": ...

    def payload(self) -> dict[str, Any]: ...


def compose_standalone(case: StandaloneCase, *, suite: str, run_id: str, verdict: Verdict, reason: str,
                       duration_s: float, settings: Mapping[str, Any]) -> Record:
    """A record for a case judged outside pytest (``harness check``): id ``<suite>[<variant>]``,
    node id ``harness check::<id>``, no rerun command."""
    variant = case.variant
    if variant is None:
        raise ValueError("a standalone case needs a variant")
    case_id = f"{suite}[{variant.id}]"
    return compose(case_id=case_id, nodeid=f"harness check::{case_id}", run_id=run_id,
                   identity=CaseIdentity.of_variant(variant, suite), payload=case.payload(), verdict=verdict,
                   reason=reason, duration_s=duration_s, settings=settings)
