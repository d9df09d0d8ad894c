"""Pre-built ONNX artifacts: read them safely and describe their I/O and optimum role.

An artifact is untrusted input, like a model directory: a truncated or corrupt file is a
one-line ``UsageError`` naming the file (exit 2), and external-data locations that point
outside the artifact's directory are refused before onnxruntime would read them.
Directories follow optimum's layout (PITFALLS #5): ``encoder_model.onnx``,
``decoder_model.onnx``, ``decoder_with_past_model.onnx``, ``decoder_model_merged.onnx``
and ``model.onnx``, whichever are present.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import onnx
from onnx import TensorProto

from harness.core import UsageError, describe_error
from harness.core.admission import admit_graph
from harness.core.cachedir import file_sha256
from harness.families.base import OPTIMUM_FILES
from harness.runners.intake import check_external_data, external_refs

#: optimum's file names -> the harness's graph names
_INT8_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
                       "ConvInteger", "QLinearMatMul", "QLinearConv", "DynamicQuantizeMatMul", "QAttention",
                       "QGemm", "MatMulNBits", "QOrderedMatMul"})
_DTYPES: dict[int, str] = {TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16", TensorProto.DOUBLE: "float64",
           TensorProto.BFLOAT16: "bfloat16", TensorProto.INT64: "int64", TensorProto.INT32: "int32",
           TensorProto.INT8: "int8", TensorProto.UINT8: "uint8", TensorProto.BOOL: "bool"}


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output as the artifact declares it. ``shape`` entries are ints
    (static), strings (named dynamic axes) or None (unnamed); ``shape`` None = unknown rank."""

    name: str
    dtype: str
    shape: tuple[int | str | None, ...] | None

    @property
    def kind(self) -> str:
        if self.dtype == "bool":
            return "bool"
        return "float" if self.dtype.startswith(("float", "bfloat")) else "int"

    def describe(self) -> str:
        dims = "?" if self.shape is None else ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype}[{dims}]"


