"""``harness check --endpoint openai://HOST:PORT``: a served generative model judged against
PyTorch's greedy decoding (``check_generation``) and, with ``--perf``, its TTFT / TPOT /
tokens per second per concurrency level (``check_perf``). The protocol is
``harness.serving.openai``; the decoding plan, the reference decode, the scoring and the gates
are the generation suite's own (``harness.judge.generation``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.case.collector import Case
from harness.check.judge import CheckOutcome
from harness.check.layout import ArtifactFile
from harness.check.request import CheckRequest, resolve
from harness.core import UsageError, describe_error
from harness.engine.job import compose_case
from harness.generation.decode import Decoded
from harness.judge.generation import GenerationRequest, decode_plan, judged_generation, reference_decode
from harness.judge.generation import record as record_generation
from harness.judge.workspace import Workspace
from harness.perf import budgets
from harness.perf.measure import latency_entry, latency_key
from harness.results import new_run_id
from harness.results.outcome import Decision, decide
from harness.results.sections import Served
from harness.serving.client import EndpointRefused, ServingError
from harness.serving.openai import Completion, LoadLevel, OpenAIClient, OpenAIRoute, load_level
from harness.settings.endpoint import Endpoint


def _served_artifact(endpoint: Endpoint, precision: str | None) -> ArtifactFile:
    """The served model as the check's request resolver sees a file: no tensors, a precision."""
    return ArtifactFile(path=Path(endpoint.graphs[0].name), role="model", inputs=(), outputs=(), opsets={},
                        producer="openai", precision=precision or "fp32",
                        precision_reason="given" if precision else "an OpenAI API says nothing of it: fp32 assumed",
                        sha256="", bytes=0)


def preflight(endpoint: Endpoint, route: OpenAIRoute) -> None:
    """One tiny completion before any model loads: unreachable, unknown model or a refused
    request is one line (exit 2) with the server's message."""
    client = OpenAIClient(endpoint, route)
    try:
        client.complete("ping", 1)
    except ServingError as exc:
        raise EndpointRefused(f"{endpoint.url}: {exc}") from None
    finally:
        client.close()


