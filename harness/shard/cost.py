"""What a case is expected to cost when no durations exist: graphs x model size x precision x suite.

Without ``--shard-durations`` every case used to weigh 1, and LPT over equal weights in id order
deals the sorted ids out alternately: ``...-fp32-ort_cpu`` and ``...-fp32-torch_cpu`` sit next to
each other, so ``--shard 1/2`` of the default run got every ``ort_cpu`` case and ``2/2`` every
``torch_cpu`` one, and a perf case (seconds to a minute) weighed what a parity case
(a fraction of a second) does. The estimate below is a relative weight, not seconds: only the
ratio between cases decides a split. Its factors, from the default run's durations on the 2-core
box (docs/sharding.md, "Estimated cost"):

* **graphs**: a seq2seq model exports, converts and runs encoder, decoder and decoder-with-past
  (3), an encoder or decoder-only model one graph;
* **model size**: 1 + weight bytes / 64 MiB, read from the model's files when they are already on
  disk (a user directory, or a zoo entry already built in the cache: nothing is built to weigh it);
  an unknown size counts as 1;
* **precision**: FP16 and INT8 variants convert or quantise the FP32 graph first (1.5, 1.3); a
  PyTorch FP16 variant on a CPU also runs its matmuls converted: its size term counts 3x
  (:data:`TORCH_CPU_FP16_SIZE`);
* **backend**: PyTorch variants export nothing (0.6);
* **suite**, per kind of variant (:data:`SUITE_FACTOR`: one that runs exported files, a PyTorch
  one): perf cases time hundreds of calls or start fresh processes, and a PyTorch variant's fresh
  process imports torch and transformers and builds its module each time (``test_cold_start_memory``
  7 and 165: its three children took 16-28 s a PyTorch variant against 1.0-2.1 s an ONNX Runtime
  one here), generation parity decodes sentence by sentence (4), every other suite 1; a *flat*
  suite (the cold start, the generation benchmark) costs the same whatever the graph count and
  the precision (:class:`SuiteFactor`);
* **export** (added, not multiplied): a model whose exporter is slow for reasons its size does not
  show (:data:`EXPORTER_COST`: the dynamo exporter traces the program and optimises the ONNX graph,
  10 s on the 0.2 MB ``encoder-custom`` against 0.3 s for TorchScript on ``bert-tiny``) costs that
  much more on a case that exports, unless its FP32 graph is already in the artifact cache.

The weights enter ``shard.json``'s plan digest, so shards that estimated differently (another
cache state) are refused by ``harness merge`` like shards given different durations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:  # pragma: no cover
    from harness.core.types import Variant
    from harness.zoo.base import ModelCatalog

MiB = 1024 * 1024
#: weight bytes that double a case's cost
SIZE_UNIT = 64 * MiB
PRECISION_FACTOR: Mapping[str, float] = {"fp32": 1.0, "fp16": 1.5, "int8": 1.3}
TORCH_FACTOR = 0.6
#: PyTorch at FP16 on a CPU: the size-bound part of a case (``bytes / SIZE_UNIT``) times this. A CPU
#: has no half-precision matrix units, so the module's matmuls run converted: logits parity of
#: minilm-l6 (90 MB) took 1.81-1.89 s at FP16 on ``torch_cpu`` against 0.52-0.68 s at FP32 (four
#: default runs here, 2026-12-03), where the precision factor alone said 1.5x. On 23 kept runs
#: replayed through the ETA it moved 16 of 920 estimates inside +-30 % and none out on ``--perf``.
TORCH_CPU_FP16_SIZE = 3.0


@dataclass(frozen=True)
class SuiteFactor:
    """A suite's cost against a numeric parity case, for a variant that runs exported files and for
    a PyTorch one (the latter on top of :data:`TORCH_FACTOR`).

    ``flat``: the case's time is a fixed amount of work per case (fresh processes that import and
    load the model, a fixed count of timed generations), so neither the graph count nor the
    precision multiplies it. Measured here on two cold-cache runs of ``--perf --models marian-tiny
    llama-tiny`` beside another job (load average 2.2 and 2.0): ``test_cold_start_memory`` took
    16-28 s a PyTorch variant whether the model runs one graph (llama-tiny) or three (marian-tiny),
    and 1.0-2.1 s an ONNX Runtime one, FP32, FP16 or INT8 alike; ``test_generation_perf`` 1.2-2.0 s
    a PyTorch variant and 0.3-0.5 s an ONNX Runtime one in the first run, both models, every
    precision (graphs x precision had priced marian-tiny's FP16 case 4.5x llama-tiny's FP32 one)."""

    files: float
    pytorch: float
    flat: bool = False


#: measured on the default run and ``--perf --models marian-tiny llama-tiny`` here (2 cores, CPU):
#: each suite's seconds per unit of the other factors, against numeric parity's (docs/sharding.md)
SUITE_FACTOR: Mapping[str, SuiteFactor] = {
    # flat, in units of numeric parity's seconds per unit in the same run (0.185 and 0.22 in the
    # two runs): cold start 1.2 / 1.75 s an ONNX Runtime variant (6.3 / 8.0 units) and 16.8 / 23.8 s
    # a PyTorch one (91 / 108 units, / 0.6 = 151 / 180), means of 6 cases each
    "test_cold_start_memory": SuiteFactor(7.0, 165.0, flat=True),
    "test_latency": SuiteFactor(5.0, 15.0),
    # flat: 0.38 s an ONNX Runtime variant (2 units) and 1.56 s a PyTorch one (8.4 units, / 0.6 =
    # 14), the first run, means of 6 each (in the second, PyTorch FP16/INT8 generation took 14-28 s
    # in a burst of the other job's load: not the model's cost, the run's own rate absorbs it)
    "test_generation_perf": SuiteFactor(2.0, 14.0, flat=True),
    "test_generation_parity": SuiteFactor(4.0, 4.0),
    "test_embedding_parity": SuiteFactor(2.0, 2.0),
}
#: cost units added to a case that exports with this exporter (module docstring: not size-bound)
EXPORTER_COST: Mapping[str, float] = {"dynamo": 40.0}
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx", ".data")


@dataclass(frozen=True)
class CaseCost:
    """The factors of one case's estimate (kept so a test or a reader can see why)."""

    graphs: int
    size: float
    precision: float
    backend: float
    suite: float
    export: float = 0.0  # added: the exporter's own cost, when this case may export (not cached)

    @property
    def weight(self) -> float:
        return round(self.graphs * self.size * self.precision * self.backend * self.suite + self.export, 4)


