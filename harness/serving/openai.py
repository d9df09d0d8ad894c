"""A generative model served behind an OpenAI-compatible API (vLLM, TGI, llama.cpp's server,
Triton's OpenAI frontend, LitServe's ``OpenAISpec``), judged against PyTorch.

``harness check --reference DIR --endpoint openai://HOST:PORT --served-model NAME`` sends every
corpus prompt of the generation suite to ``/v1/completions`` (the raw prompt) or
``/v1/chat/completions`` (one user message: the server applies its chat template, so parity
holds only where that template is the identity) with greedy settings (``temperature`` 0,
``max_tokens`` the suite's new-token budget), streamed by default. The API returns text, not
token ids: both sides' text is tokenised again with the reference tokenizer, and the suite's
own scoring (token exact match, first divergence, BLEU / chrF, edit distance) and gates make
the ``check_generation`` record -- a server decoding another model fails it by name.

With ``--perf``, each concurrency level (``--concurrency``) keeps N streamed requests in flight
and records time to first token (TTFT), time per output token after the first (TPOT) and
output tokens per second over the level's wall time, in the perf schema
(``latency_ms[gen=ttft,concurrency=N]``, ``latency_ms[gen=tpot,concurrency=N]``).

Requests go through the standard library's ``http.client`` (no SDK): server-sent events are
read line by line, so TTFT is when the first content arrived. A request the server refuses is
a ``ServingError`` carrying the server's own message.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from harness.serving.client import ServingError
from harness.settings.endpoint import Endpoint

ROUTES = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


@dataclass(frozen=True)
class OpenAIRoute:
    """Which API of the server is judged and how."""

    route: str = "completions"  # completions | chat
    stream: bool = True


@dataclass
class Completion:
    """One answer: its text, and when each streamed piece arrived (seconds after sending)."""

    text: str
    seconds: float
    pieces: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    #: the server's own count (``usage.completion_tokens``) where it gives one (> 0)
    tokens: int | None = None

    @property
    def ttft_ms(self) -> float | None:
        return self.pieces[0] * 1000 if self.pieces else None


def _events(response: http.client.HTTPResponse) -> Iterator[dict[str, Any]]:
    """The JSON payloads of a server-sent event stream, up to ``data: [DONE]``."""
    for raw in response:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        yield json.loads(data)


def _piece(event: dict[str, Any], chat: bool) -> tuple[str, str | None]:
    choices = event.get("choices") or [{}]
    choice = choices[0]
    if "error" in event:
        raise ServingError(f"the server's stream reported an error: {event['error']}")
    text = ((choice.get("delta") or {}).get("content") if chat else choice.get("text")) or ""
    return str(text), choice.get("finish_reason")


class OpenAIClient:
    """One connection to an OpenAI-compatible server; not shared between threads."""

    def __init__(self, endpoint: Endpoint, route: OpenAIRoute) -> None:
        self.endpoint, self.route = endpoint, route
        self.model = endpoint.graphs[0].name
        self._conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=endpoint.timeout_s)

    def close(self) -> None:
        self._conn.close()

    def complete(self, prompt: str, max_tokens: int) -> Completion:
        """One greedy completion of ``prompt``; a refusal or a broken stream is a ServingError."""
        chat = self.route.route == "chat"
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "temperature": 0.0, "top_p": 1.0,
                                "stream": self.route.stream}
        body.update({"messages": [{"role": "user", "content": prompt}]} if chat else {"prompt": prompt})
        path = ROUTES[self.route.route]
        where = f"{self.endpoint.url}{path} {self.model}"
        began = time.perf_counter()
        try:
            self._conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            response = self._conn.getresponse()
            if response.status != 200:
                detail = response.read().decode(errors="replace").strip()
                raise ServingError(f"{where}: request failed [{response.status}]: "
                                   f"{_message(detail) or response.reason}", str(response.status))
            if not self.route.stream:
                answer = json.loads(response.read())
                text, finish = _piece({"choices": [{**c, "delta": c.get("message")} for c in answer["choices"]]}
                                      if chat else answer, chat)
                return Completion(text, time.perf_counter() - began, finish_reason=finish, tokens=_usage(answer))
            parts: list[str] = []
            times: list[float] = []
            finish = None
            counted = None
            for event in _events(response):
                text, reason = _piece(event, chat)
                finish = reason or finish
                counted = _usage(event) or counted
                if text:
                    parts.append(text)
                    times.append(time.perf_counter() - began)
            seconds = time.perf_counter() - began
            response.read()  # the rest of the body after [DONE]: the connection serves the next request
            return Completion("".join(parts), seconds, times, finish, counted)
        except ServingError:
            self._reconnect()
            raise
        except (OSError, ValueError, KeyError, IndexError, http.client.HTTPException) as exc:
            self._reconnect()
            raise ServingError(f"{where}: request failed: {type(exc).__name__}: {str(exc)[:200]}") from None

    def _reconnect(self) -> None:
        self._conn.close()
        self._conn = http.client.HTTPConnection(self.endpoint.host, self.endpoint.port, timeout=self.endpoint.timeout_s)


def _usage(body: dict[str, Any]) -> int | None:
    usage = body.get("usage") or {}
    count = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return int(count) if isinstance(count, int) and count > 0 else None


def _message(detail: str) -> str:
    """The server's own words from an error body (OpenAI's ``{"error": {"message": ...}}``, FastAPI's
    ``{"detail": ...}``), on one line."""
    try:
        body = json.loads(detail)
    except ValueError:
        return detail.splitlines()[0][:240] if detail else ""
    error = body.get("error") if isinstance(body, dict) else None
    text = (error.get("message") if isinstance(error, dict) else error) or (body.get("detail") if isinstance(body, dict)
                                                                           else None) or detail
    return str(text).replace("\n", " ")[:240]


@dataclass
class LoadLevel:
    """One concurrency level of streamed requests."""

    concurrency: int
    ttft_ms: list[float] = field(default_factory=list)
    tpot_ms: list[float] = field(default_factory=list)
    requests: int = 0
    errors: int = 0
    error_examples: list[str] = field(default_factory=list)
    tokens: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, Any]:
        def p50(values: list[float]) -> float | None:
            return float(np.median(values)) if values else None

        return {"concurrency": self.concurrency, "requests": self.requests, "errors": self.errors,
                "error_examples": self.error_examples, "ttft_ms_p50": p50(self.ttft_ms),
                "tpot_ms_p50": p50(self.tpot_ms), "tokens": self.tokens, "seconds": round(self.seconds, 3),
                "tokens_per_s": self.tokens_per_s}


def load_level(endpoint: Endpoint, route: OpenAIRoute, prompts: list[str], max_tokens: int, concurrency: int,
               requests: int, count_tokens: Any) -> LoadLevel:
    """``requests`` completions with ``concurrency`` in flight (prompts in turn); TTFT from the first
    streamed piece, TPOT over the rest of the answer's tokens: the server's ``usage`` count where it
    gives one, else ``count_tokens(text)`` (the reference tokenizer's count of the text, which for
    byte-fallback text can exceed the tokens generated)."""
    level = LoadLevel(concurrency)
    lock = threading.Lock()
    queue = iter(range(requests))

    def work() -> None:
        client = OpenAIClient(endpoint, route)
        try:
            while True:
                with lock:
                    index = next(queue, None)
                if index is None:
                    return
                try:
                    answer = client.complete(prompts[index % len(prompts)], max_tokens)
                except ServingError as exc:
                    with lock:
                        level.errors += 1
                        if str(exc) not in level.error_examples and len(level.error_examples) < 3:
                            level.error_examples.append(str(exc))
                    continue
                tokens = answer.tokens or int(count_tokens(answer.text))
                with lock:
                    level.requests += 1
                    level.tokens += tokens
                    if answer.ttft_ms is not None:
                        level.ttft_ms.append(answer.ttft_ms)
                        if tokens > 1:
                            level.tpot_ms.append((answer.seconds * 1000 - answer.ttft_ms) / (tokens - 1))
        finally:
            client.close()

    began = time.perf_counter()
    threads = [threading.Thread(target=work, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    level.seconds = time.perf_counter() - began
    return level
