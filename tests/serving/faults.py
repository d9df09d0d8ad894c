"""Served models with a planted fault, made from the harness's own bert-tiny export: the
negative controls of the server tests (KServe, Triton)."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import numpy_helper

#: ``harness check`` of bert-tiny on a small corpus slice: what the server tests judge
BERT_TINY_CHECK = ["--reference", "bert-tiny", "--samples", "8", "--batch-size", "4"]


def bert_tiny_fp32() -> Path:
    """bert-tiny's FP32 ONNX file as the harness builds it (content-addressed cache)."""
    from harness.core import Precision, RunOptions, Settings, Variant
    from harness.judge.workspace import Workspace
    from harness.runners import PROVIDERS
    from harness.serving.artifacts import variant_files

    ws = Workspace(RunOptions(settings=Settings(samples=8, batch_size=4)))
    return variant_files(ws, Variant("bert-tiny", Precision.FP32, PROVIDERS["ort_cpu"]))[2][0].path


def scaled_classifier(src: Path, dst: Path, factor: float = 1.5) -> Path:
    model = onnx.load(str(src))
    for i, init in enumerate(model.graph.initializer):
        if init.name == "model.classifier.weight":
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * factor, init.name))
            break
    else:
        raise AssertionError("bert-tiny's export has no model.classifier.weight")
    onnx.save(model, str(dst))
    return dst


def renamed_inputs(src: Path, dst: Path, names: dict[str, str]) -> Path:
    model = onnx.load(str(src))
    for value in model.graph.input:
        value.name = names.get(value.name, value.name)
    for node in model.graph.node:
        node.input[:] = [names.get(n, n) for n in node.input]
    onnx.save(model, str(dst))
    return dst
