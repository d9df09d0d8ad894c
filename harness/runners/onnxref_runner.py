"""The ONNX reference evaluator: the standard's own semantics of a file, as a backend.

``ref_cpu`` runs the harness's ONNX artifacts (or a user's file, ``harness check``) with
``onnx.reference.ReferenceEvaluator``: each operator as the ONNX specification defines it, in
numpy, with no graph optimisation, no fusion and no runtime-specific kernel. Why a team wants it
beside ONNX Runtime: when an export disagrees with PyTorch on ``ort_cpu``, the reference says
whose the error is -- if the reference agrees with PyTorch, ONNX Runtime (a fused kernel, a graph
optimisation, a contrib op's precision) changed the numbers; if the reference disagrees too, the
file itself computes something else (the export). It is slow (numpy per node: 10-30x ONNX Runtime
on the tiny models here), so it is for judging, not for timing.

What it runs, per precision: the FP32 artifact, the FP16 artifact (FP16 arithmetic in numpy, as
the file's types say), the INT8 artifacts (``DynamicQuantizeLinear``/``MatMulInteger`` and Q/DQ are
standard operators). INT4 (``MatMulNBits``) and the files ONNX Runtime's transformer optimizer
writes (``com.microsoft`` fused attention) use contrib operators the standard does not define:
they are refused with that reason, never run approximately.

Two operators of onnx 1.23's reference are replaced by the specification's definitions
(``_fixed_operators``), each found by running the harness's own exports:

* ``GatherElements`` flattens its indices wrongly when they are smaller than the data on a
  non-gathered axis (BERT's buffered ``token_type_ids``: "cannot reshape array of size 1 into
  shape (1,16)"): replaced by ``numpy.take_along_axis`` with negative indices wrapped;
* ``DequantizeLinear`` has no implementation before opset 19 ("No implementation for operator
  'DequantizeLinear' ... version 17", every dynamic INT8 export here): opsets 10-18 get the
  opset-19 definition, which is the same for int8/uint8/int32 inputs; from 19 on onnx's own runs.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from harness.core import Precision, Provider, Variant
from harness.core.cachedir import source_digest
from harness.runners import register_backend
from harness.runners.base import Backend, BackendContext, ChildCall, ChildLoad, ChildSpec, GraphRef, GraphRunner, OnnxExports

if TYPE_CHECKING:  # pragma: no cover
    from harness.core.runtime import RuntimeSettings

#: the precisions the reference evaluates, each from the artifact of the same precision
PRECISIONS = (Precision.FP32, Precision.FP16, Precision.INT8, Precision.INT8_STATIC)
#: operator domains the standard defines (a node in any other is a runtime's contrib operator)
STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml"})


@functools.lru_cache(maxsize=1)
def version() -> str | None:
    try:
        import onnx
    except ImportError:
        return None
    return str(onnx.__version__)


#: the first default-domain opset whose ``DequantizeLinear`` onnx's reference implements
DEQUANTIZE_FROM_OPSET = 19


@functools.lru_cache(maxsize=1)
def _fixed_operators() -> dict[str, type]:
    """The operators this backend supplies where onnx's own are wrong or missing (module docstring)."""
    from onnx.reference.op_run import OpRun
    from onnx.reference.ops.op_dequantize_linear import DequantizeLinear_23

    class GatherElements(OpRun):  # onnx's reference flattens smaller indices wrongly
        op_domain = ""

        def _run(self, data: np.ndarray, indices: np.ndarray, axis: int | None = None) -> tuple[np.ndarray]:
            axis = int(self.axis if axis is None else axis)  # type: ignore[attr-defined]  # set by OpRun from the node
            wrapped = np.where(indices < 0, indices + data.shape[axis], indices)
            return (np.take_along_axis(data, wrapped, axis=axis),)

    class DequantizeLinear(DequantizeLinear_23):  # opsets 10-18: the same definition, absent from onnx's
        op_domain = ""

    return {"GatherElements": GatherElements, "DequantizeLinear": DequantizeLinear}


def _overrides(opset: int) -> list[type]:
    """What replaces onnx's operators for a file of default-domain ``opset``: GatherElements
    always; DequantizeLinear only below the opset onnx implements it from (after it, onnx's own,
    with the block quantization a later opset adds)."""
    fixed = _fixed_operators()
    return [fixed["GatherElements"]] + ([fixed["DequantizeLinear"]] if opset < DEQUANTIZE_FROM_OPSET else [])


def contrib_operators(model: Any) -> list[str]:
    """``domain.op_type`` of every node outside the standard's domains, main graph and subgraphs."""
    found: set[str] = set()

    def walk(graph: Any) -> None:
        for node in graph.node:
            if node.domain not in STANDARD_DOMAINS:
                found.add(f"{node.domain}.{node.op_type}")
            for attribute in node.attribute:
                if attribute.g is not None and len(attribute.g.node):
                    walk(attribute.g)
                for sub in attribute.graphs:
                    walk(sub)

    walk(model.graph)
    return sorted(found)


