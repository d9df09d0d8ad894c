"""Small hand-made untrusted inputs for the tests of docs/reliability.md's "Untrusted inputs":
a repro bundle written the way ``harness.repro.bundle`` writes one, ONNX files with planted
external-data locations and custom-op domains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from harness.repro.bundle import DATA, FORMAT, MANIFEST, sha256_file


def identity_onnx(path: Path, *, inp: str = "x", out: str = "logits") -> Path:
    """A float Identity graph ``inp -> out`` with a dynamic length."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", [inp], [out])], "g",
                              [helper.make_tensor_value_info(inp, TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["n"])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def numeric_bundle(directory: Path, threshold: float = 1e-6) -> Path:
    """A numeric repro bundle whose variant (the identity of the feeds) is 0.1 off its reference,
    judged by ``norm_max_abs <= threshold``: with the default it reproduces (exit 1)."""
    directory.mkdir(parents=True)
    (directory / "artifact").mkdir()
    onnx_file = identity_onnx(directory / "artifact" / "model.onnx")
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    np.savez_compressed(directory / DATA, **{"batch0.input.x": x, "batch0.reference.logits": x + 0.1,
                                             "batch0.variant.logits": x})
    tolerance = [{"metric": "norm_max_abs", "threshold": threshold, "higher_is_better": False}]
    manifest: dict[str, Any] = {
        "format": FORMAT, "kind": "numeric", "case": "hand-made", "model": "m", "graph": "model",
        "precision": "fp32", "provider": "ort_cpu", "backend": "ort", "threads": 1, "runtime": None,
        "artifact": {"path": str(onnx_file), "file": "model.onnx", "sha256": sha256_file(onnx_file),
                     "bytes": onnx_file.stat().st_size, "bundled": True, "files": {}, "dir": "artifact"},
        "batches": 1, "inputs": ["x"],
        "outputs": [{"name": "logits", "is_logits": True, "tolerance": tolerance,
                     "metrics": {"norm_max_abs": 0.1}, "worst": None}],
        "tokenizer": None,
        "verdict": {"passed": False, "failures": [{"output": "logits", "metric": "norm_max_abs", "value": 0.1,
                                                   "op": "<=", "threshold": threshold, "where": ""}]},
        "files": {DATA: sha256_file(directory / DATA), "artifact/model.onnx": sha256_file(onnx_file)},
    }
    write(directory, manifest)
    return directory


def manifest_of(directory: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((directory / MANIFEST).read_text())
    return loaded


def write(directory: Path, manifest: dict[str, Any]) -> None:
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2))


def bert_with_external_data(folder: Path) -> Path:
    """bert-tiny's classifier exported by hand (not by ``harness.export``), its weights in
    ``model.onnx.data`` beside ``model.onnx``: the layout whose ``location`` fields are planted."""
    import onnx
    import torch
    from transformers import AutoModelForSequenceClassification

    from harness.zoo.base import materialize, resolve

    class Classifier(torch.nn.Module):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids=ids, attention_mask=mask).logits  # type: ignore[no-any-return]

    model = AutoModelForSequenceClassification.from_pretrained(str(materialize(resolve("bert-tiny"))),
                                                               attn_implementation="eager").eval()
    folder.mkdir(parents=True)
    plain = folder / "plain.onnx"
    ids = torch.tensor([[2, 40, 41, 3]])
    with torch.no_grad():
        torch.onnx.export(Classifier(model).eval(), (ids, torch.ones_like(ids)), str(plain),
                          input_names=["input_ids", "attention_mask"], output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "b", 1: "t"}, "attention_mask": {0: "b", 1: "t"},
                                        "logits": {0: "b"}}, opset_version=17, dynamo=False)
    target = folder / "model.onnx"
    onnx.save_model(onnx.load(str(plain)), str(target), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx.data", size_threshold=1024)
    plain.unlink()
    return target


def relocated(source: Path, folder: Path, location: str) -> Path:
    """A copy of ``source`` (with external data) in ``folder`` whose first external tensor's
    ``location`` is ``location``; the original data file is copied beside it."""
    import shutil

    import onnx

    folder.mkdir(parents=True)
    shutil.copy(source.with_name(source.name + ".data"), folder / (source.name + ".data"))
    model = onnx.load(str(source), load_external_data=False)
    tensor = next(t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    next(e for e in tensor.external_data if e.key == "location").value = location
    onnx.save(model, str(folder / source.name))
    return folder / source.name


def with_custom_op(source: Path, folder: Path, domain: str = "ai.onnx.contrib") -> Path:
    """A copy of ``source`` with one extra node in a custom-op domain (a kernel a library would provide)."""
    import shutil

    import onnx
    from onnx import helper

    folder.mkdir(parents=True)
    shutil.copy(source.with_name(source.name + ".data"), folder / (source.name + ".data"))
    model = onnx.load(str(source), load_external_data=False)
    model.graph.node.append(helper.make_node("StringRegexReplace", ["logits"], ["extra"], name="vendor_op",
                                             domain=domain))
    model.opset_import.append(helper.make_opsetid(domain, 1))
    onnx.save(model, str(folder / source.name))
    return folder / source.name


def expanding_graph(path: Path, rows: int = 100_000, cols: int = 100_000) -> Path:
    """A tiny file whose one node declares a ``rows x cols`` FP32 tensor (40 GB by default):
    ``ConstantOfShape`` of a constant shape, the way a graph's shapes can expand past any machine."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    shape = numpy_helper.from_array(np.array([rows, cols], dtype=np.int64), "shape")
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["shape"], ["big"], value=helper.make_tensor("v", TensorProto.FLOAT,
                                                                                          [1], [0.0])),
         helper.make_node("ReduceSum", ["big"], ["logits"], keepdims=0)], "bomb",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "t"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [])], [shape])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def edited_model_dir(source: Path, target: Path, **config: Any) -> Path:
    """A copy of the model directory ``source`` with ``config.json`` keys replaced."""
    import shutil

    shutil.copytree(source, target)
    data = json.loads((target / "config.json").read_text())
    data.update(config)
    (target / "config.json").write_text(json.dumps(data))
    return target
