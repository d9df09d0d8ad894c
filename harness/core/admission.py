"""Resource admission: what a model directory or an ONNX file would take, checked before it is loaded.

A gate runs on files nobody here wrote, and an OOM kill loses every record of the run. A
``config.json`` with ``vocab_size`` 10^11, an ONNX graph whose declared shapes expand to tens
of GB, a million-node graph or a multi-GB ``tokenizer.json`` is refused with one line naming the
input and the estimate, exit 2, before anything is allocated for it. The estimates are read
from what the files *declare* (no weights read, no graph run):

- a model directory: the parameter count its ``config.json`` implies (embeddings, positions and
  per layer ``4 h^2 + 2 h i``), as FP32, three copies alive at once (the PyTorch reference, the
  exporter's copy, the runtime session), plus the judged batch's logits and attention scores;
- a ``tokenizer.json``: :data:`TOKENIZER_FACTOR` times its size (measured: a 20 MB WordLevel
  file took 155 MB resident once parsed, 7.6x; MiniLM's 0.47 MB one 10 MB, mostly fixed cost);
- an ONNX file: its node count (subgraphs included) against ``--max-nodes``; its initializer
  bytes plus its largest declared tensor at the judged batch and length (symbolic dimensions:
  the first is the batch, the others the length; shapes inferred with constant propagation).

The limit is ``--max-memory`` when given, else the memory this machine has available now
(``MemAvailable``). Estimates are deliberately simple and err on the large side for the
bombs (orders of magnitude over), not for real models (a 7B model estimates at ~84 GB of FP32).
"""

from __future__ import annotations

import json
import math
import re
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from harness.core.errors import UsageError
from harness.core.units import binary_bytes as format_bytes

if TYPE_CHECKING:  # pragma: no cover
    import onnx

#: a graph with more nodes than this is refused unless ``--max-nodes`` allows it (real exports:
#: a 2-layer BERT ~400 nodes, a 32-layer decoder ~10 000)
DEFAULT_MAX_NODES = 500_000
#: resident bytes per byte of ``tokenizer.json`` once parsed (measured 7.6x; rounded up)
TOKENIZER_FACTOR = 10
#: FP32 copies of the weights alive at once while a case runs: reference, exporter, session
WEIGHT_COPIES = 3
#: ... while ``harness check`` judges files: the reference and the session, or one of them at a
#: time when the check is staged (``harness.check.staging``; ``--release-models`` not ``never``)
CHECK_COPIES = {"never": 2, "auto": 1, "always": 1}
#: the longest input the harness judges (tokens), when the config allows as many positions
JUDGED_LENGTH = 128

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


class TooLarge(UsageError):
    """An input whose estimate exceeds the limit: exit 2, one line."""


def parse_size(raw: object, where: str) -> int:
    """``8G``, ``512M``, ``1.5GiB``, ``1000000`` (bytes) -> bytes; anything else one line."""
    match = _SIZE.match(str(raw))
    if not match:
        raise UsageError(f"{where}: expected a size such as 8G, 512M or a number of bytes, got {raw!r}")
    value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if value < 1:
        raise UsageError(f"{where}: must be at least 1 byte, got {raw!r}")
    return int(value)


def available_bytes() -> int | None:
    """The memory this machine can give now (``MemAvailable``), None where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass(frozen=True)
class Limits:
    """The admission policy: ``max_memory`` (bytes; None: what the machine has available) and
    ``max_nodes``; ``batch`` and ``length`` are the judged input's size the estimates assume."""

    max_memory: int | None = None
    max_nodes: int = DEFAULT_MAX_NODES
    batch: int = 8
    length: int = JUDGED_LENGTH
    #: FP32 copies of the weights a model directory is estimated at (a check exports nothing)
    weight_copies: int = WEIGHT_COPIES

    def memory_limit(self) -> tuple[int | None, str]:
        """(bytes, how the limit was set) -- the option, else the machine."""
        if self.max_memory is not None:
            return self.max_memory, "--max-memory"
        free = available_bytes()
        return free, "this machine's available memory"


_LIMITS: ContextVar[Limits | None] = ContextVar("admission_limits", default=None)


def set_limits(limits: Limits) -> None:
    """The run's policy (front ends set it from ``--max-memory``, ``--max-nodes``, ``--batch-size``)."""
    _LIMITS.set(limits)


