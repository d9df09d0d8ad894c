"""``harness check``'s endpoint and load-sweep flags, and what they parse into.

The option table (``harness.settings.options``) generates flags for ``harness run`` and
pytest, which judge what the harness builds; these flags exist only on ``harness check``
(a served model is judged there), so they are declared here, once, beside the records they
fill (``Endpoint``, ``SweepSettings``).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.core import UsageError
from harness.settings.endpoint import PROTOCOLS, Endpoint, parse_endpoint

if TYPE_CHECKING:  # pragma: no cover
    from harness.serving.rate import RateSettings
    from harness.serving.sweep import SweepSettings


def add_endpoint_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("served model (Open Inference Protocol / KServe v2: Triton, KServe, MLServer)")
    g.add_argument("--endpoint", metavar="URL", default=None,
                   help="judge the model a server serves instead of files: http://HOST:PORT or grpc://HOST:PORT")
    g.add_argument("--served-model", action="append", default=[], metavar="[ROLE=]NAME",
                   help="the served model's name; ROLE=NAME (encoder=, decoder=, decoder_with_past=) for a "
                        "seq2seq split served as several models (repeatable)")
    g.add_argument("--protocol", choices=PROTOCOLS, default=None, help="transport when the URL has no scheme "
                                                                       "(default http)")
    g.add_argument("--served-version", default=None, metavar="V", help="the model version (default: the server's)")
    g.add_argument("--request-timeout", type=float, default=None, metavar="S",
                   help="seconds one request may take (default 30); slower is a counted error")
    g.add_argument("--concurrency", type=int, nargs="+", default=None, metavar="N",
                   help="with --perf: the load sweep's concurrency levels (default 1 2 4 8 16)")
    g.add_argument("--sweep-window", type=float, default=None, metavar="S",
                   help="with --perf: seconds per measurement window (default 1)")
    g.add_argument("--step-budget", type=float, default=None, metavar="S",
                   help="with --perf: seconds a level may take before it is recorded as not stable (default 15)")
    g.add_argument("--sweep-budget", type=float, default=None, metavar="S",
                   help="with --perf: seconds the whole sweep may take (default 120)")
    g.add_argument("--request-rate", nargs="+", default=None, metavar="R",
                   help="with --perf: offer these request rates (requests/s, or START:END:STEP as perf_analyzer's "
                        "--request-rate-range) instead of concurrency levels")
    g.add_argument("--arrival", choices=("constant", "poisson"), default=None,
                   help="with --request-rate: fixed intervals or Poisson arrivals (default poisson)")
    g.add_argument("--p99-budget", type=float, default=None, metavar="MS",
                   help="with --request-rate: the p99 latency a rate must meet; the highest that does is the "
                        "sustainable rate, and the sweep stops after the first that does not")
    g.add_argument("--openai-route", choices=("completions", "chat"), default="completions",
                   help="with --endpoint openai://: judge /v1/completions (the raw prompt; default) or "
                        "/v1/chat/completions (one user message; the server's chat template applies)")
    g.add_argument("--no-stream", action="store_true",
                   help="with --endpoint openai://: ask for whole answers (no TTFT / TPOT) instead of streamed ones")
    g.add_argument("--load-host", action="append", default=[], metavar="HOST",
                   help="a non-loopback host the load sweep may target (the configured server's own)")


def endpoint_of(args: argparse.Namespace) -> Endpoint | None:
    """The ``--endpoint`` flags as an Endpoint (None without ``--endpoint``); stray endpoint
    flags without it are refused."""
    if args.endpoint is None:
        if args.served_model or args.served_version or args.protocol:
            raise UsageError("--served-model/--served-version/--protocol: give --endpoint URL too")
        return None
    if not args.served_model:
        raise UsageError("--endpoint: give --served-model NAME (the model's name on the server)")
    return parse_endpoint(args.endpoint, args.served_model, protocol=args.protocol, version=args.served_version,
                          timeout_s=args.request_timeout, load_hosts=tuple(args.load_host), route=args.openai_route,
                          stream=not args.no_stream)


def sweep_of(args: argparse.Namespace) -> SweepSettings:
    """``--perf`` against an endpoint: the sweep's bounds (``--perf-batch-sizes`` / ``--perf-seq-lens``'
    first values size each request)."""
    given: dict[str, object] = {}
    if args.concurrency:
        if any(c < 1 or c > 256 for c in args.concurrency):
            raise UsageError(f"--concurrency: levels must be in 1..256, got {args.concurrency}")
        given["concurrency"] = tuple(args.concurrency)
    for flag, key in (("sweep_window", "window_s"), ("step_budget", "step_budget_s"), ("sweep_budget", "budget_s")):
        value = getattr(args, flag)
        if value is not None:
            if not value > 0:
                raise UsageError(f"--{flag.replace('_', '-')}: must be > 0 seconds, got {value}")
            given[key] = float(value)
    if getattr(args, "perf_batch_sizes", None):
        given["batch_size"] = int(args.perf_batch_sizes[0])
    if getattr(args, "perf_seq_lens", None):
        given["seq_len"] = int(args.perf_seq_lens[0])
    # imported here, not above: the sweep pulls in the client, ONNX and torch, and every `harness`
    # command's parser (an argparse error included) registers these flags
    from harness.serving.sweep import SweepSettings

    if args.request_rate:
        given["rate"] = rate_of(args, given)
    elif args.arrival or args.p99_budget is not None:
        raise UsageError("--arrival/--p99-budget: give --request-rate too")
    return SweepSettings(**given)  # type: ignore[arg-type]


def request_rates(values: list[str]) -> tuple[float, ...]:
    """``--request-rate``: rates, or ``START:END:STEP`` ranges (END included), each > 0."""
    rates: list[float] = []
    for text in values:
        try:
            parts = [float(x) for x in text.split(":")]
        except ValueError:
            raise UsageError(f"--request-rate: {text!r} is not a rate or START:END:STEP") from None
        if len(parts) == 1:
            rates.append(parts[0])
        elif len(parts) == 3 and parts[2] > 0 and parts[1] >= parts[0]:
            count = int(round((parts[1] - parts[0]) / parts[2])) + 1
            rates += [parts[0] + i * parts[2] for i in range(count) if parts[0] + i * parts[2] <= parts[1] + 1e-9]
        else:
            raise UsageError(f"--request-rate: {text!r}: a range is START:END:STEP with END >= START and STEP > 0")
    if any(not r > 0 for r in rates) or len(rates) > 64:
        raise UsageError(f"--request-rate: rates must be > 0 requests/s, at most 64 levels; got {values}")
    return tuple(rates)


def rate_of(args: argparse.Namespace, given: dict[str, object]) -> RateSettings:
    """The request-rate sweep's settings: the rates, the arrival process, the p99 budget, and the
    window / budgets / request size the concurrency sweep would use."""
    from harness.serving.rate import RateSettings

    if args.concurrency:
        raise UsageError("--request-rate and --concurrency: give one (open-loop rates or closed-loop levels)")
    if args.p99_budget is not None and not args.p99_budget > 0:
        raise UsageError(f"--p99-budget: must be > 0 ms, got {args.p99_budget}")
    keys = {"window_s", "step_budget_s", "budget_s", "batch_size", "seq_len"}
    return RateSettings(rates=request_rates(args.request_rate), arrival=args.arrival or "poisson",
                        p99_budget_ms=args.p99_budget, **{k: v for k, v in given.items() if k in keys})  # type: ignore[arg-type]
