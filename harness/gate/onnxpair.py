"""Two ONNX files opened alike and fed alike: the runners and inputs of a paired A/B.

``harness perf-compare`` (two files a user names), ``harness baseline compare --perf`` (the blessed
artifacts against the candidate's, ``harness.gate.retime``) and environment pairs
(``harness.gate.envpair``) open their files through the backend interface (``Backend.open_onnx_file``
in this process, ``Backend.file_child_spec``/``child_load`` in a timing child) and time the runner's
own ``timed_call``: a paired verdict on ``ov_cpu`` times what OpenVINO runs, exactly as the perf
suite does, and any backend that runs ONNX files can be paired. The inputs are synthetic but shaped
like the recorded metric (batch x sequence length), read from the file's input signature, so both
sides of a pair get the very same arrays; token ids are drawn from a small range every vocabulary has.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.core import Precision, Provider, UsageError, Variant
from harness.core.runtime import RuntimeSettings
from harness.core.types import parse_precision
from harness.runners import backends, parse_provider
from harness.runners.intake import inspect_onnx, library_of
from harness.runners.prebuilt import runs_onnx_files
from harness.settings.commands import default_for

if TYPE_CHECKING:  # pragma: no cover
    from harness.core.runtime import RuntimeSettings
    from harness.runners.base import Backend, ChildSpec, GraphRunner

#: the pairing ``baseline compare --perf`` uses unless told (``harness.gate.retime``): 20 pairs of
#: 50 calls per side, the setting whose power ``scripts/bench_gate_power.py`` measured in its
#: paired mode (0/10 false alarms, 10/10 detections of +30 %, docs/perf-gate.md)
DEFAULT_PAIRS: int = default_for("pairs", "baseline compare")
DEFAULT_BLOCK: int = default_for("block", "baseline compare")

#: the graph name a single file is loaded under (in a timing child's spec and feeds)
GRAPH = "model"


@dataclass(frozen=True)
class FileRuntime:
    """How both sides of a paired comparison run a file: the provider (and with it the backend),
    the precision the backend runs it at (OpenVINO's inference hint) and the intra-op threads."""

    provider: Provider
    precision: Precision = Precision.FP32
    threads: int | None = None

    @classmethod
    def named(cls, provider: str, *, precision: str = "fp32", threads: int | None = None,
              option: str = "--providers") -> "FileRuntime":
        """From a provider short name; a provider whose backend cannot run ONNX files is one line."""
        found = parse_provider(provider, option=option)
        if not runs_onnx_files(backends().get(found.backend)):
            able = sorted(p.short for b in backends().values() if runs_onnx_files(b) for p in b.providers)
            raise UsageError(f"{option}: {provider!r} runs no ONNX files (backend {found.backend}); one of "
                             f"{', '.join(able)}")
        return cls(found, parse_precision(precision, option="--precisions"), threads or None)

    @property
    def backend(self) -> "type[Backend]":
        return backends()[self.provider.backend]

    def runtime(self) -> "RuntimeSettings":
        return RuntimeSettings(intra_op_threads=self.threads)

    def admit(self, path: Path) -> None:
        """The checks every user file gets before a runtime opens it, here or in a timing child
        (``harness.runners.intake``: external data inside its folder, no unnamed custom ops)."""
        if not path.is_file():
            raise UsageError(f"{path}: no such ONNX file")
        inspect_onnx(path, library_of(self.runtime()))

    def open(self, path: Path) -> "GraphRunner":
        """A runner of ``path`` in this process (:meth:`admit` first); a file the runtime cannot
        open is one line."""
        self.admit(path)
        unavailable = self.backend.unavailable_reason(self.variant())
        if unavailable:
            raise UsageError(f"{self.provider.short}: {unavailable}")
        try:
            return self.backend.open_onnx_file(path, self.provider, self.precision, self.threads, self.runtime())
        except Exception as exc:  # noqa: BLE001 - a corrupt or foreign file is bad input
            raise UsageError(f"{path}: {self.backend.label} cannot open it ({str(exc).splitlines()[0][:200]})") from None

    def child_spec(self, path: Path) -> "ChildSpec":
        """What a timing child in another environment loads for ``path`` (``Backend.child_load``)."""
        return self.backend.file_child_spec({GRAPH: str(path)}, self.variant(), self.runtime())

    def variant(self) -> Variant:
        return Variant("file", self.precision, self.provider)


_ELEMENT_TYPES = {1: np.float32, 10: np.float16, 11: np.float64, 6: np.int32, 7: np.int64, 9: np.bool_}


def synthetic_feeds(path: Path, batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    """Inputs for every graph input of the ONNX file ``path`` (its signature only, external data
    not read): symbolic dims -> batch (first) or seq (others); integer inputs get token ids 1..99
    (``*type*`` inputs zeros: a token-type table has 2 rows), ``*mask*`` inputs ones, float inputs
    N(0, 1)."""
    import onnx

    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception as exc:  # noqa: BLE001 - not an ONNX file: bad input
        raise UsageError(f"{path}: not a readable ONNX file ({str(exc).splitlines()[0][:160]})") from None
    weights = {init.name for init in graph.initializer}
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for arg in (i for i in graph.input if i.name not in weights):
        tensor = arg.type.tensor_type
        if tensor.elem_type not in _ELEMENT_TYPES:
            kind = onnx.TensorProto.DataType.Name(tensor.elem_type) if tensor.elem_type else "not a tensor"
            raise UsageError(f"input {arg.name!r} has type {kind}; only numeric tensors are generated")
        shape = [d.dim_value if d.dim_value > 0 else (batch if i == 0 else seq) for i, d in enumerate(tensor.shape.dim)]
        dtype = _ELEMENT_TYPES[tensor.elem_type]
        name = arg.name.lower()
        if "mask" in name or dtype is np.bool_:
            feeds[arg.name] = np.ones(shape, dtype=dtype)
        elif np.issubdtype(dtype, np.integer):
            feeds[arg.name] = (np.zeros(shape, dtype=dtype) if "type" in name
                               else rng.integers(1, 100, size=shape).astype(dtype))
        else:
            feeds[arg.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def same_inputs(path_a: Path, path_b: Path, feeds: dict[str, np.ndarray], where: str) -> None:
    """Both files take the inputs generated for the first (one line naming both sets if not)."""
    other = set(synthetic_feeds(path_b, 1, 1, 0))
    if other != set(feeds):
        raise UsageError(f"{where}: the files take different inputs ({sorted(feeds)} vs {sorted(other)})")
