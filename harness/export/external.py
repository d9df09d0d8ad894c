"""ONNX external data: when an artifact stores its weights beside the graph, and how.

A protobuf cannot exceed 2 GB, so a model with more initializer bytes than that must keep its
weights in a separate file (``model.onnx.data``) that ``model.onnx`` references by relative
path. Every step of the artifact chain (export, FP16, INT8) decides with :func:`use_external`:

* ``auto`` (default): external once the initializers exceed :data:`THRESHOLD_BYTES` (1.5 GB,
  well under the 2 GB limit, because the graph itself and the converters' copies add to it);
* ``always``: external whatever the size (how CI proves the path on small models);
* ``never``: one protobuf; a model too large for it is refused with one line.

Readers never need to know: onnxruntime, ``onnx.checker`` (by path) and ``onnx.load`` resolve
the data file relative to the model's directory, and the artifact cache hashes every file of
an entry, the data file included.
"""

from __future__ import annotations

from pathlib import Path

import onnx

from harness.core.admission import initializer_bytes

#: the choices of ``--external-data``
MODES = ("auto", "always", "never")
#: ``auto`` stores weights externally above this many initializer bytes (protobuf's hard limit is 2 GiB)
THRESHOLD_BYTES = 1_500_000_000
PROTOBUF_LIMIT = 2**31 - 1
#: the one data file every harness artifact writes beside ``model.onnx``
DATA_SUFFIX = ".data"


class ExternalDataError(RuntimeError):
    """A model cannot be stored the way ``--external-data`` asks (one line, names the file)."""


def file_initializer_bytes(path: Path) -> int:
    """:func:`initializer_bytes` of a model file, without reading its external data."""
    return initializer_bytes(onnx.load(str(path), load_external_data=False))


def use_external(mode: str, nbytes: int) -> bool:
    """Whether an artifact with ``nbytes`` of initializers is stored with external data."""
    if mode not in MODES:
        raise ValueError(f"external data mode {mode!r}; valid: {', '.join(MODES)}")
    if mode == "always":
        return True
    return mode == "auto" and nbytes > THRESHOLD_BYTES


def external_files(path: Path) -> list[str]:
    """The external data files ``path`` references (relative names, sorted; empty when none)."""
    model = onnx.load(str(path), load_external_data=False)
    names = {e.value for t in _tensors(model) if t.data_location == onnx.TensorProto.EXTERNAL
             for e in t.external_data if e.key == "location"}
    return sorted(names)


def save(model: onnx.ModelProto, target: Path, mode: str) -> Path:
    """Write ``model`` to ``target`` as ``mode`` decides for its size: one protobuf, or the graph
    plus ``<target>.data`` holding every tensor over 1 KiB. ``never`` with more than protobuf's
    limit is an :class:`ExternalDataError` rather than protobuf's own obscure failure.

    ``model`` is consumed: saving with external data moves its weights out of the proto."""
    nbytes = initializer_bytes(model)
    if use_external(mode, nbytes):
        onnx.save_model(model, str(target), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=target.name + DATA_SUFFIX, size_threshold=1024, convert_attribute=False)
    elif nbytes >= PROTOBUF_LIMIT:
        raise ExternalDataError(f"{target}: {nbytes / 1e9:.2f} GB of weights cannot be one protobuf (2 GB limit); "
                                "use --external-data auto or always")
    else:
        onnx.save_model(model, str(target))
    return target


def normalize(path: Path, mode: str) -> Path:
    """Re-store a freshly written model the way ``mode`` asks, in place.

    ``torch.onnx.export`` writes one file per tensor beside the graph once a model passes 2 GB
    (and nothing external below it); this gathers them into the single ``model.onnx.data`` (or,
    ``always``, moves a small model's weights there) and deletes the files it replaced. Nothing is
    rewritten when the file already is what ``mode`` asks for."""
    before = external_files(path)
    wanted = use_external(mode, file_initializer_bytes(path))
    if not wanted and not before:
        return path
    if wanted and before == [path.name + DATA_SUFFIX]:
        return path
    if wanted:
        return gather(path)
    model = onnx.load(str(path), load_external_data=True)
    save(model, path, mode)
    del model
    keep = set(external_files(path))
    for name in before:
        if name not in keep:
            (path.parent / name).unlink(missing_ok=True)
    return path


def gather(path: Path) -> Path:
    """Gather the per-tensor external files of ``path`` into one ``model.onnx.data``, streaming:
    each file is copied in chunks and its tensor's entry re-pointed (offset, length), so memory
    stays at the graph plus one chunk -- loading the model with its data and saving it again
    would hold every weight at once (2 GB and more, while the exporter's PyTorch module is still
    alive). Tensors still inside the graph over 1 KiB move out too (the size ``save`` uses)."""
    model = onnx.load(str(path), load_external_data=False)
    tensors = _tensors(model)
    target_name = path.name + DATA_SUFFIX
    directory = path.parent
    scratch = directory / (target_name + ".partial")
    sources: set[str] = set()
    with scratch.open("wb") as out:
        for tensor in tensors:
            offset = out.tell()
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                info = {e.key: e.value for e in tensor.external_data}
                name = info["location"]
                sources.add(name)
                with (directory / name).open("rb") as src:
                    src.seek(int(info.get("offset") or 0))
                    left = int(info["length"]) if info.get("length") else -1  # -1: to the end of the file
                    while left != 0:
                        chunk = src.read(1 << 24 if left < 0 else min(left, 1 << 24))
                        if not chunk:
                            break
                        out.write(chunk)
                        left = left - len(chunk) if left > 0 else left
            elif tensor.HasField("raw_data") and len(tensor.raw_data) > 1024:
                out.write(tensor.raw_data)
                tensor.ClearField("raw_data")
            else:
                continue
            length = out.tell() - offset
            del tensor.external_data[:]
            for key, value in (("location", target_name), ("offset", str(offset)), ("length", str(length))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            tensor.data_location = onnx.TensorProto.EXTERNAL
    scratch.replace(directory / target_name)
    onnx.save_model(model, str(path))
    for name in sources:
        if name != target_name:
            (directory / name).unlink(missing_ok=True)
    return path


def _tensors(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    from onnx.external_data_helper import _get_all_tensors

    return list(_get_all_tensors(model))
