"""An outside ONNX file inspected before any runtime opens it: what it would make the machine read or load.

A vendor's export, a hub download or a repro bundle is a file nobody here wrote. Two things in an
ONNX file reach past the graph itself:

- **external data**: an initializer may name the file its bytes live in (``location``). Read
  blindly, ``../../home/ci/.ssh/id_rsa``, ``/dev/zero``, a symlink leaving the folder or a FIFO
  (a read that never returns) become weights. Each location must be a relative path that
  resolves inside the artifact's folder to a regular file holding the bytes it claims. ONNX
  Runtime 1.32, OpenVINO and ``onnx`` refuse most of these themselves; the harness refuses them
  first, by one rule for every backend, with a line that names the tensor and the location.
- **custom-op domains**: a node outside the domains the runtimes implement needs kernels from a
  shared library -- native code. The harness loads one only when the user names it
  (``--custom-op-library``); a file that needs one is otherwise refused naming its domain.

Only the graph's protobuf is parsed (``load_external_data=False``): nothing of what it points at
is read to decide.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Iterator

from harness.core import UsageError
from harness.core.admission import admit_graph
from harness.runners.ort_runner import OrtSessionSettings

if TYPE_CHECKING:  # pragma: no cover
    import onnx

    from harness.core.runtime import RuntimeSettings

#: the operator domains ONNX Runtime and OpenVINO implement themselves: no library needed
BUILTIN_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.training", "ai.onnx.preview.training",
                             "com.microsoft", "com.microsoft.nchwc", "com.microsoft.experimental",
                             "com.ms.internal.nhwc", "org.pytorch.aten"})
#: the option that names a custom-op library (the only way one is ever loaded)
LIBRARY_OPTION = "--custom-op-library"


class UntrustedFileError(UsageError):
    """An ONNX file that would make the harness read outside its folder or load native code: exit 2."""


@dataclass(frozen=True)
class ExternalRef:
    """One initializer's external-data entry as the file states it."""

    tensor: str
    location: str
    offset: int
    length: int | None


def external_refs(model: "onnx.ModelProto") -> Iterator[ExternalRef]:
    """Every tensor stored outside the protobuf: initializers, attribute tensors, subgraphs'."""
    import onnx
    from onnx.external_data_helper import _get_all_tensors

    for tensor in _get_all_tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in tensor.external_data}
        try:
            offset = int(info.get("offset") or 0)
            length = int(info["length"]) if info.get("length") else None
        except ValueError:
            offset, length = -1, None
        yield ExternalRef(tensor.name, info.get("location", ""), offset, length)


def external_data_problem(folder: Path, ref: ExternalRef) -> str | None:
    """Why ``ref`` may not be read from ``folder``, None when it may."""
    where = ref.location
    if not where:
        return "names no location"
    if "\0" in where or os.path.isabs(where) or PurePath(where).is_absolute():
        return "is an absolute path; external data must lie beside the graph, inside its folder"
    if ".." in PurePath(where).parts:
        return "climbs out of the artifact's folder ('..')"
    target = folder / where
    try:
        resolved = target.resolve(strict=True)
    except (OSError, RuntimeError):
        return "does not exist in the artifact's folder"
    if not resolved.is_relative_to(folder.resolve()):
        return f"is a link to {resolved}, outside the artifact's folder"
    mode = os.stat(resolved).st_mode
    if not stat.S_ISREG(mode):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a directory" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
        return f"is {kind}, not a regular file"
    size = resolved.stat().st_size
    if ref.offset < 0 or (ref.length is not None and ref.length < 0):
        return "has an offset or length that is not a whole number >= 0"
    if ref.offset + (ref.length or 0) > size:
        return f"asks for bytes {ref.offset}..{ref.offset + (ref.length or 0)} of a {size}-byte file"
    return None


def check_external_data(model: "onnx.ModelProto", path: Path) -> None:
    """Every external-data location of ``model`` (read from ``path``) may be read, else one line."""
    folder = path.parent
    for ref in external_refs(model):
        problem = external_data_problem(folder, ref)
        if problem:
            raise UntrustedFileError(f"{path}: tensor {ref.tensor!r}: external data location {ref.location!r} "
                                     f"{problem}; not read")


def custom_domains(model: "onnx.ModelProto") -> dict[str, str]:
    """Custom-op domain -> one node that uses it (``name (op)``): nodes of the main graph, its
    subgraphs and functions, less the domains the model defines as local functions."""
    local = {f.domain for f in model.functions}
    found: dict[str, str] = {}

    def walk(nodes: "Iterator[onnx.NodeProto] | list[onnx.NodeProto]") -> None:
        for node in nodes:
            if node.domain not in BUILTIN_DOMAINS and node.domain not in local:
                found.setdefault(node.domain, f"{node.name or '(unnamed)'} ({node.op_type})")
            for attr in node.attribute:
                for graph in [attr.g, *attr.graphs]:
                    walk(list(graph.node))

    walk(list(model.graph.node))
    for function in model.functions:
        walk(list(function.node))
    return found


def inspect_onnx(path: Path, custom_op_library: str | None = None) -> None:
    """Refuse ``path`` (one line, exit 2) when its external data would be read from outside its
    folder or from something that is not a regular file, or when it needs a custom-op library
    that was not named. A file the ``onnx`` parser cannot read is left to the runtime's own
    refusal (``open_onnx`` turns it into one line)."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - not a parseable graph: the runtime names what is wrong
        return
    check_external_data(model, Path(path))

    admit_graph(Path(path), model)
    if custom_op_library:
        return
    domains = custom_domains(model)
    if domains:
        domain, node = next(iter(sorted(domains.items())))
        more = f" (and {len(domains) - 1} more domain(s))" if len(domains) > 1 else ""
        raise UntrustedFileError(f"{path}: node {node} is in the custom-op domain {domain!r}{more}, whose kernels "
                                 f"come from a shared library; none is loaded unless named by "
                                 f"{LIBRARY_OPTION} LIB")


def library_of(runtime: "RuntimeSettings | None") -> str | None:
    """The custom-op library the runtime settings name (``--custom-op-library``), None when none."""
    if runtime is None:
        return None

    return runtime.of(OrtSessionSettings).custom_op_library or None