def _weight_bytes(directory: Path) -> int:
    try:
        return sum(p.stat().st_size for p in directory.iterdir() if p.is_file() and p.suffix in _WEIGHT_SUFFIXES)
    except OSError:
        return 0


def model_bytes(name: str, catalog: "ModelCatalog | None") -> int:
    """Weight bytes of ``name`` if its files are already on disk; 0 when unknown (nothing is built)."""
    from harness.zoo.base import ModelCatalog, cache_root, is_path

    if is_path(name):
        return _weight_bytes(Path(name).expanduser())
    try:
        spec = (catalog or ModelCatalog()).resolve(name)
    except Exception:  # noqa: BLE001 - an unknown model fails later, with its own message
        return 0
    if spec.path is not None:
        return _weight_bytes(Path(spec.path))
    built = sorted((cache_root() / "zoo").glob(f"{spec.name}-*"))
    return max((_weight_bytes(p) for p in built if p.is_dir()), default=0)


def graph_count(name: str, catalog: "ModelCatalog | None") -> int:
    """Graphs the variant exports and runs: the family's decode graphs with the KV cache, or 1."""
    from harness.families.registry import family_for
    from harness.zoo.base import ModelCatalog

    try:
        spec = (catalog or ModelCatalog()).resolve(name)
        return len(family_for(spec.family).generation_graphs(True)) if spec.generates else 1
    except Exception:  # noqa: BLE001 - no generation head, or an unknown model: one graph
        return 1


def export_cost(name: str, catalog: "ModelCatalog | None") -> float:
    """:data:`EXPORTER_COST` of the exporter ``name`` needs, or 0 when its FP32 graphs are already in
    the artifact cache (``<cache>/artifacts/<model>-<graph>-fp32-<key>``: a name match, so an entry
    built with other settings reads as cached) or the model declares no exporter of its own."""
    from harness.zoo.base import ModelCatalog, cache_root

    try:
        spec = (catalog or ModelCatalog()).resolve(name)
    except Exception:  # noqa: BLE001 - an unknown model fails later, with its own message
        return 0.0
    cost = EXPORTER_COST.get(spec.exporter or "", 0.0)
    if cost and any(p.is_dir() for p in (cache_root() / "artifacts").glob(f"{spec.name}-*-fp32-*")):
        return 0.0
    return cost


def case_cost(test: str, variant: "Variant", catalog: "ModelCatalog | None" = None,
              sizes: dict[str, int] | None = None, exports: dict[str, float] | None = None) -> CaseCost:
    """The estimate for the case ``test[variant]``; ``sizes`` and ``exports`` memoise each model's
    size and export cost across cases."""
    sizes = {} if sizes is None else sizes
    exports = {} if exports is None else exports
    if variant.model not in sizes:
        sizes[variant.model] = model_bytes(variant.model, catalog)
    torch = variant.backend == "pytorch"
    slowed = TORCH_CPU_FP16_SIZE if torch and variant.precision.value == "fp16" and variant.provider.device == "cpu" \
        else 1.0
    size = 1.0 + slowed * sizes[variant.model] / SIZE_UNIT
    if not torch and variant.model not in exports:
        exports[variant.model] = export_cost(variant.model, catalog)
    suite = SUITE_FACTOR.get(test, SuiteFactor(1.0, 1.0))
    return CaseCost(
        graphs=1 if suite.flat else graph_count(variant.model, catalog),
        size=round(size, 3) if math.isfinite(size) else 1.0,
        precision=1.0 if suite.flat else PRECISION_FACTOR.get(variant.precision.value, 1.0),
        backend=TORCH_FACTOR if torch else 1.0,
        suite=suite.pytorch if torch else suite.files,
        export=0.0 if torch else exports[variant.model],
    )