def limits() -> Limits:
    return _LIMITS.get() or Limits()


def limits_from(settings: Any) -> Limits:
    """The policy from a run's option values (``harness.core.values.Settings`` or argparse)."""
    raw = getattr(settings, "max_memory", None)
    nodes = getattr(settings, "max_nodes", None)
    batch = getattr(settings, "batch_size", None)
    return Limits(parse_size(raw, "--max-memory") if raw else None, int(nodes or DEFAULT_MAX_NODES),
                  int(batch or Limits.batch))


@dataclass(frozen=True)
class Estimate:
    """What an input would take: ``bytes`` and the words that say where the number comes from."""

    source: str
    bytes: int
    basis: str


def admit(estimate: Estimate, policy: Limits | None = None) -> None:
    """Refuse ``estimate`` above the memory limit (one line naming the input and the numbers)."""
    limit, how = (policy or limits()).memory_limit()
    if limit is not None and estimate.bytes > limit:
        raise TooLarge(f"{estimate.source}: needs about {format_bytes(estimate.bytes)} ({estimate.basis}), more than "
                       f"{how} ({format_bytes(limit)}); refused before loading (raise --max-memory if the "
                       "machine really has it)")


# -- model directories ------------------------------------------------------------------------------------

def _first(config: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)) and math.isfinite(value):
            return int(value)
    return None


