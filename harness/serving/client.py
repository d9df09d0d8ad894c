"""One Open Inference Protocol (KServe v2) connection, over HTTP/REST or gRPC, via ``tritonclient``.

The harness speaks to Triton, KServe and Seldon MLServer through the same two transports of
``tritonclient``; this module hides which one, and turns what the transports raise (socket
errors, ``InferenceServerException`` with an HTTP or gRPC status, timeouts) into two kinds:

* :class:`EndpointRefused` (a ``UsageError``, exit 2): found by :meth:`OipClient.preflight`
  before any work -- unreachable, server or model not ready, unknown model or version;
* :class:`ServingError`: a request failed while work was under way (4xx/5xx, timeout, a
  dropped connection). The judging pipeline records it as the case's error; the load sweep
  counts it. Neither is ever a traceback.

A client is not shared between threads: :meth:`OipClient.clone` opens another connection to
the same server for each load worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from harness.check.layout import TensorInfo
from harness.core import UsageError
from harness.settings.endpoint import Endpoint

#: OIP tensor datatypes <-> numpy dtype names (the protocol's table; BYTES is not a numeric tensor)
OIP_DTYPES = {"BOOL": "bool", "UINT8": "uint8", "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
              "FP16": "float16", "FP32": "float32", "FP64": "float64", "BF16": "bfloat16", "BYTES": "bytes"}
NUMPY_TO_OIP = {v: k for k, v in OIP_DTYPES.items()}


class EndpointRefused(UsageError):
    """The endpoint cannot be judged at all: one line, exit 2, before any work."""


class ServingError(RuntimeError):
    """A request failed mid-run: an HTTP/gRPC error status, a timeout, a dropped connection."""

    def __init__(self, message: str, status: str = "") -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ServedModel:
    """What the server says about one model: the record's ``served`` entry and the I/O the
    check's matcher pairs with the reference graph's."""

    name: str
    version: str
    platform: str
    versions: tuple[str, ...]
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    server: dict[str, Any] = field(default_factory=dict)
    #: the model's configuration where the server serves one (Triton's /config); else {}
    config: dict[str, Any] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)
    #: where the inputs and outputs came from: the server's metadata, or (a server that publishes
    #: none, as KServe's custom predictors) the reference's inputs and the first response's outputs
    io_source: dict[str, str] = field(default_factory=lambda: {"inputs": "metadata", "outputs": "metadata"})

    @property
    def described(self) -> bool:
        """Whether the server published both sides of the model's I/O."""
        return bool(self.inputs) and bool(self.outputs)

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version or None, "platform": self.platform,
                "versions": list(self.versions), "server": self.server,
                "inputs": [{"name": t.name, "datatype": NUMPY_TO_OIP.get(t.dtype, t.dtype), "shape": list(t.shape or [])}
                           for t in self.inputs],
                "outputs": [{"name": t.name, "datatype": NUMPY_TO_OIP.get(t.dtype, t.dtype),
                             "shape": list(t.shape or [])} for t in self.outputs],
                "io_source": dict(self.io_source),
                "max_batch_size": self.config.get("max_batch_size"),
                "dynamic_batching": self.config.get("dynamic_batching"),
                "parameters": self.parameters}


@dataclass(frozen=True)
class TensorEncoding:
    """How an HTTP request's tensors travel: raw bytes after the JSON header (the binary tensor
    data extension) or JSON lists; gRPC is always binary. ``why`` says how it was decided."""

    binary: bool
    why: str

    def record(self, protocol: str) -> dict[str, Any]:
        kind = "binary" if self.binary or protocol == "grpc" else "json"
        return {"tensors": kind, "why": "gRPC carries raw tensor bytes" if protocol == "grpc" else self.why}


def refuses_binary(status: str, message: str) -> bool:
    """A 400 whose message is about the binary tensor extension (KServe's: "received byte inputs,
    but the 'inference-header-content-length' header is missing"): resend the tensors as JSON."""
    text = message.lower()
    return status == "400" and any(w in text for w in ("binary", "byte input", "inference-header-content-length"))


