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
                          timeout_s=args.request_timeout, load_hosts=tuple(args.load_host))


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

    return SweepSettings(**given)  # type: ignore[arg-type]
