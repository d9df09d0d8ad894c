"""A served model as an artifact source of the judging pipeline.

``harness check`` judges files through a ``PrebuiltGraphs`` given to the suites' ``Workspace``;
an endpoint is the same kind of source with requests instead of sessions. The server's model
metadata becomes the ``ArtifactFile`` the I/O matcher reads (names, OIP datatypes, dynamic
dims), and :class:`EndpointRunner` is the ``GraphRunner`` the parity code, the decoding loops
and the timing code call: one corpus batch, one request. Everything else -- batches, the
memoised PyTorch FP32 reference, metrics, tolerances, records -- is the pipeline's own.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from harness.check.layout import ArtifactFile
from harness.core import Precision
from harness.runners.base import GraphRunner
from harness.runners.prebuilt import PrebuiltGraphs
from harness.serving.client import OipClient, ServedModel
from harness.settings.endpoint import Endpoint


class EndpointRunner(GraphRunner):
    """One served model as a runner: ``run`` sends the feeds as one OIP request."""

    def __init__(self, client: OipClient, model: ServedModel) -> None:
        self.client, self.model = client, model
        self.input_names = [t.name for t in model.inputs]
        self.output_names = [t.name for t in model.outputs]
        #: where the model is served; ``path`` stays None: a served model is no file to lint, bundle or profile
        self.url = f"{client.endpoint.url}/v2/models/{model.name}"

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.client.infer(self.model, feeds)

    def close(self) -> None:
        self.client.close()


class ConcurrentRunner(GraphRunner):
    """The same served model with each batch split into one request per row, all in flight at
    once, so the server's dynamic batcher (Triton's, MLServer's adaptive batching) groups them
    as it would group independent clients; rows are put back in order. Each worker thread
    opens its own connection (the HTTP transport's connections belong to the thread that made them)."""

    def __init__(self, runner: EndpointRunner, workers: int) -> None:
        self.runner, self.workers = runner, max(1, workers)
        self.input_names, self.output_names = runner.input_names, runner.output_names
        self.requests = 0

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rows = next(iter(feeds.values())).shape[0]
        parts: list[dict[str, np.ndarray] | None] = [None] * rows
        failures: list[BaseException] = []

        def work(first: int) -> None:
            client = self.runner.client.clone()
            try:
                for i in range(first, rows, self.workers):
                    parts[i] = client.infer(self.runner.model, {k: v[i:i + 1] for k, v in feeds.items()})
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                failures.append(exc)
            finally:
                client.close()

        threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(min(self.workers, rows))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failures:
            raise failures[0]
        self.requests += rows
        done = [p for p in parts if p is not None]
        return {name: np.concatenate([p[name] for p in done], axis=0) for name in done[0]}


def artifact_of(endpoint: Endpoint, served: ServedModel, role: str, precision: str, why: str) -> ArtifactFile:
    """The served model as the I/O matcher and job planner see a file: its name is the label."""
    return ArtifactFile(path=Path(served.name), role=role, inputs=served.inputs, outputs=served.outputs, opsets={},
                        producer=served.platform or str(served.server.get("name") or ""), precision=precision,
                        precision_reason=why, sha256="", bytes=0)


def detect_precision(served: ServedModel) -> tuple[str, str]:
    """What the served metadata says about precision: FP16 / BF16 float tensors, or a declared
    ``precision`` parameter; FP32 tensors alone cannot rule out INT8 weights inside (declare it)."""
    declared = str(served.parameters.get("precision", "") or "").lower()
    if declared in {p.value for p in Precision}:
        return declared, f"declared by the server's model parameters (precision={declared})"
    if not served.described:
        return "fp32", "the server publishes no tensor metadata: fp32 assumed (give --precisions)"
    floats = {t.dtype for t in served.outputs + served.inputs if t.dtype.startswith(("float", "bfloat"))}
    if floats & {"float16", "bfloat16"}:
        return "fp16", f"served tensors are {'/'.join(sorted(floats))}"
    return "fp32", "served tensors are FP32 (quantised weights inside a model are not visible: give --precisions)"


class EndpointGraphs(PrebuiltGraphs):
    """The artifact source of an endpoint check: one runner per served model, by its
    ``ArtifactFile`` path (the model's name), and the decoding runners once matched. A
    ``PrebuiltGraphs`` whose sessions are requests: it opens no file, so its own constructor runs
    instead of the file source's; looking runners up, serving decoders and closing are shared."""

    kind = "endpoint"
    #: a server's answers are not a function of bytes the harness can hash: never replayed
    replays = False

    def __init__(self, endpoint: Endpoint, served: Mapping[str, ServedModel], client: OipClient) -> None:
        self.endpoint = endpoint
        self.client = client
        self.served = dict(served)  # role -> model
        self.sessions = {
            Path(m.name): EndpointRunner(client.clone() if i else client, m) for i, m in enumerate(served.values())}
        self.records = {
            m.name: {"endpoint": endpoint.url, "served_model": m.name, "role": role, "version": m.version or None,
                     "platform": m.platform, "bytes": 0} for role, m in served.items()}
        self._runners = {}

    def runner_for(self, name: str) -> EndpointRunner:
        runner = self.sessions[Path(name)]
        assert isinstance(runner, EndpointRunner)
        return runner

    def served_records(self) -> dict[str, dict[str, Any]]:
        """``data.served``: each model's metadata, where its I/O came from, and how its tensors travelled."""
        return {role: {**m.record(), "transport": self.runner_for(m.name).client.encoding.record(self.endpoint.protocol)}
                for role, m in self.served.items()}

    def describe(self, role: str, served: ServedModel) -> None:
        """The model's I/O completed where its server published none (``harness.serving.discovery``)."""
        self.served[role] = served
        runner = self.runner_for(served.name)
        runner.model = served
        runner.input_names = [t.name for t in served.inputs]
        runner.output_names = [t.name for t in served.outputs]


def open_endpoint(endpoint: Endpoint, declared: str | None) -> tuple[EndpointGraphs, list[ArtifactFile],
                                                                     dict[str, ServedModel]]:
    """Preflight (exit 2 on anything missing), every served model's metadata, the source."""
    client = OipClient(endpoint)
    try:
        server = client.preflight()
        served = {g.role: client.model(g.name, server) for g in endpoint.graphs}
    except BaseException:
        client.close()
        raise
    artifacts = []
    for role, model in served.items():
        precision, why = (declared, "given") if declared else detect_precision(model)
        artifacts.append(artifact_of(endpoint, model, role, precision, why))
    return EndpointGraphs(endpoint, served, client), artifacts, served


__all__ = ["ConcurrentRunner", "EndpointGraphs", "EndpointRunner", "detect_precision", "open_endpoint"]
