"""Which PyTorch module an ONNX node came from.

Both exporters leave the answer in the graph, in different places:

* the TorchScript exporter (``dynamo=False``) names nodes after the module scope they were
  traced in: ``/model/bert/encoder/layer.0/attention/self/query/MatMul`` is the ``MatMul`` of
  the wrapper's ``model.bert.encoder.layer.0.attention.self.query``;
* the dynamo exporter writes node metadata: ``pkg.torch.onnx.name_scopes`` (``['', 'model',
  'model.encoder', 'model.encoder.layers.0', ..., 'linear_3']``: the module paths, then the FX
  node) and ``pkg.torch.onnx.class_hierarchy``. torch 2.13 drops every ``metadata_props`` when it
  converts the graph down to an opset below 18 (its ONNX C API fallback converter; the harness
  exports opset 17 by default). The node *names* survive that conversion, so for such a graph
  the module is read from a metadata-keeping re-export of the same module at opset 18, matched
  by node name (:func:`reexport_scopes`; the coverage says how many nodes matched).

A scope is validated against the exported module's ``named_modules()`` when the model is at
hand: the deepest scope that names a real module wins (a residual ``Add`` traced in a layer's
``forward`` maps to the layer), and the path is reported relative to the user's model (the
family's export wrapper and its attribute names are stripped by object identity), with the
module's class. Without the model the scope is reported as written (``validated`` False).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    import onnx
    import torch

    from harness.families.graph_modules import GraphModule

NAME_SCOPES = "pkg.torch.onnx.name_scopes"
CLASS_HIERARCHY = "pkg.torch.onnx.class_hierarchy"


@dataclass(frozen=True)
class ModuleRef:
    """A module of the user's model: its path (``""`` is the model itself) and class name."""

    path: str
    cls: str = ""

    def describe(self) -> str:
        name = self.path or "(model)"
        return f"{name} ({self.cls})" if self.cls else name


@dataclass
class ModuleMap:
    """Node name -> module, with where the answer came from and how much of the graph it covers."""

    source: str  # "torchscript scope names" | "dynamo node metadata" | "... (re-export at opset 18)" | "none"
    nodes: dict[str, ModuleRef] = field(default_factory=dict)
    validated: bool = False  # checked against named_modules() of the loaded model
    total: int = 0  # nodes in the graph
    unresolved: list[str] = field(default_factory=list)  # nodes whose scope names no module
    inferred: int = 0  # nodes without a scope placed by their mapped neighbours (:func:`infer_from_neighbours`)

    def of(self, node: str) -> ModuleRef | None:
        return self.nodes.get(node)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "validated": self.validated, "mapped": len(self.nodes), "total": self.total,
                "inferred": self.inferred, "unresolved": self.unresolved[:20]}


def _torchscript_chain(name: str) -> list[str]:
    """``/model/bert/encoder/layer.0/attention/MatMul`` -> ``['model', 'model.bert', ...,
    'model.bert.encoder.layer.0.attention']`` (the last segment is the op, not a module)."""
    if not name.startswith("/"):
        return []
    parts = [p for p in name.split("/")[1:-1] if p]
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _metadata_chain(node: "onnx.NodeProto") -> tuple[list[str], list[str]] | None:
    """The module paths and class names of a dynamo-exported node's metadata, or None."""
    props = {p.key: p.value for p in node.metadata_props}
    if NAME_SCOPES not in props:
        return None
    try:
        scopes = [str(s) for s in ast.literal_eval(props[NAME_SCOPES])]
        classes = [str(c) for c in ast.literal_eval(props.get(CLASS_HIERARCHY, "[]"))]
    except (ValueError, SyntaxError):
        return None
    # ['', 'model', 'model.encoder', ..., 'linear_3']: the last is the FX node (an op), the first the root
    return [s for s in scopes[:-1] if s], classes[1:-1]


def scope_chains(proto: "onnx.ModelProto") -> tuple[str, dict[str, list[str]]]:
    """(source, node name -> candidate module paths, outermost first) from the graph itself."""
    chains: dict[str, list[str]] = {}
    with_metadata = 0
    for index, node in enumerate(proto.graph.node):
        name = node.name or f"{node.op_type}_{index}"
        meta = _metadata_chain(node)
        if meta is not None:
            with_metadata += 1
            chains[name] = meta[0]
        else:
            chains[name] = _torchscript_chain(name)
    if with_metadata:
        return "dynamo node metadata", chains
    if any(chains.values()):
        return "torchscript scope names", chains
    return "none", chains


def reexport_scopes(module: "GraphModule", graph: Any, example: Mapping[str, Any], directory: Path,
                    opset: int = 18) -> dict[str, list[str]]:
    """Node name -> module paths of a dynamo re-export of ``module`` at ``opset`` (>= 18, where
    torch keeps node metadata); for an artifact exported below 18 whose metadata was dropped."""
    import onnx

    from harness.export.onnx_export import export_graph

    directory.mkdir(parents=True, exist_ok=True)
    path = export_graph(module, graph, example, directory, opset=max(opset, 18), exporter="dynamo",
                        external_data="never")
    proto = onnx.load(str(path), load_external_data=False)
    _, chains = scope_chains(proto)
    return chains