def first_line(exc: BaseException, limit: int = 240) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:limit]


def _status(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    value = status() if callable(status) else status
    return str(value or "")


class OipClient:
    """A connection to one OIP server (``endpoint``), over its transport."""

    def __init__(self, endpoint: Endpoint, concurrency: int = 1,
                 encoding: TensorEncoding = TensorEncoding(False, "not yet asked")) -> None:
        self.endpoint = endpoint
        self.concurrency = concurrency
        #: HTTP tensors as raw bytes where the server lists the binary tensor data extension, JSON
        #: lists elsewhere (MLServer); a server that lists it but refuses it (KServe) falls back to JSON
        self.encoding = encoding
        try:
            if endpoint.protocol == "grpc":
                import tritonclient.grpc as grpcclient

                self._mod: Any = grpcclient
                self._client: Any = grpcclient.InferenceServerClient(endpoint.address)
            else:
                import tritonclient.http as httpclient

                self._mod = httpclient
                self._client = httpclient.InferenceServerClient(
                    endpoint.address, concurrency=concurrency, connection_timeout=endpoint.timeout_s,
                    network_timeout=endpoint.timeout_s)
        except ImportError as exc:
            raise UsageError(f"--endpoint: {exc.name or 'tritonclient'} is not installed "
                             "(pip install 'model-harness[serving]')") from None
        except Exception as exc:  # noqa: BLE001 - any transport failure is the endpoint's refusal, one line
            raise EndpointRefused(f"{endpoint.url}: cannot open a connection ({first_line(exc)})") from None

    def clone(self) -> OipClient:
        return OipClient(self.endpoint, self.concurrency, self.encoding)

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # noqa: BLE001 - closing a connection the server already dropped
            pass

    # -- before work ----------------------------------------------------------------------------------
    def _ask(self, what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        if self.endpoint.protocol == "grpc":
            kwargs.setdefault("client_timeout", self.endpoint.timeout_s)
        try:
            return call(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any transport failure is the endpoint's refusal, one line
            raise EndpointRefused(f"{self.endpoint.url}: {what}: {first_line(exc)}") from None

    def preflight(self) -> dict[str, Any]:
        """Live and ready, or a one-line refusal; the server's metadata (name, version, extensions)."""
        url = self.endpoint.url
        try:
            live = self._client.is_server_live(**self._timeout())
        except Exception as exc:  # noqa: BLE001 - any transport failure is the endpoint's refusal, one line
            raise EndpointRefused(f"{url}: unreachable ({first_line(exc)}); is the server running and is "
                                  f"{self.endpoint.protocol} its protocol on that port?") from None
        if not live:
            raise EndpointRefused(f"{url}: the server answers but is not live")
        if not self._ask("readiness", self._client.is_server_ready):
            raise EndpointRefused(f"{url}: the server is live but not ready (still loading models?)")
        meta = self._json(self._ask("server metadata", self._client.get_server_metadata))
        listed = "binary_tensor_data" in (meta.get("extensions") or [])
        self.encoding = TensorEncoding(listed, "the server lists the binary_tensor_data extension" if listed
                                       else "the server does not list the binary_tensor_data extension")
        return {"name": meta.get("name"), "version": meta.get("version"), "extensions": meta.get("extensions", [])}

    def _timeout(self) -> dict[str, Any]:
        return {"client_timeout": self.endpoint.timeout_s} if self.endpoint.protocol == "grpc" else {}

    def _json(self, value: Any) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        from google.protobuf import json_format

        return dict(json_format.MessageToDict(value, preserving_proto_field_name=True))

    def model(self, name: str, server: Mapping[str, Any] | None = None) -> ServedModel:
        """The served model's metadata, or a refusal naming what is missing (model, version, readiness)."""
        version = self.endpoint.version
        url = self.endpoint.url
        label = f"model {name!r}" + (f" version {version!r}" if version else "")
        try:
            meta = self._json(self._client.get_model_metadata(name, version, **self._timeout()))
        except Exception as exc:  # noqa: BLE001 - any transport failure is the endpoint's refusal, one line
            known = self.known_models()
            hint = f"; the server has: {', '.join(known)}" if known else ""
            if name in known and version:
                hint = f"; {name!r} is served, but not version {version!r}"
            raise EndpointRefused(f"{url}: {label}: not found ({first_line(exc, 160)}){hint}") from None
        try:
            ready = self._client.is_model_ready(name, version, **self._timeout())
        except Exception as exc:  # noqa: BLE001 - any transport failure is the endpoint's refusal, one line
            raise EndpointRefused(f"{url}: {label}: readiness: {first_line(exc)}") from None
        if not ready:
            raise EndpointRefused(f"{url}: {label} is not ready (loading, unloading or failed to load)")
        config: dict[str, Any] = {}
        try:
            raw = self._client.get_model_config(name, version, **self._timeout())
            config = self._json(raw)
            config = dict(config.get("config", config))
        except Exception:  # noqa: BLE001 - Triton serves /config; MLServer and KServe do not (a protocol extension)
            config = {}
        return ServedModel(name=str(meta.get("name", name)), version=version, platform=str(meta.get("platform", "")),
                           versions=tuple(str(v) for v in meta.get("versions", []) or []),
                           inputs=tuple(_tensor(t) for t in meta.get("inputs", [])),
                           outputs=tuple(_tensor(t) for t in meta.get("outputs", [])),
                           server=dict(server or {}), config=config,
                           parameters=dict(meta.get("parameters", {}) or {}))

    def known_models(self) -> list[str]:
        try:
            index = self._client.get_model_repository_index(**self._timeout())
        except Exception:  # noqa: BLE001 - the repository extension is optional
            return []
        entries = self._json(index).get("models", index) if not isinstance(index, list) else index
        return sorted({str(e.get("name")) for e in entries if isinstance(e, Mapping) and e.get("name")})

    # -- during work --------------------------------------------------------------------------------------
    def infer(self, model: ServedModel, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One request: ``feeds`` (the served model's own input names) cast to its datatypes;
        every output back as numpy (floating outputs as FP32): the declared ones, or all the
        response holds where the model declares none. A failure is a ServingError."""
        try:
            return self._infer(model, feeds)
        except ServingError as exc:
            if not (self.encoding.binary and self.endpoint.protocol == "http" and refuses_binary(exc.status, str(exc))):
                raise
            self.encoding = TensorEncoding(False, f"binary tensors refused ({str(exc).split(']: ', 1)[-1][:160]}): "
                                                  "JSON tensors")
            return self._infer(model, feeds)

    def _infer(self, model: ServedModel, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        mod = self._mod
        grpc = self.endpoint.protocol == "grpc"
        binary = self.encoding.binary
        declared = {t.name: t for t in model.inputs}
        inputs = []
        for name, value in feeds.items():
            info = declared.get(name)
            arr = np.ascontiguousarray(value if info is None or info.dtype not in NUMPY_TO_OIP or info.dtype == "bytes"
                                       else value.astype(info.dtype, copy=False))
            datatype = NUMPY_TO_OIP.get(str(arr.dtype))
            if datatype is None:
                raise ServingError(f"{model.name}: input {name!r}: dtype {arr.dtype} has no OIP datatype")
            item = mod.InferInput(name, list(arr.shape), datatype)
            if grpc:
                item.set_data_from_numpy(arr)
            else:
                item.set_data_from_numpy(arr, binary_data=binary)
            inputs.append(item)
        outputs = [mod.InferRequestedOutput(t.name) if grpc else mod.InferRequestedOutput(t.name, binary_data=binary)
                   for t in model.outputs] or None  # None: every output the model has
        kwargs: dict[str, Any] = {"model_version": model.version, "outputs": outputs}
        if grpc:
            kwargs["client_timeout"] = self.endpoint.timeout_s
        elif not binary:  # a JSON body says so: KServe's FastAPI takes an unlabelled body for binary tensors
            kwargs["headers"] = {"Content-Type": "application/json"}
        try:
            result = self._client.infer(model.name, inputs, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any transport failure is the endpoint's refusal, one line
            status = _status(exc)
            where = f" [{status}]" if status else ""
            raise ServingError(f"{self.endpoint.url} {model.name}: request failed{where}: {first_line(exc)}",
                               status) from None
        names = [t.name for t in model.outputs] or response_outputs(result.get_response())
        out: dict[str, np.ndarray] = {}
        for name in names:
            typed = _typed_contents(result.get_response(), name) if grpc else None
            arr = result.as_numpy(name) if typed is None else typed
            if arr is None:
                raise ServingError(f"{self.endpoint.url} {model.name}: the response has no output {name!r}")
            if arr.dtype.kind == "f" and arr.dtype != np.float32:
                arr = arr.astype(np.float32)
            elif not arr.flags.writeable:  # a view of the response's bytes: callers may write to outputs
                arr = arr.copy()
            out[name] = arr
        return out

    def statistics(self, model: ServedModel) -> dict[str, Any] | None:
        """The model's server-side statistics (Triton's statistics extension), or None where the
        server does not provide them (MLServer, KServe: they publish Prometheus metrics instead)."""
        try:
            raw = self._client.get_inference_statistics(model.name, model.version, **self._timeout())
        except Exception:  # noqa: BLE001 - the statistics extension is optional
            return None
        stats = self._json(raw)
        entries = stats.get("model_stats") or []
        return dict(entries[0]) if entries else None


#: OIP datatypes -> the gRPC ``InferTensorContents`` field that holds them typed
_CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
             "INT64": "int64_contents", "UINT8": "uint_contents", "UINT32": "uint_contents",
             "UINT64": "uint64_contents", "FP32": "fp32_contents", "FP64": "fp64_contents"}


def _typed_contents(response: Any, name: str) -> np.ndarray | None:
    """An output a gRPC server sent in the typed ``contents`` fields instead of
    ``raw_output_contents`` (the protocol allows both; KServe predictors whose outputs are
    not set as binary answer so, and tritonclient reads only the raw form): None otherwise."""
    if len(response.raw_output_contents):
        return None
    for output in response.outputs:
        field_name = _CONTENTS.get(output.datatype)
        if output.name == name and field_name:
            values = getattr(output.contents, field_name)
            return np.asarray(values, dtype=OIP_DTYPES[output.datatype]).reshape(list(output.shape))
    return None


def response_outputs(response: Any) -> list[str]:
    """The output names of a response (HTTP: a JSON dict; gRPC: a ModelInferResponse), in order."""
    if isinstance(response, Mapping):
        return [str(o.get("name")) for o in response.get("outputs", []) or []]
    return [str(o.name) for o in getattr(response, "outputs", [])]


def _tensor(meta: Mapping[str, Any]) -> TensorInfo:
    datatype = str(meta.get("datatype", ""))
    shape = tuple(None if int(d) < 0 else int(d) for d in meta.get("shape", []) or [])
    return TensorInfo(str(meta.get("name")), OIP_DTYPES.get(datatype, datatype.lower()), shape or None)


def wait_ready(endpoint: Endpoint, model: str, budget_s: float = 60.0) -> bool:
    """Poll the model's ready endpoint until it says ready or ``budget_s`` passes (test fixtures,
    scripts that start a server): True when ready. Polls, never sleeps a fixed time first."""
    deadline = time.monotonic() + budget_s
    client: OipClient | None = None
    try:
        while time.monotonic() < deadline:
            try:
                client = client or OipClient(endpoint)
                if client._client.is_model_ready(model, endpoint.version, **client._timeout()):
                    return True
            except Exception:  # noqa: BLE001 - not listening yet
                if client is not None:
                    client.close()
                client = None
            time.sleep(0.1)
        return False
    finally:
        if client is not None:
            client.close()
