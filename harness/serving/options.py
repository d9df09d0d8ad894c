"""What ``harness check``'s endpoint and load-sweep flags parse into (``Endpoint``, ``SweepSettings``).

The flags themselves are rows of the option table (``harness.settings.commands``), as every
command's are; this module turns their values into the records the served-model check reads.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.core import UsageError
from harness.settings.commands import value_of
from harness.settings.endpoint import Endpoint, parse_endpoint

if TYPE_CHECKING:  # pragma: no cover
    from harness.serving.rate import RateSettings
    from harness.serving.sweep import SweepSettings


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
    levels = value_of(args, "concurrency")
    if levels:
        if any(c > 256 for c in levels):
            raise UsageError(f"--concurrency: levels must be in 1..256, got {levels}")
        given["concurrency"] = tuple(levels)
    for flag, key in (("sweep_window", "window_s"), ("step_budget", "step_budget_s"), ("sweep_budget", "budget_s")):
        value = getattr(args, flag)
        if value is not None:  # > 0: the table's bound, checked when the command line was parsed
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