@dataclass(frozen=True)
class ArtifactFile:
    path: Path
    role: str  # encoder | decoder | decoder_with_past | merged | model
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    opsets: dict[str, int]
    producer: str
    precision: str  # detected: fp32 | fp16 | int8 | int4
    precision_reason: str
    sha256: str
    bytes: int
    #: the op types the graph uses (subgraphs included): GroupQueryAttention, MatMulNBits...
    ops: frozenset[str] = frozenset()
    #: input name -> the first op that does more than reshape or convert it (how a mask is read)
    consumers: tuple[tuple[str, str], ...] = ()
    #: the external data files the graph reads, by location: their sha256
    external_data: dict[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return {"path": str(self.path), "sha256": self.sha256, "bytes": self.bytes, "role": self.role,
                "opset": self.opsets.get("", None), "producer": self.producer,
                "detected_precision": self.precision, **({"external_data": self.external_data}
                                                         if self.external_data else {})}


def read_artifact(path: Path, role: str = "model") -> ArtifactFile:
    """Parse ``path`` (graph only; external data stays on disk) and describe it."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    if not path.is_file():
        raise UsageError(f"{path}: not a file")
    size = path.stat().st_size
    if size == 0:
        raise UsageError(f"{path}: empty file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - DecodeError, OSError, ...: protobuf says little more than "truncated"
        raise UsageError(f"{path}: not a readable ONNX model (truncated or corrupt: "
                         f"{describe_error(exc)})") from None
    if not model.graph.node or not model.graph.output:
        raise UsageError(f"{path}: not a usable ONNX model (no nodes or no outputs; truncated or corrupt?)")
    check_external_data(model, path)  # before anything reads the weights
    admit_graph(path, model)  # node count and declared sizes, before a session is built
    data_files = {ref.location for ref in external_refs(model)}
    initializers = {t.name for t in model.graph.initializer}
    inputs = tuple(_info(v) for v in model.graph.input if v.name not in initializers)
    outputs = tuple(_info(v) for v in model.graph.output)
    precision, reason = _detect_precision(model)
    return ArtifactFile(path=path, role=role, inputs=inputs, outputs=outputs,
                        opsets={o.domain: o.version for o in model.opset_import},
                        producer=f"{model.producer_name} {model.producer_version}".strip(),
                        precision=precision, precision_reason=reason, sha256=file_sha256(path), bytes=size,
                        ops=frozenset(n.op_type for n in _nodes(model.graph)),
                        consumers=tuple((i.name, op) for i in inputs if (op := _consumer(model.graph, i.name))),
                        external_data={loc: file_sha256(path.parent / loc) for loc in sorted(data_files)})


def discover(path: Path) -> list[ArtifactFile]:
    """The artifact files under ``path``: the file itself, or a directory's optimum-named
    files (else its single ``.onnx`` file). Roles of single files are settled later, from
    their inputs, by the family (``Family.artifact_role``)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"--onnx: {path}: no such file or directory")
    if path.is_file():
        return [read_artifact(path, OPTIMUM_FILES.get(path.name, "model"))]
    found = sorted(path.glob("*.onnx"))
    genai = _genai_decoder(path)
    if genai is not None:  # onnxruntime-genai's folder: its config names the model
        others = [p.name for p in found if p.name != genai.name]
        if others:
            raise UsageError(f"--onnx: {path}: genai_config.json names {genai.name}, but the folder also holds "
                             f"{', '.join(others)}; pass each file to judge it (--onnx {path}/FILE)")
        return [read_artifact(genai, "model")]
    named = [path / name for name in OPTIMUM_FILES if (path / name).is_file()]
    extra = [p.name for p in found if p.name not in OPTIMUM_FILES]
    if named and extra:  # optimum saves optimized/quantized files in place: judging one would be a silent pick
        raise UsageError(f"--onnx: {path}: several models in one folder ({', '.join(p.name for p in named)} and "
                         f"{', '.join(extra)}); pass each file to judge it (--onnx {path}/FILE), or move the "
                         "extra ones out")
    if named:
        return [read_artifact(p, OPTIMUM_FILES[p.name]) for p in named]
    if len(found) == 1:
        return [read_artifact(found[0], "model")]
    if not found:
        raise UsageError(f"--onnx: {path}: no .onnx files (expected optimum's encoder_model.onnx, "
                         "decoder_model.onnx, decoder_with_past_model.onnx, decoder_model_merged.onnx or model.onnx)")
    raise UsageError(f"--onnx: {path}: {len(found)} .onnx files ({', '.join(p.name for p in found)}) and none "
                     "with optimum's names; pass one file, or name them as optimum does")


