"""OpenVINO, a second ONNX runtime: the harness's ONNX artifacts compiled for the CPU.

``ov_cpu`` reads the same ONNX files ONNX Runtime runs (``openvino.Core().read_model``:
OpenVINO's own ONNX frontend, no conversion step on disk) and compiles them with
``Core.compile_model(model, "CPU", config)``. What changes numbers is the *inference
precision*, a property of the compiled model rather than of the file:

* **fp32**: the FP32 artifact with ``INFERENCE_PRECISION_HINT=f32`` set explicitly. The CPU
  plugin's default on CPUs with AMX/AVX512-BF16 is **bf16** (measured here: an unset hint reads
  back ``bfloat16``), so an "FP32" OpenVINO variant that leaves the hint alone silently runs
  in bf16.
* **fp16**: the FP32 artifact with ``INFERENCE_PRECISION_HINT=f16``. OpenVINO decides the
  compute precision at compile time whatever the file stores (its own IR keeps FP16 weights
  and runs them at the device's inference precision), so the f16 hint *is* OpenVINO's FP16
  deployment. The FP16 ONNX artifact was measured too (``docs/openvino.md``): with the f16
  hint it compiles to the same f16 kernels (same FullyConnected/MatMul runtime precisions)
  and is not faster; with the f32 hint its FP16 weights are upcast and it runs FP32 compute.
  The variant is skipped where the CPU plugin reports no FP16 capability, because the hint
  would then execute f32 and the "fp16" case would test nothing.
* **int8**: the INT8 artifact (dynamic quantization: ``DynamicQuantizeLinear`` /
  ``MatMulInteger``, or static Q/DQ where the export makes it), compiled with the f32 hint so
  only the file's quantization changes the numbers.

Every compiled model records the hint it read back and the runtime precision of its heavy
layers (``get_runtime_model()``: FullyConnected / MatMul / Convolution), so a record says
what executed, not only what was asked for.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from harness.core import Precision, Provider, Variant
from harness.runners import register_backend
from harness.runners.base import (
    Backend,
    BackendContext,
    ChildLoad,
    ChildSpec,
    Feeds,
    GraphRef,
    GraphRunner,
    OnnxExports,
    TimedCall,
)

if TYPE_CHECKING:  # pragma: no cover
    from harness.core.runtime import RuntimeSettings

#: precision -> (ONNX artifact the variant compiles, INFERENCE_PRECISION_HINT)
RECIPES: dict[Precision, tuple[Precision, str]] = {
    Precision.FP32: (Precision.FP32, "f32"),
    Precision.FP16: (Precision.FP32, "f16"),
    Precision.INT8: (Precision.INT8, "f32"),
    # static Q/DQ INT8 (calibrated): OpenVINO's own INT8 path — it fuses Q/DQ into INT8 kernels
    Precision.INT8_STATIC: (Precision.INT8_STATIC, "f32"),
}
#: runtime layer types whose precision tells what a compiled model computes in
HEAVY_LAYERS = ("FullyConnected", "MatMul", "Convolution")
#: compiled-model properties that change numbers, speed or memory (recorded per case)
REPORTED_PROPERTIES = ("INFERENCE_PRECISION_HINT", "EXECUTION_MODE_HINT", "PERFORMANCE_HINT", "NUM_STREAMS",
                       "INFERENCE_NUM_THREADS", "ENABLE_HYPER_THREADING", "ENABLE_CPU_PINNING",
                       "KV_CACHE_PRECISION", "DYNAMIC_QUANTIZATION_GROUP_SIZE")
INSTALL_HINT = "pip install 'model-harness[openvino]'"


@functools.lru_cache(maxsize=1)
def core() -> Any:
    """One ``openvino.Core`` per process (it holds the device plugins; creating one per graph
    reloads them)."""
    import openvino

    return openvino.Core()


def version() -> str | None:
    """The installed OpenVINO version, or None when it is not installed."""
    try:
        import openvino
    except ImportError:
        return None
    return str(openvino.__version__)


def cpu_capabilities() -> list[str]:
    """What the CPU plugin says this CPU computes natively (FP32, BF16, FP16, INT8, ...)."""
    return [str(c) for c in core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")]


def compile_config(hint: str, threads: int | None, device: str = "CPU") -> dict[str, Any]:
    """The compile properties of one graph: the precision hint always explicit (the CPU
    default is bf16 on AMX CPUs), one stream tuned for latency (a request at a time, as the
    harness and a synchronous service call it), threads only when the run sets them.

    CPU pinning off: with it on (the CPU plugin's default on Linux) a synchronous ``infer``
    pins the *calling* thread to cores the plugin reserves per compiled model, in compile
    order, so two compiles of one file in one process can run on different cores, and a busy
    neighbour on a pinned core cannot be escaped by the scheduler. Measured on a shared 2-core
    runner: an A/A paired re-timing of one file read the second compile +27 % slower, 10 of 10
    pairs (docs/pitfalls.md). Timing compares runs; it must not depend on compile order."""
    config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": hint, "PERFORMANCE_HINT": "LATENCY"}
    if device == "CPU":
        config["ENABLE_CPU_PINNING"] = False
    if threads:
        config["INFERENCE_NUM_THREADS"] = int(threads)
    return config


def _prop(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def compiled_settings(compiled: Any) -> dict[str, Any]:
    """The live properties of a compiled model that change numbers, speed or memory."""
    out: dict[str, Any] = {}
    for name in REPORTED_PROPERTIES:
        try:
            out[name] = _prop(compiled.get_property(name))
        except Exception:  # noqa: BLE001 - a property this OpenVINO version does not have
            continue
    return out


def runtime_precisions(compiled: Any) -> dict[str, dict[str, int]]:
    """Layer type -> {runtime precision: count} of the heavy layers the plugin compiled:
    what actually executes (an f16 hint on a CPU without FP16 kernels shows up as f32)."""
    counts: dict[str, Counter[str]] = {}
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        layer = info["layerType"].astype(str)
        if layer in HEAVY_LAYERS:
            counts.setdefault(layer, Counter())[info["runtimePrecision"].astype(str)] += 1
    return {layer: dict(c) for layer, c in sorted(counts.items())}


class OvGraphRunner(GraphRunner):
    """One compiled ONNX file and one infer request (the synchronous API a service calls)."""

    def __init__(self, path: str, hint: str = "f32", threads: int | None = None, device: str = "CPU") -> None:
        model = core().read_model(path)
        self.path, self.hint, self.device = path, hint, device
        self.compiled: Any = core().compile_model(model, device, compile_config(hint, threads, device))
        self.request: Any = self.compiled.create_infer_request()
        # Names from the ONNX graph, by position: a compiled port may carry several names
        # (OpenVINO merges a tensor's aliases, e.g. an input also named '/Concat_output_0'),
        # but Parameters and Results keep the file's input and output order and its names.
        self.input_names = [par.get_friendly_name() for par in model.get_parameters()]
        self.output_names = [_result_name(r) for r in model.get_results()]
        self._types = {n: port.get_element_type().to_dtype() for n, port in zip(self.input_names, self.compiled.inputs)}
        self._index = {n: i for i, n in enumerate(self.input_names)}

    def prepare(self, feeds: Feeds) -> dict[str, np.ndarray]:
        """Inputs cast to the element types the compiled model declares (int64 ids) and
        contiguous, so ``infer(share_inputs=True)`` reads them in place; outside the timed region."""
        out: dict[str, np.ndarray] = {}
        for name in self.input_names:
            value = np.asarray(feeds[name])
            wanted = self._types[name]
            out[name] = np.ascontiguousarray(value if value.dtype == wanted else value.astype(wanted))
        return out

    def by_port(self, prepared: Mapping[str, np.ndarray]) -> dict[int, np.ndarray]:
        """Prepared feeds keyed by input port index, what ``infer`` is given (names can be ambiguous)."""
        return {self._index[n]: prepared[n] for n in self.input_names}

    def timed_call(self, feeds: Feeds) -> TimedCall:
        """``InferRequest.infer`` on prepared feeds, inputs shared (no copy), outputs copied out
        of the request, as a service keeping the answer would do: what benchmark_app's
        synchronous latency mode times, plus the output copy."""
        ports = self.by_port(self.prepare(feeds))
        infer = self.request.infer
        return lambda: infer(ports, share_inputs=True, share_outputs=False)

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ports = self.by_port(self.prepare(feeds))
        values = self.request.infer(ports, share_inputs=True, share_outputs=False).to_tuple()
        out: dict[str, np.ndarray] = {}
        for name, value in zip(self.output_names, values):
            array = np.asarray(value)
            out[name] = array.astype(np.float32) if np.issubdtype(array.dtype, np.floating) else array
        return out

    def settings(self) -> dict[str, Any]:
        return {**compiled_settings(self.compiled), "runtime_precisions": runtime_precisions(self.compiled)}

    def close(self) -> None:
        self.request = None
        self.compiled = None


def _result_name(result: Any) -> str:
    """The ONNX output name of a Result: its friendly name is ``<name>/sink_port_0``."""
    name = str(result.get_friendly_name())
    names = result.input_value(0).get_names()
    stem = name.rsplit("/sink_port_", 1)[0]
    return stem if stem in names or not names else sorted(names)[0]


def open_file(path: Path, precision: Precision, threads: int | None) -> OvGraphRunner:
    """A compiled user file (``harness check``): the hint of the precision it is judged at."""
    return OvGraphRunner(str(path), RECIPES[precision][1], threads)


@register_backend
class OpenVinoBackend(Backend):
    name = "openvino"
    label = "OpenVINO"
    providers = (Provider("ov_cpu", name, "CPU"),)
    #: of the run's runtime settings, OpenVINO applies the thread count (INFERENCE_NUM_THREADS);
    #: ONNX Runtime's session options do not exist here, so its records do not claim them
    runtime_settings = frozenset({"intra_op_threads"})
    #: executes ONNX files: pre-built artifacts (``harness check``) can stand in for its exports
    runs_onnx_files = True

    @classmethod
    def unavailable_reason(cls, variant: Variant) -> str | None:
        if version() is None:
            return f"openvino not installed ({INSTALL_HINT})"
        device = variant.provider.device
        try:
            devices = list(core().available_devices)
        except Exception as exc:  # noqa: BLE001 - a broken plugin install: say so instead of crashing collection
            return f"openvino {version()}: cannot list devices ({type(exc).__name__}: {exc})"
        if device not in devices:
            return f"OpenVINO device {device} not available; devices: {devices}"
        if variant.precision not in RECIPES:
            return (f"{variant.precision.value}: no OpenVINO recipe (INT4 weight-only is ONNX Runtime's MatMulNBits "
                    "contrib op, which OpenVINO's ONNX frontend does not read)")
        if variant.precision is Precision.FP16:
            caps = cpu_capabilities()
            if "FP16" not in caps:
                return (f"OpenVINO CPU plugin reports no FP16 capability here (OPTIMIZATION_CAPABILITIES: {caps}); "
                        "an f16 inference-precision hint would execute in f32")
        return None

    @classmethod
    def runtime_summary(cls) -> str:
        found = version()
        if found is None:
            return f"openvino: not installed ({INSTALL_HINT})"
        try:
            devices = ", ".join(f"{d} ({core().get_property(d, 'FULL_DEVICE_NAME')})" for d in core().available_devices)
            return f"openvino {found}: devices {devices}; CPU capabilities {', '.join(cpu_capabilities())}"
        except Exception as exc:  # noqa: BLE001 - a broken plugin install: say so instead of crashing
            return f"openvino {found}: cannot list devices ({type(exc).__name__}: {exc})"

    @classmethod
    def open_onnx_file(cls, path: Path, provider: Provider, precision: Precision, threads: int | None,
                       runtime: "RuntimeSettings | None" = None, *, profile_prefix: str | None = None) -> GraphRunner:
        return open_file(path, precision, threads)  # no ORT profiler here: profile_prefix does not apply

    def __init__(self, ctx: BackendContext) -> None:
        super().__init__(ctx)
        self.exports = OnnxExports(ctx)
        #: graph name -> what the compiled model ran with (hint read back, runtime precisions)
        self._compiled: dict[str, dict[str, Any]] = {}

    def load(self, ref: GraphRef) -> GraphRunner:
        graph, variant = ref.graph, ref.variant
        entry = self.exports.entry(ref, RECIPES[variant.precision][0])
        runner = OvGraphRunner(str(entry.path()), RECIPES[variant.precision][1], self.ctx.intra_op_threads,
                               variant.provider.device)
        self._compiled[graph.name] = runner.settings()
        return runner

    def artifacts(self, ref: GraphRef) -> dict[str, dict[str, Any]]:
        graph = ref.graph
        out = self.exports.file_infos(ref, RECIPES[ref.variant.precision][0])
        if graph.name in self._compiled and f"{graph.name}/model.onnx" in out:
            out[f"{graph.name}/model.onnx"]["openvino"] = self._compiled[graph.name]
        return out

    # -- fresh-process measurement -----------------------------------------------------------------------
    def child_spec(self, refs: Sequence[GraphRef]) -> ChildSpec:
        """Artifact paths from the cache (built here first if missing, so the child never exports)."""
        variant = refs[0].variant
        return ChildSpec(self.exports.paths(refs, RECIPES[variant.precision][0]), variant.provider.device,
                         options={"hint": RECIPES[variant.precision][1], "threads": self.ctx.intra_op_threads or 0})

    @classmethod
    def file_child_spec(cls, paths: Mapping[str, str], variant: Variant, runtime: "RuntimeSettings") -> ChildSpec:
        return ChildSpec(dict(paths), variant.provider.device,
                         options={"hint": RECIPES[variant.precision][1], "threads": runtime.intra_op_threads or 0})

    @classmethod
    def child_imports(cls) -> None:
        import openvino  # noqa: F401  (numpy and this module are imported already; never torch)

    @classmethod
    def child_load(cls, spec: ChildSpec) -> ChildLoad:
        """Read and compile every graph, as a service starting up would; each call is the
        request's ``infer`` on prepared feeds (what the in-process latency times too)."""
        runners: dict[str, OvGraphRunner] = {}
        load: dict[str, float] = {}
        for name, path in spec.files().items():
            start = time.perf_counter()
            runners[name] = OvGraphRunner(str(path), str(spec.options["hint"]), spec.threads("threads"), str(spec.device))
            load[name] = (time.perf_counter() - start) * 1000.0
        first = next(iter(runners.values()))
        calls = {g: _infer_call(r) for g, r in runners.items()}
        return ChildLoad(calls, load, {"openvino": {"version": version(), **first.settings()}}, runners=dict(runners))


def _infer_call(runner: OvGraphRunner) -> Callable[[Mapping[str, np.ndarray]], Any]:
    return lambda feeds: runner.request.infer(runner.by_port(runner.prepare(feeds)), share_inputs=True,
                                              share_outputs=False)
