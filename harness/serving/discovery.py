"""A served model's inputs and outputs where its server does not publish them.

The Open Inference Protocol's model metadata may list no tensors: KServe's custom predictors
(a ``kserve.Model`` subclass without ``get_input_types()``) answer ``"inputs": [], "outputs": []``
while serving requests correctly. Such a model is still judged:

* inputs: the reference graph's inputs of the first corpus batch, by name (``--map REF=NAME``
  renames one) and with the reference's dtypes -- what the served model was exported from;
* outputs: learned from the first response (every output the server returns when none is asked
  for by name); the I/O matcher then pairs them with the reference's as it pairs a file's.

Where the server publishes one side only, only the other is completed. The served record's
``io_source`` says, per side, where the tensors came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from harness.check.jobs import plan_jobs
from harness.check.layout import ArtifactFile, TensorInfo
from harness.serving.client import EndpointRefused, ServingError

if TYPE_CHECKING:  # pragma: no cover
    from harness.families import Family
    from harness.judge.workspace import Workspace
    from harness.serving.source import EndpointGraphs
    from harness.zoo.loading import LoadedModel

FROM_REFERENCE = "the reference's inputs by name and dtype (the server publishes none)"
FROM_RESPONSE = "learned from the first response (the server publishes none)"


def _dynamic(name: str, value: np.ndarray) -> TensorInfo:
    dtype = "bool" if value.dtype == np.bool_ else str(value.dtype)
    return TensorInfo(name, dtype, (None,) * value.ndim)


def complete_io(ws: Workspace, model: LoadedModel, family: Family, source: EndpointGraphs,
                artifacts: Sequence[ArtifactFile], maps: Mapping[str, str]) -> list[ArtifactFile]:
    """``artifacts`` with every undescribed side filled in (and the source's runners told)."""
    out = []
    for art in artifacts:
        served = source.served[art.role]
        if served.described:
            out.append(art)
            continue
        job = plan_jobs([art], family, model)[0]
        feeds = ws.refs.check_feeds(model, family, job.graph, job.mode, [ws.batches(model)[0]])[0]
        reference = {maps.get(n, n): feeds[n] for n in job.graph.input_names if n in feeds}
        io_source = dict(served.io_source)
        inputs = served.inputs
        if not inputs:
            inputs = tuple(_dynamic(name, value) for name, value in reference.items())
            io_source["inputs"] = FROM_REFERENCE
        outputs = served.outputs
        if not outputs:
            declared = {t.name for t in inputs}
            probe = replace(served, inputs=inputs)
            try:
                answer = source.runner_for(served.name).client.infer(
                    probe, {k: v for k, v in reference.items() if k in declared})
            except ServingError as exc:
                raise EndpointRefused(f"model {served.name!r} publishes no outputs and the request to learn them "
                                      f"failed: {exc}") from None
            outputs = tuple(_dynamic(name, value) for name, value in answer.items())
            io_source["outputs"] = FROM_RESPONSE
        source.describe(art.role, replace(served, inputs=inputs, outputs=outputs, io_source=io_source))
        out.append(replace(art, inputs=inputs, outputs=outputs))
    return out