def _genai_decoder(folder: Path) -> Path | None:
    """The decoder file onnxruntime-genai's ``genai_config.json`` names (None: no such config)."""
    config = folder / "genai_config.json"
    if not config.is_file():
        return None
    try:
        name = json.loads(config.read_text(encoding="utf-8"))["model"]["decoder"]["filename"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--onnx: {config}: no model.decoder.filename ({describe_error(exc)})") from None
    target = folder / str(name)
    if not target.is_file() or target.resolve().parent != folder.resolve():
        raise UsageError(f"--onnx: {config}: model.decoder.filename {name!r} is not a file in {folder}")
    return target


# -- helpers ----------------------------------------------------------------------------------------
def _info(value: onnx.ValueInfoProto) -> TensorInfo:
    t = value.type.tensor_type
    dtype = _DTYPES.get(t.elem_type, TensorProto.DataType.Name(t.elem_type).lower() if t.elem_type else "unknown")
    if not t.HasField("shape"):
        return TensorInfo(value.name, dtype, None)
    dims: list[int | str | None] = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return TensorInfo(value.name, dtype, tuple(dims))


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of a graph, subgraphs (If/Loop branches of merged decoders) included."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for sub in attr.graphs:
                yield from _tensors(sub)


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _nodes(attr.g)
            for sub in attr.graphs:
                yield from _nodes(sub)


#: weight-only quantized ops whose ``bits`` attribute says how many bits a weight has (4 when absent)
_NBITS_OPS = frozenset({"MatMulNBits", "GatherBlockQuantized"})
_INT4_TYPES = frozenset({TensorProto.INT4, TensorProto.UINT4})


def _int4_weights(graph: onnx.GraphProto) -> str:
    """Why the graph's weights are INT4 ("" when they are not): ``MatMulNBits`` /
    ``GatherBlockQuantized`` with ``bits=4`` (onnxruntime's MatMulNBits quantizer, onnxruntime-genai's
    builder), or ``DequantizeLinear`` of an int4/uint4 initializer (block-wise QDQ INT4)."""
    int4_tensors = {t.name for t in _tensors(graph) if t.data_type in _INT4_TYPES}
    nbits: dict[str, int] = {}
    block_sizes: set[int] = set()
    qdq = 0
    for node in _nodes(graph):
        attrs = {a.name: a for a in node.attribute}
        if node.op_type in _NBITS_OPS:
            if (onnx.helper.get_attribute_value(attrs["bits"]) if "bits" in attrs else 4) != 4:
                continue
            nbits[node.op_type] = nbits.get(node.op_type, 0) + 1
        elif node.op_type == "DequantizeLinear" and node.input and node.input[0] in int4_tensors:
            qdq += 1
        else:
            continue
        if "block_size" in attrs:
            block_sizes.add(int(onnx.helper.get_attribute_value(attrs["block_size"])))
    parts = [f"{count} {op} op(s) with bits=4" for op, count in sorted(nbits.items())]
    if qdq:
        parts.append(f"{qdq} DequantizeLinear op(s) of int4 weights")
    if parts and block_sizes:
        parts[-1] += f", block_size {'/'.join(str(b) for b in sorted(block_sizes))}"
    return "; ".join(parts)


#: ops that only reshape or convert on the way from an input to where it is used
_PASS_THROUGH = frozenset({"Cast", "Unsqueeze", "Squeeze", "Expand", "Reshape", "Slice", "Identity", "Tile",
                           "Transpose", "Gather", "Concat"})


def _consumer(graph: onnx.GraphProto, name: str) -> str | None:
    """The first op that does more than reshape or convert ``name`` (breadth first)."""
    users: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for used in node.input:
            users.setdefault(used, []).append(node)
    frontier, seen = [name], set()
    while frontier:
        current = frontier.pop(0)
        if current in seen:
            continue
        seen.add(current)
        for node in users.get(current, []):
            if node.op_type not in _PASS_THROUGH:
                return node.op_type
            frontier.extend(node.output)
    return None


def _detect_precision(model: onnx.ModelProto) -> tuple[str, str]:
    """int4 if weights are stored in 4 bits, int8 if other quantized ops are present, fp16 if most
    weight bytes are FP16, else fp32. The loosest wins: a file with INT4 MatMuls and an INT8
    embedding is INT4."""
    int4 = _int4_weights(model.graph)
    if int4:
        return "int4", int4
    quant = sum(1 for n in _nodes(model.graph) if n.op_type in _INT8_OPS)
    if quant:
        return "int8", f"{quant} quantized op(s)"
    by_type: dict[int, int] = {}
    for t in _tensors(model.graph):
        count = 1
        for d in t.dims:
            count *= d
        by_type[t.data_type] = by_type.get(t.data_type, 0) + count
    f16, f32 = by_type.get(TensorProto.FLOAT16, 0), by_type.get(TensorProto.FLOAT, 0)
    if f16 > f32:
        return "fp16", f"{f16:,} FP16 vs {f32:,} FP32 weight elements"
    return "fp32", f"{f32:,} FP32 weight elements" if f32 else "no float weights"