def run_openai_check(req: CheckRequest, run_dir: Path, run_id: str | None = None) -> CheckOutcome:
    began = time.perf_counter()
    run_id = run_id or new_run_id()
    endpoint: Endpoint = req.endpoint
    route = OpenAIRoute(endpoint.route, endpoint.stream)
    setup = resolve(req, [_served_artifact(endpoint, req.precision)])
    if not setup.spec.generates:
        raise UsageError(f"--endpoint {endpoint.url}: the reference {setup.spec.name!r} does not generate text; "
                         "an OpenAI-compatible server is judged by its generations")
    preflight(endpoint, route)
    ws = Workspace(setup.options)
    spec, variant = setup.spec, setup.variant
    model = ws.model(spec.name)
    outcome = CheckOutcome(spec, variant, setup.precision_note, setup.artifacts, [])
    served = {"model": {"name": endpoint.graphs[0].name, "server": "openai-compatible", "api": route.route,
                        "path": endpoint.url, "stream": route.stream}}
    settings: dict[str, Any] = {"corpus": spec.corpus, "endpoint": endpoint.describe(), "gen_samples": req.gen_samples}
    case = Case(ws, variant, run_dir, f"check_generation[{variant.id}]")
    Served(served).write(case.data)
    started = time.perf_counter()
    request = GenerationRequest(samples=req.gen_samples, num_beams=1)  # the API decodes greedily (temperature 0)
    wanted, gen, indices, texts = decode_plan(ws, model, request)
    try:
        reference = reference_decode(ws, model, indices, texts, gen, int(wanted["batch_size"]))
        ref_seconds = time.perf_counter() - started
        answers = _complete_all(endpoint, route, texts, gen.max_new_tokens)
    except ServingError as exc:
        outcome.results.append(compose_case(case, "check_generation", Decision("error", describe_error(exc, 300)), started,
                                            settings, run_id))
        return outcome
    retokenised = _retokenised(model.tokenizer)
    got = Decoded([retokenised(a.text) for a in answers], [a.text for a in answers], sum(a.seconds for a in answers),
                  len(answers))
    ref = Decoded([retokenised(t) for t in reference.texts], list(reference.texts), reference.seconds, reference.calls)
    result = judged_generation(ws, variant, model, ws.corpora.corpus(model), indices, texts, gen, wanted, ref, got, ref_seconds)
    result.settings.update(tokens="both sides' text tokenised again with the reference tokenizer (the API returns text)")
    ttft = [a.ttft_ms for a in answers if a.ttft_ms is not None]
    if ttft:
        result.settings.update(ttft_ms_p50=sorted(ttft)[len(ttft) // 2])
    outcome.generation = result
    record_generation(case, result)
    outcome.results.append(compose_case(case, "check_generation", decide(result.assert_ok), started, settings,
                                   run_id))
    if req.perf is not None:
        _judge_load(ws, outcome, endpoint, route, texts, gen.max_new_tokens, req, served, settings, run_dir, run_id,
                    retokenised)
    outcome.notes.append(f"served over {endpoint.url}{'/v1/chat/completions' if route.route == 'chat' else '/v1/completions'}"
                         f" in {time.perf_counter() - began:.1f} s")
    return outcome


def _retokenised(tokenizer: Any) -> Any:
    def ids(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    return ids


def _complete_all(endpoint: Endpoint, route: OpenAIRoute, prompts: list[str], max_tokens: int) -> list[Completion]:
    client = OpenAIClient(endpoint, route)
    try:
        return [client.complete(p, max_tokens) for p in prompts]
    finally:
        client.close()


def _judge_load(ws: Workspace, outcome: CheckOutcome, endpoint: Endpoint, route: OpenAIRoute, prompts: list[str],
                max_tokens: int, req: CheckRequest, served: dict[str, Any], settings: dict[str, Any], run_dir: Path,
                run_id: str, count: Any) -> None:
    """``check_perf``: TTFT, TPOT and tokens/s per concurrency level (``--concurrency``)."""
    case = Case(ws, outcome.variant, run_dir, f"check_perf[{outcome.variant.id}]")
    Served(served).write(case.data)
    started = time.perf_counter()
    levels: list[LoadLevel] = []
    try:
        for concurrency in req.perf.concurrency:
            levels.append(load_level(endpoint, route, prompts, max_tokens, concurrency, max(4, 2 * concurrency),
                                     lambda text: len(count(text))))
    except Exception as exc:  # noqa: BLE001 - a client-side failure of the load itself: the case's error
        outcome.results.append(compose_case(case, "check_perf", Decision("error", describe_error(exc, 300)), started, settings,
                                       run_id))
        return
    perf: dict[str, Any] = {}
    for level in levels:
        for gen, samples in (("ttft", level.ttft_ms), ("tpot", level.tpot_ms)):
            if samples:
                perf[latency_key(gen=gen, concurrency=level.concurrency)] = latency_entry(
                    samples, warmup=0, engine=f"openai-{route.route}", concurrency=level.concurrency)
    perf["generation_serving"] = {"api": route.route, "stream": route.stream, "max_tokens": max_tokens,
                                  "levels": [lv.summary() for lv in levels],
                                  "tokens_per_s_max": max((lv.tokens_per_s for lv in levels), default=0.0)}
    case.perf.update(perf)
    outcome.perf = perf
    failed = [e for lv in levels for e in lv.error_examples[:1]]
    if not any(lv.requests for lv in levels):
        verdict = Decision("error", "no request of the load succeeded: " + "; ".join(failed))
    elif not route.stream:
        verdict = Decision("pass", "not streamed: TTFT and TPOT are not measured, tokens/s is")
    else:
        verdict = decide(lambda: budgets.enforce(case, case.perf))
    outcome.results.append(compose_case(case, "check_perf", verdict, started, settings, run_id))
