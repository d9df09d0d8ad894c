"""What decides a decode besides its runner: the parts of its output-cache key and the threads it runs on.

The generation judge (``judge.generation``: the variant's and PyTorch's decodes) and the KV-cache
closed loop (``judge.cached_decoding``) key their cached results on the same parts, so both
import them from here rather than from each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from harness.core.cachedir import package_digest, source_digest
from harness.families import steppers
from harness.generation.decode import DECODE_TORCH_THREADS
from harness.judge.refcache import texts_digest

if TYPE_CHECKING:  # pragma: no cover
    from harness.families import Family
    from harness.generation import GenerationSettings
    from harness.judge.workspace import Workspace
    from harness.zoo.loading import LoadedModel


def decode_threads(ws: "Workspace") -> int:
    """The run's ``--harness-threads`` if given, else the decoding default (see decode.py)."""
    return ws.options.settings.threads or DECODE_TORCH_THREADS


def decode_parts(ws: "Workspace", model: "LoadedModel", family: "Family", indices: Sequence[int],
                 texts: Sequence[str], settings: GenerationSettings, batch_size: int) -> dict[str, Any]:
    """What decides a decode besides the runner: model files, family and decoding code, the
    texts with their corpus indices, settings, batch size and threads."""
    return {"weights": model.weights_sha256, "model_files": ws.refs.files_digest(model),
            "family": f"{type(family).__module__}.{type(family).__qualname__}",
            "family_source": source_digest(type(family)), "indices": list(indices),
            "texts": texts_digest(list(texts)), "settings": settings.describe(), "batch_size": batch_size,
            "threads": decode_threads(ws), "decoding": package_digest("harness.generation"),
            "steppers": source_digest(steppers)}  # the family's step over the graphs (families/steppers.py)
