"""``harness repro BUNDLE``: judge a failing case's repro bundle again, here.

    harness repro reports/run-x/cases/test_logits_parity_bert-tiny-int8-ort_cpu_/repro-model

Needs neither the zoo, the model nor the cache: the bundle carries the ONNX file (or its path
and sha256), the feeds, the reference outputs and the thresholds (docs/repro.md). Bundles of
other kinds (generation, perf, error) are judged by their own module's ``outcome``.
Exit 0 the failure does not reproduce, 1 it reproduces, 2 bad bundle or usage (one line).
"""

from __future__ import annotations

import argparse
import json
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core import UsageError
from harness.core.writable import ensure_writable_file
from harness.report.text import say

if TYPE_CHECKING:  # pragma: no cover
    from harness.repro.bundle import Bundle, ReproResult


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from harness.settings.commands import add_command_options

    p = sub.add_parser("repro", help="re-judge a failing case's repro bundle (no zoo, no cache needed)",
                       description="Load the bundled ONNX artifact with the recorded runtime settings, run the "
                                   "bundled feeds, compare with the bundled reference outputs using the recorded "
                                   "thresholds, and say whether the same checks fail and which versions or "
                                   "environment facts differ from the recorded ones. A generation bundle is "
                                   "decoded again with its graphs and tokenizer and scored against its PyTorch "
                                   "decode; a perf bundle is measured again here the same way -- one timed call, fresh "
                                   "processes (cold start, memory, size) or the decode loop (ttft, tpot); timings "
                                   "are machine-dependent: recorded and now are shown side by side; an error bundle "
                                   "is run (or decoded) again (same error type and normalised message?). "
                                   "Exit 0 does not reproduce, 1 reproduces, 2 bad bundle.")
    p.add_argument("bundle", type=Path, metavar="BUNDLE", help="a repro bundle directory (or its bundle.json)")
    add_command_options(p, "repro")
    p.set_defaults(func=repro)


def _outcome(bundle: Bundle, result: ReproResult) -> dict[str, Any]:
    return {"bundle": str(bundle.directory), "case": bundle.manifest.get("case"), "reproduces": result.reproduces,
            "recorded_failures": [list(f) for f in result.recorded], "failures_now": [list(f) for f in result.now],
            "metrics_now": {o.output: o.metrics for o in result.outputs},
            "artifact": result.artifact_source, "version_differences": result.version_diffs,
            "environment_differences": result.environment_diffs}


def repro(args: argparse.Namespace) -> int:
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads: must be >= 1, got {args.threads}")
    if args.json is not None:
        ensure_writable_file(args.json, "--json")
    from harness.repro import load_bundle, rejudge

    bundle = load_bundle(args.bundle)
    m = bundle.manifest
    if bundle.kind != "numeric":
        return _other_kind(bundle, args)
    result = rejudge(bundle, args.providers, args.threads)  # judged before printing: a bad bundle is one line
    _header(bundle, args)
    say(f"artifact: {result.artifact_source}")
    recorded = {(f["output"], f["metric"]): f for f in m["verdict"]["failures"]}
    for o in result.outputs:
        if o.tolerance is None:
            continue
        for check in o.tolerance.checks:
            value = o.metrics.get(check.metric)
            if value is None:
                continue
            was = recorded.get((o.output, check.metric))
            state = "pass" if check.passes(value) else "FAIL"
            then = f"recorded {was['value']:.6g} FAIL" if was else "recorded pass"
            say(f"  {o.output}.{check.metric} = {value:.6g} {check.symbol} {check.threshold:.10g}: {state} "
                  f"({then})")
    new = sorted(set(result.now) - set(result.recorded))
    if new:
        say("new failures (not in the recording): " + ", ".join(f"{a}.{b}" for a, b in new))
    say("versions differ: " + ("; ".join(result.version_diffs) if result.version_diffs else "none"))
    say("environment differs: " + ("; ".join(result.environment_diffs) if result.environment_diffs else "none"))
    if args.json is not None:
        args.json.write_text(json.dumps(_outcome(bundle, result), indent=2, default=str) + "\n")
    if result.reproduces:
        say(f"REPRODUCES: {len(result.recorded)} recorded failing check(s) fail again")
        return 1
    if not result.recorded:
        say("DOES NOT REPRODUCE: the bundle records no failing check")
        return 0
    gone = sorted(set(result.recorded) - set(result.now))
    say("DOES NOT REPRODUCE: now passing " + ", ".join(f"{a}.{b}" for a, b in gone))
    return 0


def _header(bundle: Any, args: argparse.Namespace) -> None:
    m = bundle.manifest
    say(f"bundle: {bundle.directory}")
    provider = args.providers or m["provider"]
    moved = f" (recorded on {m['provider']})" if provider != m["provider"] else ""
    where = f"graph: {m['graph']}  " if m.get("graph") else ""
    say(f"case: {m.get('case')}  kind: {bundle.kind}  {where}precision: {m['precision']}  provider: {provider}{moved}")


def _other_kind(bundle: Any, args: argparse.Namespace) -> int:
    """Generation, perf and error bundles: each kind's module judges and words its lines."""
    done = import_module(f"harness.repro.{bundle.kind}").outcome(bundle, args.providers, args.threads)
    _header(bundle, args)
    for line in done.lines:
        say(line)
    say("versions differ: " + ("; ".join(done.version_diffs) if done.version_diffs else "none"))
    say("environment differs: " + ("; ".join(done.environment_diffs) if done.environment_diffs else "none"))
    if args.json is not None:
        payload = {"bundle": str(bundle.directory), "case": bundle.manifest.get("case"), "kind": bundle.kind,
                   "reproduces": done.reproduces, **done.data, "version_differences": done.version_diffs,
                   "environment_differences": done.environment_diffs}
        args.json.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    say(done.verdict)
    return 1 if done.reproduces else 0