def _module_index(wrapper: "torch.nn.Module", model: "torch.nn.Module | None") -> tuple[
        dict[str, Any], dict[int, str]]:
    """The wrapper's modules by path, and the user model's paths by module identity."""
    by_path = dict(wrapper.named_modules())
    own = {id(m): p for p, m in model.named_modules()} if model is not None else {}
    return by_path, own


def _lookup(scope: str, by_path: Mapping[str, Any]) -> str | None:
    """The wrapper path a scope names: itself, else the shortest path ending in ``.<scope>``
    (TorchScript names a module called outside its parent's ``forward`` -- a wrapper calling
    ``model.get_decoder()`` -- by its own attribute name: ``/decoder/...`` for ``model.model.decoder``)."""
    if scope in by_path:
        return scope
    tails = [p for p in by_path if p.endswith("." + scope)]
    return min(tails, key=len) if tails else None


def resolve(chains: Mapping[str, Sequence[str]], source: str, wrapper: "torch.nn.Module | None" = None,
            model: "torch.nn.Module | None" = None, *, nodes: Iterable[str] | None = None) -> ModuleMap:
    """Each node's deepest scope that names a module of ``wrapper`` (the exported module), as a
    path in ``model`` (the user's model it wraps); without ``wrapper`` the deepest scope as written."""
    wanted = list(nodes) if nodes is not None else list(chains)
    result = ModuleMap(source, validated=wrapper is not None, total=len(wanted))
    if wrapper is None:
        for name in wanted:
            chain = chains.get(name) or []
            if chain:
                result.nodes[name] = ModuleRef(chain[-1])
        return result
    by_path, own = _module_index(wrapper, model)
    for name in wanted:
        chain = chains.get(name) or []
        hit = next((found for p in reversed(chain) if (found := _lookup(p, by_path)) is not None), None)
        if hit is None:
            if chain:
                result.unresolved.append(name)
            continue
        module = by_path[hit]
        path = own.get(id(module), hit) if model is not None else hit
        result.nodes[name] = ModuleRef(path, type(module).__name__)
    return result


def module_map(artifact: str | Path, *, wrapper: "torch.nn.Module | None" = None,
               model: "torch.nn.Module | None" = None,
               reexport: "Any | None" = None) -> ModuleMap:
    """The module of every node of ``artifact`` (an FP32 export). ``reexport``: a callable
    returning :func:`reexport_scopes`'s mapping, used when the graph carries neither scope
    names nor metadata (a dynamo export below opset 18)."""
    import onnx

    proto = onnx.load(str(artifact), load_external_data=False)
    source, chains = scope_chains(proto)
    names = [n.name or f"{n.op_type}_{i}" for i, n in enumerate(proto.graph.node)]
    if source == "none" and reexport is not None:
        fresh = reexport()
        matched = {n: fresh[n] for n in names if n in fresh}
        if matched:
            source, chains = "dynamo node metadata (re-export at opset 18, matched by node name)", matched
    result = resolve(chains, source, wrapper, model, nodes=names)
    infer_from_neighbours(result, proto)
    return result


def infer_from_neighbours(result: ModuleMap, proto: "onnx.ModelProto") -> int:
    """Place nodes that carry no scope (a node the opset conversion or the optimiser renamed, so
    the re-export has no node of that name; a TorchScript node traced in the export wrapper's own
    ``forward``) in the deepest module common to their mapped producers and consumers, repeating
    until nothing changes. Returns how many were placed (``ModuleMap.inferred``)."""
    names = [n.name or f"{n.op_type}_{i}" for i, n in enumerate(proto.graph.node)]
    producer = {out: name for name, node in zip(names, proto.graph.node) for out in node.output if out}
    consumers: dict[str, list[str]] = {}
    for name, node in zip(names, proto.graph.node):
        for value in node.input:
            consumers.setdefault(value, []).append(name)
    placed = 0
    changed = True
    while changed:
        changed = False
        for name, node in zip(names, proto.graph.node):
            if name in result.nodes:
                continue
            around = [producer[i] for i in node.input if i in producer]
            around += [c for o in node.output for c in consumers.get(o, [])]
            refs = [result.nodes[n] for n in around if n in result.nodes]
            if not refs:
                continue
            common = refs[0].path.split(".") if refs[0].path else []
            for ref in refs[1:]:
                parts = ref.path.split(".") if ref.path else []
                k = 0
                while k < min(len(common), len(parts)) and common[k] == parts[k]:
                    k += 1
                common = common[:k]
            path = ".".join(common)
            cls = next((r.cls for r in refs if r.path == path), "")
            result.nodes[name] = ModuleRef(path, cls)
            placed += 1
            changed = True
    result.inferred += placed
    return placed


def layer_of(path: str) -> str:
    """The layer a module path belongs to: cut after the first numeric segment
    (``bert.encoder.layer.0.attention.self.query`` -> ``bert.encoder.layer.0``); a path outside
    any ``ModuleList`` keeps its first two segments (``bert.embeddings``, ``classifier``)."""
    if path.startswith("("):  # "(model)", "(unmapped)"
        return path
    parts = path.split(".") if path else []
    for i, part in enumerate(parts):
        if part.isdigit():
            return ".".join(parts[: i + 1])
    return ".".join(parts[:2])
