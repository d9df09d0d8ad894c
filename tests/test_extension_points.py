"""Adding a runtime or a model family is one module plus its registration.

The backend and the family below are declared here, in this test module, and nowhere else:
the parity, latency, fresh-process and generation paths pick them up through the
registries, with no edit anywhere in the harness. Negative controls: a backend whose
outputs are off fails parity, and an ONNX Runtime measurement child never imports torch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pytest
import torch
from waiting import PATIENCE

from harness.core import Precision, Provider, Variant
from harness.families import detect_family, family_for, family_names, register_family
from harness.families.base import GraphSpec, to_torch
from harness.families.causal_lm import CausalLMFamily
from harness.families.registry import unregister_family
from harness.runners import backends, register_backend, unregister_backend
from harness.runners.base import Backend, ChildLoad, ChildSpec, GraphRef, GraphRunner, TimedCall

TESTS_DIR = Path(__file__).resolve().parent


# --------------------------------------------------------------------------- a toy runtime, one module


class ToyRunner(GraphRunner):
    """Runs the family's torch module in FP32, scaling float outputs by ``gain``; counts the
    calls its own timed primitive makes (to show perf times through it)."""

    def __init__(self, module: torch.nn.Module, graph: GraphSpec, gain: float) -> None:
        self.module, self.gain, self.timed = module, gain, 0
        self.input_names, self.output_names = list(graph.input_names), list(graph.output_names)

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            outs = self.module(*to_torch(feeds, self.input_names))
        return {n: (o.float().numpy() * self.gain if o.is_floating_point() else o.numpy())
                for n, o in zip(self.output_names, outs)}

    def timed_call(self, feeds: Mapping[str, np.ndarray]) -> TimedCall:
        prepared = self.prepare(feeds)

        def call() -> object:
            self.timed += 1
            return self.run(prepared)
        return call


TOY = Provider("toy_cpu", "toy", "cpu")


class ToyBackend(Backend):
    name = "toy"
    providers = (TOY,)
    gain = 1.0
    loaded: list[ToyRunner] = []

    @classmethod
    def unavailable_reason(cls, variant: Variant) -> str | None:
        return None

    def load(self, ref: GraphRef) -> GraphRunner:
        model, family, graph = ref.model, ref.family, ref.graph
        runner = ToyRunner(family.module(model, graph), graph, self.gain)
        type(self).loaded.append(runner)
        return runner

    def child_spec(self, refs: Sequence[GraphRef]) -> ChildSpec:
        return ChildSpec([r.graph.name for r in refs], options={"gain": self.gain})

    @classmethod
    def child_load(cls, spec: ChildSpec) -> ChildLoad:
        start = time.perf_counter()
        gain = float(spec.options["gain"])
        calls = {g: (lambda feeds: {k: np.asarray(v) * gain for k, v in feeds.items()}) for g in spec.graphs}
        return ChildLoad(calls, {g: (time.perf_counter() - start) * 1000.0 for g in spec.graphs},
                         {"toy": {"gain": gain}})


class OffByHalf(ToyBackend):
    gain = 1.5


@pytest.fixture
def toy_backend():
    register_backend(ToyBackend)
    ToyBackend.loaded = []
    yield ToyBackend
    unregister_backend("toy")


def test_a_registered_backend_is_found_and_judged_by_parity(workspace, toy_backend):
    from harness.case.pipeline import numeric_parity
    from harness.runners import PROVIDERS, parse_provider

    assert backends()["toy"] is ToyBackend
    assert parse_provider("toy_cpu") is TOY and PROVIDERS["toy_cpu"] is TOY  # its providers are users' names
    v = Variant("encoder-custom", Precision.FP32, parse_provider("toy_cpu"))
    assert workspace.runtimes.unavailable_reason(v) is None
    result = numeric_parity(workspace, v)
    assert result.outputs and result.passed
    assert ToyBackend.loaded  # the parity ran the toy's runners


def test_parity_fails_when_the_registered_backend_is_wrong(workspace):
    from harness.case.pipeline import numeric_parity

    unregister_backend("toy")  # a second backend of one name is an error: replace explicitly
    register_backend(OffByHalf)
    try:
        result = numeric_parity(workspace, Variant("encoder-custom", Precision.FP32, TOY))
    finally:
        unregister_backend("toy")
    assert result.outputs and not result.passed and result.failures


def test_perf_measures_a_registered_backend_through_its_own_primitives(workspace, toy_backend, tmp_path,
                                                                       monkeypatch):
    from harness.perf import coldstart, latency, memory
    from harness.perf.measure import PerfSettings

    v = Variant("encoder-custom", Precision.FP32, TOY)
    model = workspace.model("encoder-custom")
    family = workspace.family(model)
    settings = PerfSettings(samples=5, warmup=2, tail_seconds=0)
    points, _ = latency.plan(model, family, workspace.texts(model), settings)
    backend = workspace.backend(v, model)
    runners = {p.graph.name: backend.load(GraphRef(model, family, p.graph, v)) for p in points}
    fields = latency.measure(runners, points, settings)
    assert len(fields["latency_ms"]["samples"]) == 5
    # every timed, warm-up, settle and calibration call went through ToyRunner.timed_call
    from harness.perf.measure import SETTLE_CALLS
    from harness.perf.stopping import CALIBRATION_CALLS

    assert sum(r.timed for r in ToyBackend.loaded) == len(points) * (
        CALIBRATION_CALLS + max(2, SETTLE_CALLS) + SETTLE_CALLS + 5)

    assert coldstart.unsupported_reason(v) is None
    graphs = family.graphs(model)
    feeds = coldstart.write_feeds(tmp_path / "f.npz", latency.feeds_by_graph(points))
    args = coldstart.child_args(workspace, v, model, family, graphs, feeds, calls=1)
    assert args[:2] == ["--loader", f"{__name__}:ToyBackend"]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]))
    (run,) = coldstart.fresh_runs(args, 1)
    assert run["settings"] == {"toy": {"gain": 1.0}} and set(run["load_ms_by_graph"]) == {g.name for g in graphs}
    assert memory.artifact_fields(workspace, v, model, family, graphs) == {"artifact_bytes": 0, "artifact_files": {}}


def test_a_backend_without_a_child_loader_says_so():
    class NoChild(Backend):
        name = "nochild"

        @classmethod
        def unavailable_reason(cls, variant: Variant) -> str | None:
            return None

        def load(self, ref: GraphRef) -> GraphRunner:
            raise NotImplementedError

    from harness.runners import PROVIDERS

    v = Variant("m", Precision.FP32, Provider("nochild_cpu", "nochild", "cpu"))
    assert "toy_cpu" not in PROVIDERS  # not registered (outside its fixture): not a name users can give
    assert "no fresh-process loader" in str(NoChild.fresh_process_reason(v))
    assert ToyBackend.fresh_process_reason(v) is None


def test_an_onnxruntime_child_never_imports_torch(workspace, tmp_path):
    """Cold start and peak memory of an ORT variant must not pay for torch."""
    from harness.perf import coldstart
    from harness.runners import PROVIDERS

    model = workspace.model("encoder-custom")
    family = workspace.family(model)
    graphs = family.graphs(model)
    v = Variant("encoder-custom", Precision.FP32, PROVIDERS["ort_cpu"])
    feeds = coldstart.write_feeds(tmp_path / "f.npz", {"model": family.feeds(model, graphs[0], ["a b", "c"])})
    args = coldstart.child_args(workspace, v, model, family, graphs, feeds, calls=1)
    probe = ("import runpy, sys; g = runpy.run_path(sys.argv[1], run_name='child'); code = g['main'](sys.argv[2:]); "
             "print('TORCH_LOADED', 'torch' in sys.modules); sys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", probe, str(coldstart.CHILD_SCRIPT), *args], capture_output=True,
                          text=True, env=coldstart.child_env(), timeout=PATIENCE)
    assert proc.returncode == 0, proc.stderr
    assert "HARNESS_CHILD_RESULT" in proc.stdout and "TORCH_LOADED False" in proc.stdout
    # the control: the probe does see torch when the backend's child needs it
    probe_torch = probe.replace("code = g['main'](sys.argv[2:])", "import harness.judge.workspace; code = 0")
    proc = subprocess.run([sys.executable, "-c", probe_torch, str(coldstart.CHILD_SCRIPT)], capture_output=True,
                          text=True, env=coldstart.child_env(), timeout=PATIENCE)
    assert "TORCH_LOADED True" in proc.stdout, proc.stderr


# --------------------------------------------------------------------------- a toy family, one module


class ToyLMFamily(CausalLMFamily):
    """A decoder-only family told apart by its architecture name; counts the decodes it starts."""

    name = "toy_lm"
    detection_priority = 5
    starts = 0

    @classmethod
    def detects(cls, config: Mapping[str, Any], architecture: str) -> bool:
        return architecture.endswith("ForToyLM")

    def starter(self, model: Any, runners: Any, start_token_id: int | None = None) -> Any:
        type(self).starts += 1
        return super().starter(model, runners, start_token_id)


@pytest.fixture
def toy_family():
    register_family(ToyLMFamily)
    ToyLMFamily.starts = 0
    yield ToyLMFamily
    unregister_family("toy_lm")


def test_a_registered_family_is_detected_loaded_and_decoded(workspace, toy_family, tmp_path):
    from harness.generation import decode_texts, settings_for_model
    from harness.perf.generation import measure_generation
    from harness.perf.measure import PerfSettings
    from harness.runners import PROVIDERS
    from harness.zoo.base import spec_for_directory
    from harness.zoo.loading import load_model

    assert "toy_lm" in family_names() and detect_family({"architectures": ["LlamaForToyLM"]}) == "toy_lm"
    assert detect_family({"architectures": ["LlamaForCausalLM"]}) == "causal_lm"  # the others are untouched

    base = workspace.model("llama-tiny")
    directory = tmp_path / "toy-llama"
    shutil.copytree(base.path, directory)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "architectures": ["LlamaForToyLM"]}))
    spec = spec_for_directory(directory)
    assert spec.family == "toy_lm" and spec.generates
    model = load_model(spec)
    family = family_for(model.family)
    assert isinstance(family, ToyLMFamily)

    v = Variant(model.name, Precision.FP32, PROVIDERS["torch_cpu"])
    texts = workspace.texts(base)[:2]
    settings = settings_for_model(base.model, max_new_tokens=4)
    toy = decode_texts(workspace.backend(v, model), model, family, v, texts, settings)
    ref_v = Variant("llama-tiny", Precision.FP32, PROVIDERS["torch_cpu"])
    ref = decode_texts(workspace.backend(ref_v, base), base, workspace.family(base), ref_v, texts, settings)
    assert ToyLMFamily.starts == 1 and toy.tokens == ref.tokens  # its own stepper, the same decode

    backend = workspace.backend(v, model)
    runners = {g.name: backend.load(GraphRef(model, family, g, v)) for g in family.graphs(model)}
    fields = measure_generation(model, family, runners, texts, PerfSettings(samples=4, new_tokens=2))
    assert ToyLMFamily.starts > 1 and fields["generation"]["same_tokens_with_and_without_cache"] is True


def test_an_unknown_family_name_lists_the_registered_ones():
    with pytest.raises(ValueError, match="unknown family 'nope'; known: encoder, seq2seq, causal_lm"):
        family_for("nope")
