"""Where a served model is and how to reach it: one typed record, parsed once.

``harness check --endpoint URL --served-model NAME`` and ``[models.<name>.endpoint]`` both
become an :class:`Endpoint`. Every mistake in it (no host, a port that is not a number, an
unknown protocol) is a one-line ``UsageError`` naming the option, before anything connects.
It is a setting (the config file validates ``[models.<name>.endpoint]`` with it when it is read),
so it lives in ``harness.settings``, below ``harness.serving``, which reaches the server.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlsplit

from harness.core import Precision, UsageError

#: the Open Inference Protocol's two transports, and an OpenAI-compatible API (generative models)
PROTOCOLS = ("http", "grpc", "openai")
#: the default ports (Triton's; MLServer uses 8080 / 8081; vLLM and TGI serve the OpenAI API on 8000)
DEFAULT_PORTS = {"http": 8000, "grpc": 8001, "openai": 8000}
#: the OpenAI-compatible APIs a served generative model is judged through
OPENAI_ROUTES = ("completions", "chat")


@dataclass(frozen=True)
class ServedGraph:
    """One model on the server and the role it plays for the reference (``model`` for a
    single graph; ``encoder`` / ``decoder`` / ``decoder_with_past`` for a seq2seq split)."""

    name: str
    role: str = "model"


@dataclass(frozen=True)
class Endpoint:
    """An OIP server (host, port, transport) and the served model(s) to judge."""

    host: str
    port: int
    protocol: str
    graphs: tuple[ServedGraph, ...]
    version: str = ""  # "" = the server's choice (its latest ready version)
    timeout_s: float = 30.0  # per request; a slower answer is a counted error
    #: hosts the load sweep may target besides loopback (the configured server's own host)
    load_hosts: tuple[str, ...] = field(default_factory=tuple)
    #: ``openai`` only: ``/v1/completions`` or ``/v1/chat/completions``, and whether answers are streamed
    route: str = "completions"
    stream: bool = True

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.protocol}://{self.address}"

    def describe(self) -> dict[str, Any]:
        out = {"url": self.url, "protocol": self.protocol, "models": {g.role: g.name for g in self.graphs},
               "version": self.version or None, "timeout_s": self.timeout_s}
        return {**out, "route": self.route, "stream": self.stream} if self.protocol == "openai" else out

    def load_allowed(self) -> str | None:
        """Why a load sweep may not target this host (None: it may): loopback, or a host the
        configuration names in ``load_hosts``; never anywhere else."""
        if self.host in self.load_hosts or is_loopback(self.host):
            return None
        return (f"{self.url}: a load sweep targets only loopback or a host named in load_hosts "
                "([models.<name>.endpoint] load_hosts = [...] or --load-host)")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(ipaddress.ip_address(info[4][0]).is_loopback
                       for info in socket.getaddrinfo(host, None))
        except OSError:
            return False


def parse_served_models(values: list[str] | tuple[str, ...], option: str = "--served-model") -> tuple[ServedGraph, ...]:
    """``NAME`` (a single graph) or ``ROLE=NAME`` entries, each role at most once."""
    from harness.families.base import OPTIMUM_FILES

    roles = set(OPTIMUM_FILES.values())
    out: list[ServedGraph] = []
    for text in values:
        role, sep, name = text.partition("=")
        if not sep:
            role, name = "model", text
        role, name = role.strip(), name.strip()
        if not name:
            raise UsageError(f"{option}: {text!r}: no model name")
        if role not in roles:
            raise UsageError(f"{option}: {text!r}: unknown role {role!r}; roles: {', '.join(sorted(roles))}")
        if any(g.role == role for g in out):
            raise UsageError(f"{option}: role {role!r} given twice")
        out.append(ServedGraph(name, role))
    if not out:
        raise UsageError(f"{option}: give the served model's name")
    return tuple(out)


def parse_endpoint(url: str, models: list[str] | tuple[str, ...], *, protocol: str | None = None,
                   version: str | None = None, timeout_s: float | None = None,
                   load_hosts: tuple[str, ...] = (), option: str = "--endpoint", route: str = "completions",
                   stream: bool = True) -> Endpoint:
    """``http://host:port``, ``grpc://host:port``, ``openai://host:port`` (an OpenAI-compatible API
    over HTTP) or ``host:port`` (then ``protocol``, default http)."""
    if route not in OPENAI_ROUTES:
        raise UsageError(f"--openai-route: {route!r}: give {' or '.join(OPENAI_ROUTES)}")
    text = url.strip()
    if not text:
        raise UsageError(f"{option}: empty URL")
    parts = urlsplit(text if "://" in text else f"//{text}")
    scheme = parts.scheme or None
    if scheme == "https":
        raise UsageError(f"{option}: {url}: TLS endpoints are not supported yet; give http:// or grpc://")
    if scheme is not None and scheme not in PROTOCOLS:
        raise UsageError(f"{option}: {url}: unknown scheme {scheme!r}; give http://HOST:PORT, grpc://HOST:PORT "
                         "or openai://HOST:PORT")
    if protocol is not None and protocol not in PROTOCOLS:
        raise UsageError(f"--protocol: {protocol!r}: give http, grpc or openai")
    if scheme and protocol and scheme != protocol:
        raise UsageError(f"{option}: {url} says {scheme} but --protocol says {protocol}")
    proto = scheme or protocol or "http"
    if parts.path not in ("", "/"):
        raise UsageError(f"{option}: {url}: give the server's address only (no path; the model is --served-model)")
    host = parts.hostname
    if not host:
        raise UsageError(f"{option}: {url}: no host")
    try:
        port = parts.port or DEFAULT_PORTS[proto]
    except ValueError:
        raise UsageError(f"{option}: {url}: the port is not a number in 1-65535") from None
    if timeout_s is not None and not timeout_s > 0:
        raise UsageError(f"{option}: timeout must be > 0 seconds, got {timeout_s}")
    graphs = parse_served_models(list(models))
    if proto == "openai" and (len(graphs) != 1 or graphs[0].role != "model"):
        raise UsageError(f"{option}: {url}: an OpenAI-compatible server is judged on one model: --served-model NAME")
    return Endpoint(host, port, proto, graphs, (version or "").strip(),
                    30.0 if timeout_s is None else float(timeout_s), tuple(load_hosts), route, stream)


def endpoint_from_table(table: Mapping[str, Any], where: str) -> Endpoint:
    """``[models.<name>.endpoint]``: ``url``, ``model`` (a name, or a table role -> name),
    optional ``protocol``, ``version``, ``timeout_s``, ``load_hosts``."""
    known = {"url", "model", "protocol", "version", "timeout_s", "load_hosts", "precision"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    if not isinstance(table.get("url"), str):
        raise UsageError(f"{where}.url: give the server's URL, e.g. \"http://127.0.0.1:8000\"")
    model = table.get("model")
    if isinstance(model, str):
        models = [model]
    elif isinstance(model, Mapping) and all(isinstance(v, str) for v in model.values()):
        models = [f"{role}={name}" for role, name in model.items()]
    else:
        raise UsageError(f"{where}.model: give the served model's name (or a table role = name)")
    timeout = table.get("timeout_s")
    if timeout is not None and not isinstance(timeout, (int, float)):
        raise UsageError(f"{where}.timeout_s: a number of seconds, got {timeout!r}")
    hosts = table.get("load_hosts", [])
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise UsageError(f"{where}.load_hosts: a list of host names")
    version = table.get("version")
    precision = table.get("precision")
    if precision is not None:
        if precision not in {p.value for p in Precision}:
            raise UsageError(f"{where}.precision: {precision!r}; give one of "
                             f"{', '.join(p.value for p in Precision)}")
    return parse_endpoint(table["url"], models, protocol=table.get("protocol"),
                          version=None if version is None else str(version), timeout_s=timeout,
                          load_hosts=tuple(hosts), option=f"{where}.url")
