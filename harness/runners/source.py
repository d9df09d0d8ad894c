"""Where a variant's graphs come from: the artifact source, the first stage of every case.

A case is *resolve artifacts -> run -> compare -> record -> side outputs* (``harness.case.pipeline``).
Only the first stage differs between the harness's entry points, and it differs in one way: which
``Backend`` object serves a variant's graphs. ``harness run`` builds them (the harness's own exports
in the content-addressed cache: :class:`BuiltArtifacts`); ``harness check`` serves files built
elsewhere (``harness.runners.prebuilt.PrebuiltGraphs``); a served model answers over the network
(an endpoint source). Everything after that stage -- batches, the memoised FP32 reference, the
comparison, the record, the dump, the repro bundle, the profile -- is the same code.

Adding a source is one module: a subclass of :class:`ArtifactSource` whose :meth:`backend_for`
returns the backend that serves the variants it serves (None for the others, which are then built
as in a plain run), handed to ``Workspace(options, source=...)``. Nothing downstream asks which
source it has.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:  # pragma: no cover
    from harness.runners.base import Backend, BackendContext


class ArtifactSource(abc.ABC):
    """The source of one workspace's graphs, fixed when the workspace is built."""

    #: how records and docs name the source (``built``, ``files``, ``endpoint``)
    kind: ClassVar[str]

    @abc.abstractmethod
    def backend_for(self, backend: type[Backend], ctx: BackendContext) -> Backend | None:
        """The backend that serves a variant of ``backend`` (the variant's registered backend class)
        from this source, with the case's context; None when this source does not serve such
        variants (the reference's PyTorch variants under ``harness check``): the harness then
        builds them."""

    def close(self) -> None:
        """Release what the source holds open (sessions, connections). Safe to call twice."""


class BuiltArtifacts(ArtifactSource):
    """The harness builds every graph itself (exports, conversions, engines; cached by content)."""

    kind = "built"

    def backend_for(self, backend: type[Backend], ctx: BackendContext) -> Backend | None:
        return backend(ctx)


def serving_backend(source: ArtifactSource | None, backend: type[Backend], ctx: BackendContext) -> Backend:
    """The backend of a case: the source's, else the harness-built one."""
    served = source.backend_for(backend, ctx) if source is not None else None
    return served if served is not None else backend(ctx)


__all__ = ["ArtifactSource", "BuiltArtifacts", "serving_backend"]
