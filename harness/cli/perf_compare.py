"""``harness perf-compare``: paired, interleaved A/B timing of two ONNX builds in one session.

    harness perf-compare baseline.onnx candidate.onnx --pairs 30 --block 50
    harness perf-compare old/model.onnx new/model.onnx --providers ort_cpu --threads 1 --json ab.json
    harness perf-compare model.onnx --env-a /venv-ort132/bin/python --env-b /venv-ort133/bin/python

With ``--env-a``/``--env-b`` (an interpreter command each; default this one) the comparison is of
two *environments* -- an ONNX Runtime upgrade -- on the same file (or on two): one timing child
per environment (``harness.gate.envpair``), asked for blocks in turn.

Both files are opened on the same provider through its backend (ONNX Runtime, OpenVINO: any that
runs ONNX files; timed as the perf suite times it, the runner's ``timed_call``), fed the same inputs (``--batch-size`` x
``--seq-len``: integer inputs get token ids, ``*mask*`` inputs ones, float inputs N(0, 1)),
and timed in alternating blocks (``harness.gate.paired``). Exit 0 no gated regression, 1 a
gated REGRESSION (p50/p90 by default), 2 bad usage. Use it when a recorded baseline cannot
be trusted -- a shared CI runner, a noisy night -- or to compare two builds before either
is blessed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np

from harness.core import UsageError
from harness.core.writable import ensure_writable_file
from harness.gate.compare import parse_threshold
from harness.gate.envpair import environment_command, interleave_envs
from harness.gate.onnxpair import FileRuntime, same_inputs, synthetic_feeds
from harness.gate.paired import exit_code, interleave, judge_paired
from harness.gate.row import fmt_p
from harness.settings.commands import add_command_options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("perf-compare", help="paired interleaved A/B timing of two ONNX files (exit 1 on a regression)",
                       description=__doc__.splitlines()[0])
    p.add_argument("baseline", type=Path, help="the baseline ONNX file (A)")
    p.add_argument("candidate", type=Path, nargs="?", default=None,
                   help="the candidate ONNX file (B); default: the baseline file (with --env-b)")
    add_command_options(p, "perf-compare")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.json:
        ensure_writable_file(args.json, "--json")
    stats = [s.strip() for s in args.stats.split(",") if s.strip()]
    policies = {p.name: p for p in (parse_threshold(t) for t in args.baseline_threshold)}
    envs = args.env_a is not None or args.env_b is not None
    if args.candidate is None and not envs:
        raise UsageError("perf-compare: give a candidate ONNX file, or --env-b to time the same file in another "
                         "environment")
    candidate = args.candidate if args.candidate is not None else args.baseline
    runtime = FileRuntime.named(args.providers, precision=args.precisions, threads=args.threads)
    for path in (args.baseline, candidate):
        if not path.is_file():
            raise UsageError(f"{path}: no such ONNX file")
    try:
        feeds = synthetic_feeds(args.baseline, args.batch_size, args.seq_len, args.seed)
    except UsageError as exc:
        raise UsageError(f"perf-compare: {exc}") from None
    same_inputs(args.baseline, candidate, feeds, "perf-compare")
    env_info: dict[str, Any] = {}
    if envs:
        command_a = environment_command(args.env_a, "--env-a") if args.env_a else [sys.executable]
        command_b = environment_command(args.env_b, "--env-b") if args.env_b else [sys.executable]
        samples, env_info = interleave_envs(command_a, command_b, args.baseline, candidate, feeds, runtime=runtime,
                                            pairs=args.pairs, block=args.block, warmup=args.warmup, seed=args.seed)
        for side, command in (("A", command_a), ("B", command_b)):
            versions = ", ".join(f"{k} {v}" for k, v in (env_info[side].get("versions") or {}).items())
            print(f"environment {side}: {shlex.join(command)} ({versions}, python {env_info[side].get('python')})")
    else:
        with runtime.open(args.baseline) as a, runtime.open(candidate) as b:
            samples = interleave(a.timed_call(feeds), b.timed_call(feeds), pairs=args.pairs, block=args.block,
                                 warmup=args.warmup, seed=args.seed)
    try:
        rows = judge_paired(samples, stats, policies, seed=args.seed)
    except ValueError as exc:
        raise UsageError(f"--stats: {exc}") from None
    process_pairs = len(set(samples.groups))
    mode = (f"environments, two processes alternating in blocks, {process_pairs} fresh process pairs" if envs
            else "one process, sessions alternating")
    print(f"paired A/B ({mode}): {args.pairs} pairs x {args.block} calls per side, provider {args.providers}, "
          f"inputs batch {args.batch_size} x seq {args.seq_len}")
    print(f"{'stat':<6} {'A ms':>9} {'B ms':>9} {'B/A':>7} {'interval':>17} {'p':>9}  verdict")
    for r in rows:
        interval = f"[{r.ci_lo:.3f}, {r.ci_hi:.3f}]" if r.ci_lo is not None and r.ci_hi is not None and \
            np.isfinite(r.ci_lo) else "–"
        tag = " (advisory)" if r.advisory else ""
        print(f"{r.stat:<6} {r.base:>9.4f} {r.cand:>9.4f} {r.ratio:>7.3f} {interval:>17} {fmt_p(r.p_value):>9}  "
              f"{r.verdict.value}{tag}: {r.reason}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "baseline": str(args.baseline), "candidate": str(candidate), "provider": args.providers,
            "mode": "environments" if envs else "files", "environments": env_info,
            "pairs": args.pairs, "block": args.block, "process_pairs": process_pairs or None,
            "groups": list(samples.groups), "rows": [r.as_dict() for r in rows],
            "first": list(samples.first), "samples_ms": {"A": samples.a.tolist(), "B": samples.b.tolist()},
        }, indent=1) + "\n", encoding="utf-8")
    return exit_code(rows)
