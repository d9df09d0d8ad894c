"""What a source of artifacts gives a case job, and the state one job runs in.

The engine's stages are the same for every source; a source says only what differs: how its
artifacts open (refusals before any model loads), how each is reached as a runner, what its records
add (a served model's metadata, the files' runtime settings), and the stages only it has (a served
model's concurrency check and load sweep; the files' fresh-process timing).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from harness.case.collector import Case

if TYPE_CHECKING:  # pragma: no cover
    from harness.case.collector import Case
    from harness.check.judge import CheckOutcome
    from harness.check.layout import ArtifactFile
    from harness.check.request import CheckRequest, CheckSetup
    from harness.families import Family
    from harness.judge.workspace import Workspace
    from harness.results.outcome import CaseResult
    from harness.runners.base import GraphRunner
    from harness.runners.prebuilt import PrebuiltGraphs
    from harness.zoo.loading import LoadedModel


@dataclass
class JobRun:
    """One case job in progress: what every stage reads, and where results go."""

    ws: Workspace
    req: CheckRequest
    source: JobSource
    outcome: CheckOutcome
    model: LoadedModel
    family: Family
    run_dir: Path
    run_id: str
    #: the ``settings`` every record of this job carries
    settings: dict[str, Any] = field(default_factory=dict)

    def case(self, suite: str) -> Case:
        """A fresh record builder for one of this job's records (``<suite>[<variant>]``)."""
        variant = self.outcome.variant
        return Case(self.ws, variant, self.run_dir, f"{suite}[{variant.id}]")


class JobSource(abc.ABC):
    """Where a case job's artifacts come from, opened: the setup resolved against them and the
    workspace's artifact source (``graphs``) that serves their runners."""

    #: how records and docs name the source (``files``, ``endpoint``)
    kind: ClassVar[str]

    def __init__(self, setup: CheckSetup, graphs: PrebuiltGraphs) -> None:
        self.setup, self.graphs = setup, graphs

    @classmethod
    @abc.abstractmethod
    def open(cls, req: CheckRequest, run_dir: Path) -> JobSource:
        """Open the request's artifacts; everything a user got wrong is a ``UsageError`` here,
        before any model loads."""

    @property
    def artifacts(self) -> list[ArtifactFile]:
        return self.setup.artifacts

    @property
    def records(self) -> dict[str, dict[str, Any]]:
        """Each artifact as the record's ``artifacts`` names it."""
        return dict(self.graphs.records)

    def complete(self, ws: Workspace, model: LoadedModel, family: Family, req: CheckRequest) -> list[ArtifactFile]:
        """The artifacts as judged, once the reference is loaded (a source whose description of them is
        partial fills it in here); by default as opened."""
        return self.artifacts

    def before_judging(self, run: JobRun) -> None:
        """Called once the reference is loaded, before any job is judged (nothing by default)."""

    def session(self, artifact: ArtifactFile) -> GraphRunner:
        """The runner of one artifact under its own I/O names."""
        return self.graphs.session(artifact.path)

    @abc.abstractmethod
    def settings(self, run: JobRun) -> dict[str, Any]:
        """What this source adds to every record's ``settings``."""

    def annotate(self, case: Case) -> None:
        """What this source adds to a record's ``data`` (nothing by default)."""

    def profiles(self) -> dict[str, dict[str, Any]]:
        """The profiling stage's summaries, by artifact (``--profile``; none by default)."""
        return {}

    def extra_stages(self, run: JobRun) -> list[CaseResult]:
        """Records only this source has, judged after the numeric case (none by default)."""
        return []

    @abc.abstractmethod
    def perf_stage(self, run: JobRun) -> CaseResult:
        """``--perf``: the ``check_perf`` record, as this source is timed."""

    def close(self) -> None:
        self.graphs.close()


__all__ = ["JobRun", "JobSource"]