def _sections(config: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The config and its nested text / decoder configs (multimodal and composite models)."""
    yield config
    for key in ("text_config", "decoder", "encoder", "language_config"):
        nested = config.get(key)
        if isinstance(nested, dict):
            yield nested


def config_estimate(path: Path, config: Mapping[str, Any], policy: Limits | None = None) -> Estimate | None:
    """The memory ``config.json`` implies at the judged batch and length, None when it names no
    sizes (not a transformer config this rule knows: left to the loader)."""
    policy = policy or limits()
    best: Estimate | None = None
    for section in _sections(config):
        hidden = _first(section, "hidden_size", "d_model", "n_embd", "dim", "embed_dim")
        vocab = _first(section, "vocab_size")
        if hidden is None or vocab is None:
            continue
        layers = (_first(section, "num_hidden_layers", "n_layer", "num_layers", "n_layers") or 0) + \
            (_first(section, "encoder_layers") or 0) + (_first(section, "decoder_layers") or 0)
        inner = _first(section, "intermediate_size", "ffn_dim", "encoder_ffn_dim", "n_inner", "d_ff") or 4 * hidden
        positions = _first(section, "max_position_embeddings", "n_positions", "n_ctx") or 0
        heads = _first(section, "num_attention_heads", "n_head", "encoder_attention_heads") or 1
        sizes = {"hidden": hidden, "vocab_size": vocab, "layers": layers, "intermediate": inner,
                 "positions": positions, "heads": heads}
        negative = [f"{k} {v}" for k, v in sizes.items() if v < 0]
        if negative:
            raise UsageError(f"{path / 'config.json'}: sizes must not be negative ({', '.join(negative)})")
        params = vocab * hidden + positions * hidden + layers * (4 * hidden * hidden + 2 * hidden * inner)
        length = min(policy.length, positions) if positions else policy.length
        activations = policy.batch * length * (vocab + heads * length + 4 * hidden) * 4
        copies = policy.weight_copies
        total = copies * 4 * params + activations
        basis = (f"config.json: about {params:,} parameters from vocab_size {vocab:,}, hidden {hidden:,}, "
                 f"{layers:,} layers, intermediate {inner:,}; {copies} FP32 cop{'y' if copies == 1 else 'ies'} "
                 f"plus batch "
                 f"{policy.batch} x {length} tokens of logits and attention")
        if best is None or total > best.bytes:
            best = Estimate(str(path), total, basis)
    return best


def json_estimate(file: Path) -> Estimate | None:
    """The memory a JSON file (``tokenizer.json``, ``config.json``) takes once parsed (None: absent)."""
    try:
        size = file.stat().st_size
    except OSError:
        return None
    return Estimate(str(file), size * TOKENIZER_FACTOR,
                    f"a {format_bytes(size)} file, about {TOKENIZER_FACTOR}x its size once parsed")


def admit_model_dir(path: Path) -> None:
    """Refuse a model directory whose JSON files or declared model would not fit, before any of
    them is parsed beyond ``config.json`` (itself admitted by its size first)."""
    for name in ("config.json", "tokenizer.json"):
        estimate = json_estimate(path / name)
        if estimate is not None:
            admit(estimate)
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # the loader names what is wrong with it
    if isinstance(config, dict):
        estimate = config_estimate(path, config)
        if estimate is not None:
            admit(estimate)


# -- ONNX graphs -------------------------------------------------------------------------------------------

def node_count(model: "onnx.ModelProto") -> int:
    """Nodes of the graph, its subgraphs (If/Loop/Scan bodies) and its local functions."""
    def count(graph: "onnx.GraphProto") -> int:
        total = 0
        for node in graph.node:
            total += 1
            for attr in node.attribute:
                if attr.HasField("g"):
                    total += count(attr.g)
                for sub in attr.graphs:
                    total += count(sub)
        return total

    return count(model.graph) + sum(len(f.node) for f in model.functions)


_ELEMENT_BYTES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 14: 8, 15: 16, 16: 2}


def _tensor_bytes(value: "onnx.ValueInfoProto", policy: Limits) -> tuple[int, str]:
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return 0, ""
    dims, shown, symbolic = 1, [], 0
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value"):
            size = max(int(dim.dim_value), 0)
            shown.append(f"{size:,}")
        else:
            size = policy.batch if symbolic == 0 else policy.length
            symbolic += 1
            shown.append(f"{dim.dim_param or '?'}={size}")
        dims *= size
    return dims * _ELEMENT_BYTES.get(tensor.elem_type, 4), " x ".join(shown)


def initializer_bytes(model: "onnx.ModelProto") -> int:
    """Bytes of the weights, held in the protobuf or declared by their external-data entries."""
    import onnx

    total = 0
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            info = {e.key: e.value for e in tensor.external_data}
            total += int(info.get("length") or 0) if str(info.get("length") or "0").isdigit() else 0
        else:
            total += len(tensor.raw_data) or tensor.ByteSize()
    return total


def graph_estimate(path: Path, model: "onnx.ModelProto", policy: Limits | None = None) -> Estimate:
    """Initializer bytes plus the largest tensor the graph declares or implies at the judged size."""
    import onnx

    policy = policy or limits()
    weights = initializer_bytes(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # noqa: BLE001 - inference is a help: the declared shapes still count
        inferred = model
    graph = inferred.graph
    largest, name, shape = 0, "", ""
    for value in [*graph.input, *graph.output, *graph.value_info]:
        size, shown = _tensor_bytes(value, policy)
        if size > largest:
            largest, name, shape = size, value.name, shown
    basis = f"{format_bytes(weights)} of initializers"
    if largest:
        basis += f" + its largest tensor {name!r} ({shape}) at {format_bytes(largest)}"
    return Estimate(str(path), weights + largest, basis)


def admit_graph(path: Path, model: "onnx.ModelProto", policy: Limits | None = None) -> None:
    """Refuse a graph with too many nodes, or whose weights and tensors would not fit."""
    policy = policy or limits()
    nodes = node_count(model)
    if nodes > policy.max_nodes:
        raise TooLarge(f"{path}: {nodes:,} nodes, more than --max-nodes {policy.max_nodes:,}; refused before a "
                       "session is built (raise --max-nodes if the graph is meant to be this large)")
    admit(graph_estimate(path, model, policy), policy)


def with_batch(policy: Limits, batch: int | None) -> Limits:
    return policy if not batch else replace(policy, batch=int(batch))


def cap_process(limit: int) -> Callable[[], None]:
    """Cap this process's data memory at ``limit`` bytes (``RLIMIT_DATA``: heap and private
    mappings) for the cases it runs; returns what puts the previous limit back.

    Why: an estimate admits what the files *declare*; a case can still allocate past it (a
    decode that grows, a runtime's arena). Under the cap the allocation fails in that case --
    a ``MemoryError`` in Python, recorded as the case's ``error`` with every other record kept;
    a native ``bad_alloc`` that aborts a pytest-xdist worker is its crash record -- instead of
    the kernel's OOM killer ending the whole run (and the machine's other jobs). Only with an
    explicit ``--max-memory``: the default limit is a snapshot of free memory, not a policy."""
    import resource  # deferred: a Unix-only module, needed only under --max-memory

    previous = resource.getrlimit(resource.RLIMIT_DATA)
    hard = previous[1]
    soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))

    def restore() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, previous)

    return restore