class RefGraphRunner(GraphRunner):
    """One ONNX file under the reference evaluator (external data loaded from beside the file)."""

    def __init__(self, path: str) -> None:
        import onnx
        from onnx.reference import ReferenceEvaluator

        model = onnx.load(path, load_external_data=True)
        contrib = contrib_operators(model)
        if contrib:
            # no path in the message: every caller names the file it opened (a check's refusal, a case's artifacts)
            raise ValueError(f"the ONNX reference evaluates standard operators only; this file uses "
                             f"{', '.join(contrib)} (a runtime's contrib operators)")
        self.path = path
        initialized = {i.name for i in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in initialized]
        self.output_names = [o.name for o in model.graph.output]
        elem = onnx.helper.tensor_dtype_to_np_dtype
        self._types = {i.name: elem(i.type.tensor_type.elem_type) for i in model.graph.input
                       if i.name in self.input_names and i.type.tensor_type.elem_type}
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), DEQUANTIZE_FROM_OPSET)
        self.replaced = [cls.__name__ for cls in _overrides(opset)]
        self.evaluator: Any = ReferenceEvaluator(model, new_ops=_overrides(opset))

    def prepare(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Inputs cast to the types the file declares (the reference, unlike a runtime, does not
        refuse an int32 id tensor: it would compute in the wrong type)."""
        out: dict[str, np.ndarray] = {}
        for name in self.input_names:
            value = np.asarray(feeds[name])
            wanted = self._types.get(name)
            out[name] = value if wanted is None or value.dtype == wanted else value.astype(wanted)
        return out

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        values = self.evaluator.run(None, self.prepare(feeds))
        out: dict[str, np.ndarray] = {}
        for name, value in zip(self.output_names, values):
            array = np.asarray(value)
            out[name] = array.astype(np.float32) if np.issubdtype(array.dtype, np.floating) else array
        return out

    def settings(self) -> dict[str, Any]:
        return {"evaluator": "onnx.reference.ReferenceEvaluator", "onnx": version(),
                "replaced_operators": self.replaced}

    def close(self) -> None:
        self.evaluator = None


@register_backend
class OnnxReferenceBackend(Backend):
    name = "onnx_reference"
    label = "ONNX reference"
    providers = (Provider("ref_cpu", name, "CPU"),)
    #: numpy per node: no thread count, session option or provider option of a runtime applies
    runtime_settings = frozenset()
    #: executes ONNX files: pre-built artifacts (``harness check``) can stand in for its exports
    runs_onnx_files = True
    #: numpy node by node: what it measures is numpy, not a deployment (no perf suite, no bench column)
    timed = False

    @classmethod
    def unavailable_reason(cls, variant: Variant) -> str | None:
        if version() is None:
            return "onnx not installed (pip install onnx)"
        if variant.precision not in PRECISIONS:
            return (f"{variant.precision.value}: the ONNX reference evaluates standard operators only, and this "
                    "precision's artifact uses a runtime's contrib operators (INT4: com.microsoft.MatMulNBits)")
        return None

    @classmethod
    def runtime_summary(cls) -> str:
        found = version()
        if found is None:
            return "onnx_reference: onnx not installed (pip install onnx)"
        return (f"onnx_reference: onnx {found} ReferenceEvaluator (numpy, one node at a time; GatherElements, and "
                f"DequantizeLinear below opset {DEQUANTIZE_FROM_OPSET}, by the specification)")

    @classmethod
    def deterministic(cls, variant: Variant) -> bool:
        return True  # numpy on the CPU: the same file and feeds give the same outputs

    @classmethod
    def open_onnx_file(cls, path: Path, provider: Provider, precision: Precision, threads: int | None,
                       runtime: "RuntimeSettings | None" = None, *, profile_prefix: str | None = None) -> GraphRunner:
        return RefGraphRunner(str(path))  # nothing to profile or tune: the file's semantics only

    def __init__(self, ctx: BackendContext) -> None:
        super().__init__(ctx)
        self.exports = OnnxExports(ctx)

    def outputs_key(self, ref: GraphRef) -> dict[str, Any] | None:
        """The artifact bytes, onnx's and numpy's versions and this module's code decide the
        outputs: a warm rerun replays them rather than evaluating node by node again."""
        files = {name: info["sha256"] for name, info in self.artifacts(ref).items()}
        return {"backend": self.name, "artifacts": files, "onnx": version(), "numpy": np.__version__,
                "runner": [source_digest(RefGraphRunner)]}

    def load(self, ref: GraphRef) -> GraphRunner:
        return RefGraphRunner(str(self.exports.entry(ref).path()))

    def artifacts(self, ref: GraphRef) -> dict[str, dict[str, Any]]:
        return self.exports.file_infos(ref)

    # -- fresh-process measurement: the reference's own load and call, for completeness ---------------
    def child_spec(self, refs: Sequence[GraphRef]) -> ChildSpec:
        return ChildSpec(self.exports.paths(refs), refs[0].variant.provider.device)

    @classmethod
    def file_child_spec(cls, paths: Mapping[str, str], variant: Variant, runtime: "RuntimeSettings") -> ChildSpec:
        return ChildSpec(dict(paths), variant.provider.device)

    @classmethod
    def child_imports(cls) -> None:
        import onnx.reference  # noqa: F401  (numpy and this module are imported already; never torch)

    @classmethod
    def child_load(cls, spec: ChildSpec) -> ChildLoad:
        runners: dict[str, RefGraphRunner] = {}
        load: dict[str, float] = {}
        for name, path in spec.files().items():
            start = time.perf_counter()
            runners[name] = RefGraphRunner(str(path))
            load[name] = (time.perf_counter() - start) * 1000.0
        calls: dict[str, ChildCall] = {g: r.run for g, r in runners.items()}
        return ChildLoad(calls, load, {"onnx_reference": next(iter(runners.values())).settings()},
                         runners=dict(runners))
