#!/usr/bin/env python
"""Measure the performance gate's false-alarm and detection rates on this machine.

A gate's thresholds are only as good as the noise they were chosen against, so this
script runs a real ONNX Runtime workload and asks the gate two questions many times:

* A/A: two independent sample sets of the *same* workload. Any REGRESSION is a false alarm.
* A/B: the candidate busy-waits an extra ``--slowdown`` x (median call time) per call,
  a real CPU cost like a slower kernel. Every trial should be a REGRESSION.

Each question is asked of three comparison modes, with the baseline deliberately recorded
under load (``--burners`` busy-loop processes this script starts and stops itself):

* ``single``: one baseline run recorded under load, candidate recorded quiet, judged by
  ``compare_runs`` (what ``harness baseline compare`` does);
* ``multirun``: a baseline aggregating ``--runs`` runs (the first under load, the others
  quiet: the last N nightly runs, one of them noisy) by ``gate.multirun.aggregate_runs``;
* ``paired``: baseline and candidate timed in alternating blocks in one session
  (``gate.paired``, what ``harness perf-compare`` does), with the burner running for the
  first half of the pairs: the load hits both sides.
* ``neighbour``: the other way round, the case measured on this VM: a quiet single-run baseline and a
  candidate recorded *with* the busy neighbour, each run timing the canary
  (``harness.perf.canary``) right before and after its samples, as ``test_latency`` does, so the
  gate can see the drift (``harness.gate.canary``). An A/A trial must never be REGRESSION or
  IMPROVEMENT.
* ``envpair``: two environments (``harness perf-compare --env-a/--env-b``): environment B is a
  venv whose ``sitecustomize`` slows ``onnxruntime.InferenceSession.run`` by ``--slowdown`` of the
  median call (busy-wait) for A/B trials, or a plain twin for A/A; children of both alternate in
  blocks (``harness.gate.envpair``), the burner on for the first half of the pairs.

* ``retime``: ``harness baseline compare --perf`` (``harness.gate.retime.pair``): a single-run
  baseline recorded under load (as ``single``) whose records list the blessed ONNX file, a
  candidate recorded quiet; the blessed file and the candidate's are re-timed interleaved by the
  real code path (20 pairs x 50 calls per side by default), the burner on for about the first half
  of the re-timing. The A/B candidate is a *real* slower artifact, not a busy-wait: the same MLP
  with an extra 512->128->512 bottleneck (its measured slowdown is printed). Its A/A and A/B
  trials gate on the paired rows and on the recorded rows reported beside them (canaries on both
  recordings), as the command does.
* ``envslow``: the same command, the A/B candidate the *same* artifact recorded and judged in a
  runtime environment ``--slowdown`` slower (``InferenceSession.run`` busy-waits after every call,
  as a ``sitecustomize`` would make it: invisible to the environment fingerprint); the baseline
  recorded quiet. Re-timing both artifacts in that environment cannot see it; the recorded rows
  beside them must.

Trials of all modes and kinds run in one shuffled order so slow drift hits all alike.

    python scripts/bench_gate_power.py --trials 10 --samples 1000 --seed 0

``HARNESS_BENCH_SMOKE=1``: one A/A and one A/B trial per mode, 100 calls per side (as few as the
unpaired gate judges at p90), the fewest pairs the paired judge accepts, one process pair per half
of an envpair trial (its verdict: too few process pairs; the 8 the judge needs would start 32
timing children), no busy neighbour (each burner starts no process: a smoke run spins no core of
a shared machine for nothing); ``harness.perf.smoke``; the targets are printed, not the exit status.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

try:
    import harness  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.gate.compare import DEFAULT_POLICIES, Comparison, compare_runs  # noqa: E402
from harness.gate.envpair import PROCESS_PAIRS  # noqa: E402
from harness.gate.paired import MIN_PAIRS  # noqa: E402
from harness.perf import smoke  # noqa: E402

VARIANT = "bench-mlp-fp32-ort_cpu"
GATED = [name for name, p in DEFAULT_POLICIES.items() if p.kind == "latency" and not p.advisory]


def build_session(workdir: Path, seed: int, threads: int) -> tuple[Callable[[], Any], int]:
    """Export a small MLP with the TorchScript exporter and open it on the ORT CPU provider."""
    import onnxruntime as ort
    import torch

    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 64)
    ).eval()
    example = torch.randn(16, 256)
    path = workdir / "mlp.onnx"
    torch.onnx.export(model, (example,), str(path), input_names=["x"], output_names=["y"], dynamo=False, opset_version=17)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    feed = {"x": example.numpy()}
    np.save(workdir / "feed_x.npy", feed["x"])  # what the environment-paired children are fed
    return (lambda: session.run(None, feed)), path.stat().st_size


def collect(call: Callable[[], Any], n: int, extra_ns: int = 0) -> list[float]:
    """``n`` per-call latencies in ms by the harness's timing loop (what ``test_latency`` records
    with); ``extra_ns`` > 0 adds a busy-wait (CPU work, not sleep) inside each timed call."""
    from harness.perf.loop import time_calls

    return time_calls(slowed(call, extra_ns) if extra_ns else call, n)


def record(samples: list[float], size: int, canary: dict[str, Any] | None = None,
           segments: dict[str, Any] | None = None) -> dict[str, Any]:
    """One results.jsonl-shaped record, so the benchmark exercises the real reader; ``segments``: the
    canary interleaved with the samples (``harness.perf.canary.Interleaved``), as ``test_latency`` keeps it."""
    perf: dict[str, Any] = {"latency_ms": {"samples": samples, "warmup": 0}, "artifact_bytes": size}
    if segments is not None:
        perf["latency_ms"]["canary"] = segments
    if canary is not None:
        perf["canary_ms"] = canary
    return {
        "id": f"test_latency[{VARIANT}]",
        "variant": VARIANT,
        "suite": "perf",
        "verdict": "pass",
        "env": {"fingerprint": "bench", "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "perf": perf,
    }


def _spin(stop: Any) -> None:
    while not stop.is_set():
        pass


class Burner:
    """``n`` busy-looping processes while active: the noisy neighbour, started and stopped here."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.stop: Any = None
        self.procs: list[Any] = []

    def __enter__(self) -> "Burner":
        self.stop = mp.Event()
        self.procs = [mp.Process(target=_spin, args=(self.stop,), daemon=True) for _ in range(self.n)]
        for proc in self.procs:
            proc.start()
        time.sleep(0.2)  # let the scheduler see them
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for proc in self.procs:
            proc.join(timeout=5)


def slowed(call: Callable[[], Any], extra_ns: int) -> Callable[[], Any]:
    """``call`` plus a busy-wait of ``extra_ns`` (CPU work, like a slower kernel)."""
    clock = time.perf_counter_ns

    def run() -> Any:
        out = call()
        until = clock() + extra_ns
        while clock() < until:
            pass
        return out

    return run


def trial_unpaired(call: Callable[[], Any], cand: Callable[[], Any], args: argparse.Namespace, size: int,
                   runs: int) -> tuple[int, dict[str, Any]]:
    """Baseline recorded under load (the first of ``runs`` runs; the others quiet), candidate quiet."""
    base_runs = []
    for i in range(runs):
        if i == 0:
            with Burner(args.burners):
                base_runs.append(collect(call, args.samples))
        else:
            base_runs.append(collect(call, args.samples))
    cand_samples = collect(cand, args.samples)
    base_records = [record(s, size) for s in base_runs]
    if runs > 1:
        from harness.gate.multirun import aggregate_runs
        from harness.results import Record

        baseline: list[Any] = aggregate_runs([[Record.from_dict(r)] for r in base_records])
    else:
        baseline = list(base_records)
    result = compare_runs(baseline, [record(cand_samples, size)])
    return result.exit_code, summarise_trial("", result)


def with_canary(call: Callable[[], Any], n: int) -> tuple[list[float], dict[str, Any], dict[str, Any] | None]:
    """``n`` samples as ``test_latency`` times them: a canary block right before and right after, and
    a short canary block before every segment of the calls (``harness.perf.canary.Interleaved``)."""
    from harness.perf.canary import Canary, Interleaved
    from harness.perf.loop import time_calls

    canary = Canary()
    canary.block()
    interleaved = Interleaved(canary)
    samples = interleaved.rounds(lambda k, warmup: time_calls(call, k, warmup))(n, 0)
    canary.block()
    return samples, canary.entry(), interleaved.entry(samples)


def trial_neighbour(call: Callable[[], Any], cand: Callable[[], Any], args: argparse.Namespace,
                    size: int) -> tuple[int, dict[str, Any]]:
    """Quiet single-run baseline; the candidate recorded beside a busy neighbour; canaries on both."""
    base = with_canary(call, args.samples)
    with Burner(args.burners):
        candidate = with_canary(cand, args.samples)
    result = compare_runs([record(base[0], size, *base[1:])], [record(candidate[0], size, *candidate[1:])])
    info = summarise_trial("", result)
    info["canary"] = next(iter(result.drift.values()), {})
    return result.exit_code, info


def trial_paired(call: Callable[[], Any], cand: Callable[[], Any], args: argparse.Namespace,
                 seed: int) -> tuple[int, dict[str, Any]]:
    """Both builds timed in alternating blocks; the burner runs for the first half of the pairs."""
    from harness.gate.paired import PairedSamples, exit_code, interleave, judge_paired

    block = max(args.samples // args.pairs, 10)
    half = args.pairs // 2
    with Burner(args.burners):
        first = interleave(call, cand, pairs=half, block=block, warmup=0, seed=seed)
    second = interleave(call, cand, pairs=args.pairs - half, block=block, warmup=0, seed=seed + 1)
    samples = PairedSamples(np.vstack([first.a, second.a]), np.vstack([first.b, second.b]), first.first + second.first)
    rows = judge_paired(samples, ("p50", "p90"), seed=seed)
    return exit_code(rows), {"verdicts": {r.stat: r.verdict.value for r in rows},
                             "ratios": {r.stat: r.ratio for r in rows},
                             "reasons": {r.stat: r.reason for r in rows}}


SLOW_SITECUSTOMIZE = """
import os, time
import onnxruntime as _ort
_extra = int(os.environ.get("HARNESS_BENCH_EXTRA_NS", "0"))
_run = _ort.InferenceSession.run
def _slow_run(self, *a, **k):
    out = _run(self, *a, **k)
    until = time.perf_counter_ns() + _extra
    while time.perf_counter_ns() < until:
        pass
    return out
_ort.InferenceSession.run = _slow_run
"""


def slowed_site(workdir: Path) -> Path:
    """The directory whose ``sitecustomize`` slows a Python put on ``PYTHONPATH`` before it (by
    ``HARNESS_BENCH_EXTRA_NS`` after every ``InferenceSession.run``)."""
    slow = workdir / "env-slow"
    slow.mkdir(exist_ok=True)
    (slow / "sitecustomize.py").write_text(SLOW_SITECUSTOMIZE, encoding="utf-8")
    return slow


def environments(workdir: Path, extra_ns: int) -> tuple[list[str], list[str], list[str]]:
    """Interpreter commands: A (this one), B slowed (a ``sitecustomize`` that busy-waits after every
    ``InferenceSession.run``), B plain (the same layout without it: the A/A twin)."""
    slow, plain = slowed_site(workdir), workdir / "env-plain"
    plain.mkdir(exist_ok=True)
    path = os.environ.get("PYTHONPATH", "")
    def env(d: Path) -> list[str]:
        return ["env", f"PYTHONPATH={d}{os.pathsep + path if path else ''}", f"HARNESS_BENCH_EXTRA_NS={extra_ns}",
                sys.executable]
    return [sys.executable], env(slow), env(plain)


def trial_envpair(workdir: Path, kind: str, args: argparse.Namespace, seed: int,
                  extra_ns: int) -> tuple[int, dict[str, Any]]:
    """The same file timed by two environments' children in alternating blocks (``gate.envpair``);
    B is slowed for A/B trials; the burner runs for the first half of the pairs."""
    from harness.gate.envpair import interleave_envs
    from harness.gate.onnxpair import FileRuntime
    from harness.gate.paired import exit_code, judge_paired

    env_a, slow, plain = environments(workdir, extra_ns)
    env_b = slow if kind == "A/B" else plain
    feeds = {"x": np.load(workdir / "feed_x.npy")}
    block = max(args.samples // args.pairs, 10)
    half = args.pairs // 2
    model = workdir / "mlp.onnx"
    runtime = FileRuntime.named("ort_cpu", threads=args.threads)
    with Burner(args.burners):
        first, _ = interleave_envs(env_a, env_b, model, model, feeds, runtime=runtime, pairs=half,
                                   block=block, warmup=50, seed=seed, processes=args.process_pairs)
    second, info = interleave_envs(env_a, env_b, model, model, feeds, runtime=runtime,
                                   pairs=args.pairs - half, block=block, warmup=50, seed=seed + 1,
                                   processes=args.process_pairs)
    samples = first + second  # the process pairs of both halves, numbered apart
    rows = judge_paired(samples, ("p50", "p90"), seed=seed)
    return exit_code(rows), {"verdicts": {r.stat: r.verdict.value for r in rows},
                             "ratios": {r.stat: r.ratio for r in rows},
                             "reasons": {r.stat: r.reason for r in rows}}


def slow_artifact(workdir: Path, seed: int) -> Path:
    """The A/B artifact of the ``retime`` mode: the MLP with an extra bottleneck (a real extra cost)."""
    import torch

    torch.manual_seed(seed + 1)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512), torch.nn.GELU(),
        torch.nn.Linear(512, 128), torch.nn.Linear(128, 512), torch.nn.Linear(512, 64)
    ).eval()
    path = workdir / "mlp-slow.onnx"
    torch.onnx.export(model, (torch.randn(16, 256),), str(path), input_names=["x"], output_names=["y"], dynamo=False,
                      opset_version=17)
    return path


def fresh_processes(workdir: Path, artifact: Path, args: argparse.Namespace, slowed_ns: int = 0) -> list[dict[str, Any]]:
    """What ``test_cold_start_memory`` adds to a real run's records: ``--processes`` fresh children of
    the harness's own measurement script (``harness/perf/child.py``), each loading ``artifact``
    and timing ``--child-calls`` steady calls after its first, then its level's calls between canary
    blocks (``level_ms``, up to the child's time budget), one after the other; ``slowed_ns`` > 0
    runs them in the slowed runtime environment (the ``sitecustomize`` of :data:`SLOW_SITECUSTOMIZE`).
    The gate reads their levels as the runs' between-process spread (``harness.gate.processes``)."""
    from harness.perf.coldstart import child_env, spawn, write_feeds

    feeds = write_feeds(workdir / "child-feeds.npz", {"model": {"x": np.load(workdir / "feed_x.npy")}})
    spec = {"graphs": {"model": str(artifact)}, "device": "CPUExecutionProvider", "intra_op_threads": args.threads,
            "inter_op_threads": 1}
    child = ["--loader", "harness.runners.ort_runner:OrtBackend", "--spec", json.dumps(spec), "--feeds", str(feeds),
             "--calls", str(args.child_calls)]
    env: dict[str, str] = {}
    if slowed_ns:
        env = {"PYTHONPATH": os.pathsep.join([str(slowed_site(workdir)), child_env()["PYTHONPATH"]]),
               "HARNESS_BENCH_EXTRA_NS": str(slowed_ns)}
    return [{k: run[k] for k in ("steady_ms", "level_ms", "canary") if k in run}
            for run in (spawn(child, env=env) for _ in range(args.processes))]


def retime_record(timed: tuple[list[float], dict[str, Any], dict[str, Any] | None], artifact: Path,
                  threads: int, processes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A latency record as ``test_latency`` writes it: samples, the canaries, the timed graph and its
    file; with ``processes``, the fresh processes' steady calls a real run's cold-start case adds."""
    from harness.core.cachedir import file_sha256

    rec = record(timed[0], artifact.stat().st_size, *timed[1:])
    if processes:
        rec["perf"]["cold_start_runs"] = processes
    rec["perf"]["latency_ms"].update({"graph": "model", "batch_size": 16, "seq_len": None})
    rec["perf"]["settings"] = {"threads": {"ort_intra_op_threads": threads}}
    rec.update({"backend": "onnxruntime", "provider": "ort_cpu", "artifacts": {"model/model.onnx": {
        "path": str(artifact), "sha256": file_sha256(artifact), "bytes": artifact.stat().st_size}}})
    return rec


@contextmanager
def slower_runtime(extra_ns: int) -> Iterator[None]:
    """``onnxruntime.InferenceSession.run`` busy-waits ``extra_ns`` after every call while active:
    what a ``sitecustomize`` (or a slower runtime build, a thread setting) does to a whole
    environment, invisible to its fingerprint; every session of this process is slowed alike."""
    import onnxruntime as ort

    run = ort.InferenceSession.run
    clock = time.perf_counter_ns

    def slow_run(self: Any, *a: Any, **k: Any) -> Any:
        out = run(self, *a, **k)
        until = clock() + extra_ns
        while clock() < until:
            pass
        return out

    ort.InferenceSession.run = slow_run  # type: ignore[method-assign]
    try:
        yield
    finally:
        ort.InferenceSession.run = run  # type: ignore[method-assign]


def trial_retime(workdir: Path, call: Callable[[], Any], kind: str, args: argparse.Namespace, median_ms: float,
                 seed: int, env_ns: int = 0) -> tuple[int, dict[str, Any]]:
    """``baseline compare --perf``: recorded baseline and candidate (canaries beside each), then both
    files re-timed interleaved by ``harness.gate.retime.pair``, the burner on for ~the first half of
    it. ``env_ns`` 0 (mode ``retime``): the baseline recorded under load, the A/B candidate a slower
    artifact. ``env_ns`` > 0 (mode ``envslow``): the baseline recorded quiet, the A/B candidate the
    same artifact recorded *and judged* in a slower runtime environment (:func:`slower_runtime`),
    so its re-timing slows both sides alike and only the recorded rows can see it."""
    import threading

    from harness.gate.baseline import Baseline, BaselineInfo
    from harness.gate.blessed import timed_files
    from harness.gate.retime import Pairing, pair
    from harness.results import Record

    artifact_ab = kind == "A/B" and not env_ns
    blessed, candidate = workdir / "mlp.onnx", workdir / ("mlp-slow.onnx" if artifact_ab else "mlp.onnx")
    with Burner(args.burners if not env_ns else 0):
        base = [retime_record(with_canary(call, args.samples), blessed, args.threads,
                              fresh_processes(workdir, blessed, args))]
    slowed = env_ns if kind == "A/B" and env_ns else 0
    cand_processes = fresh_processes(workdir, candidate, args, slowed_ns=slowed)
    environment = slower_runtime(env_ns) if slowed else nullcontext()
    with environment:
        cand = [retime_record(with_canary(call, args.samples), candidate, args.threads, cand_processes)]
        baseline = Baseline(BaselineInfo("bench", workdir, "", "", "bench", "", 1), [Record.from_dict(r) for r in base],
                            timed_files(base))
        block = max(args.samples // args.pairs, 10)
        recorded = compare_runs(base, cand, force_env=True)
        burner = Burner(args.burners).__enter__()
        half = 2 * (args.pairs * block + 50) * median_ms * (1.6 if kind == "A/B" else 1.0) / 2e3
        timer = threading.Timer(half, burner.__exit__)
        timer.start()
        try:
            result = pair(recorded, baseline, cand, pairing=Pairing(args.pairs, block, warmup=50, seed=seed))
        finally:
            timer.cancel()
            burner.__exit__()
    info = summarise_trial("", result)
    info["paired_mode"] = result.mode
    info["recorded"] = {r.metric.split(".", 1)[-1]: f"{r.verdict.value} {r.ratio:.3f}: {r.reason}"
                        for r in result.recorded if r.metric.startswith("latency_ms.")}
    return result.exit_code, info


MODES = ("single", "multirun", "paired", "neighbour", "envpair", "retime", "envslow")


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory(prefix="gate-power-") as tmp:
        call, size = build_session(Path(tmp), args.seed, args.threads)
        collect(call, args.warmup)
        median_ms = float(np.median(collect(call, 300)))
        extra_ns = int(args.slowdown * median_ms * 1e6)
        slow = slowed(call, extra_ns)
        slow_ratio = None
        if {"retime", "envslow"} & set(args.modes):  # the real slower artifact's cost, timed paired here, quietly
            from harness.gate.onnxpair import FileRuntime
            from harness.gate.paired import interleave

            slow_path = slow_artifact(Path(tmp), args.seed)
            feeds = {"x": np.load(Path(tmp) / "feed_x.npy")}
            with FileRuntime.named("ort_cpu", threads=args.threads).open(slow_path) as slow_runner:
                check = interleave(call, slow_runner.timed_call(feeds), pairs=10, block=50, warmup=20)
            slow_ratio = float(np.median(np.median(check.b, axis=1) / np.median(check.a, axis=1)))
        trials: list[dict[str, Any]] = []
        started = time.perf_counter()
        order = [(mode, kind) for mode in args.modes for kind in ("A/A", "A/B") for _ in range(args.trials)]
        for n, i in enumerate(rng.permutation(len(order))):
            mode, kind = order[i]
            cand = slow if kind == "A/B" else call
            if mode == "paired":
                code, info = trial_paired(call, cand, args, seed=args.seed + n)
            elif mode == "neighbour":
                code, info = trial_neighbour(call, cand, args, size)
            elif mode == "envpair":
                code, info = trial_envpair(Path(tmp), kind, args, seed=args.seed + n, extra_ns=extra_ns)
            elif mode in ("retime", "envslow"):
                code, info = trial_retime(Path(tmp), call, kind, args, median_ms, seed=args.seed + n,
                                          env_ns=extra_ns if mode == "envslow" else 0)
            else:
                code, info = trial_unpaired(call, cand, args, size, runs=args.runs if mode == "multirun" else 1)
            trials.append({**info, "mode": mode, "kind": kind, "exit_code": code})
        wall = time.perf_counter() - started
    return {"median_call_ms": median_ms, "extra_ms": extra_ns / 1e6, "wall_s": wall, "trials": trials,
            "retime_slow_artifact_ratio": slow_ratio}


def summarise_trial(kind: str, result: Comparison) -> dict[str, Any]:
    rows = {r.metric.split(".", 1)[-1]: r for r in result.rows if r.metric.startswith("latency_ms.")}
    return {
        "kind": kind,
        "exit_code": result.exit_code,
        "verdicts": {name: rows[name].verdict.value for name in rows},
        "ratios": {name: rows[name].ratio for name in rows},
        "reasons": {name: rows[name].reason for name in rows},
    }


def false_claim(trial: dict[str, Any]) -> bool:
    """An A/A trial that claims any change (REGRESSION or IMPROVEMENT) on a gated statistic."""
    return any(trial["verdicts"].get(g) in ("REGRESSION", "IMPROVEMENT") for g in GATED)


def report(args: argparse.Namespace, out: dict[str, Any]) -> None:
    print(f"gate power: baseline recorded under load ({args.burners} busy-loop process(es), started and stopped "
          f"by this script); {args.trials} A/A + {args.trials} A/B (+{args.slowdown:.0%}) trials per mode, "
          f"{args.samples} calls per side")
    print(f"median call {out['median_call_ms']:.3f} ms, injected {out['extra_ms']:.3f} ms/call; "
          f"{out['wall_s']:.0f} s; cpu cores={os.cpu_count()}, load avg={os.getloadavg()[0]:.2f}")
    if out.get("retime_slow_artifact_ratio"):
        print(f"retime A/B artifact (extra bottleneck): p50 {out['retime_slow_artifact_ratio'] - 1:+.1%} vs the blessed "
              "one (timed paired, quiet)")
    print(f"{'mode':<10} {'A/A false regressions':>22} {'A/A false claims':>17} {'A/B detected':>13}  "
          "p50 verdicts A/A | A/B")
    for mode in args.modes:
        aa = [t for t in out["trials"] if t["mode"] == mode and t["kind"] == "A/A"]
        ab = [t for t in out["trials"] if t["mode"] == mode and t["kind"] == "A/B"]
        fa = sum(t["exit_code"] == 1 for t in aa)
        claims = sum(false_claim(t) for t in aa)
        det = sum(t["exit_code"] == 1 for t in ab)
        verdicts = [", ".join(f"{v} {n}" for v, n in sorted(Counter(t["verdicts"].get("p50", "?") for t in g).items()))
                    for g in (aa, ab)]
        print(f"{mode:<10} {f'{fa}/{len(aa)}':>22} {f'{claims}/{len(aa)}':>17} {f'{det}/{len(ab)}':>13}  "
              f"{verdicts[0]} | {verdicts[1]}")
    for t in out["trials"]:
        if t["mode"] == "neighbour":  # the target there: an A/A trial never claims a change
            wrong = t["kind"] == "A/A" and false_claim(t)
        else:
            wrong = (t["kind"] == "A/A") == (t["exit_code"] == 1)
        if wrong or args.verbose:
            print(f"  {'WRONG ' if wrong else ''}{t['mode']} {t['kind']}: "
                  + "; ".join(f"{g} {t['verdicts'].get(g)} ({t['reasons'].get(g)})" for g in ("p50", "p90")))
            for g, said in (t.get("recorded") or {}).items():  # the recorded rows beside a paired comparison
                if g in ("p50", "p90"):
                    print(f"      recorded {g}: {said}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="A/A trials, and as many A/B trials (default 10)")
    parser.add_argument("--samples", type=int, default=1000, help="per-call samples per side (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="model weights, inputs and trial order")
    parser.add_argument("--slowdown", type=float, default=0.25, help="injected slowdown as a fraction of the median call")
    parser.add_argument("--threads", type=int, default=1, help="ORT intra-op threads (default 1)")
    parser.add_argument("--warmup", type=int, default=200, help="calls before anything is measured")
    parser.add_argument("--burners", type=int, default=1,
                        help="busy-loop processes running while the baseline is recorded (default 1)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comparison modes (default {','.join(MODES)})")
    parser.add_argument("--runs", type=int, default=3, help="runs in a multi-run baseline (the first under load)")
    parser.add_argument("--pairs", type=int, default=20, help="block pairs per paired trial (default 20)")
    parser.add_argument("--process-pairs", type=int, default=PROCESS_PAIRS,
                        help=f"fresh process pairs per half of an envpair trial (default {PROCESS_PAIRS}, "
                             "as perf-compare --env-a/--env-b)")
    parser.add_argument("--processes", type=int, default=3,
                        help="retime/envslow: fresh processes per recorded run, as --perf-repeats (default 3); 0: none")
    parser.add_argument("--child-calls", type=int, default=5,
                        help="steady calls each fresh process times after its first, before its level's calls "
                             "between canary blocks (the harness's default 5)")
    parser.add_argument("--json", metavar="OUT", help="write every trial's verdicts and ratios as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every trial's verdicts and reasons")
    args = parser.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in args.modes if m not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {unknown}; one of {', '.join(MODES)}")
    if args.trials < 1 or args.samples < 10:
        parser.error("--trials must be >= 1 and --samples >= 10")
    smoke.announce(smoke.shrink(args, trials=1, samples=100, warmup=10, runs=2, pairs=MIN_PAIRS, process_pairs=1,
                                burners=0, processes=2))
    out = run(args)
    report(args, out)
    if args.json:
        Path(args.json).write_text(json.dumps({"settings": vars(args), "smoke": smoke.active(), **out}, indent=2) + "\n",
                                   encoding="utf-8")
    ok = True
    for mode in ("paired", "envpair", "retime", "envslow"):  # the gated modes: 0 false alarms, >= 90% detected
        trials = [t for t in out["trials"] if t["mode"] == mode]
        if trials:
            false_alarms = sum(t["exit_code"] == 1 for t in trials if t["kind"] == "A/A")
            detected = sum(t["exit_code"] == 1 for t in trials if t["kind"] == "A/B")
            ok = ok and false_alarms == 0 and detected >= 0.9 * args.trials
    neighbour = [t for t in out["trials"] if t["mode"] == "neighbour" and t["kind"] == "A/A"]
    ok = ok and not any(false_claim(t) for t in neighbour)  # unpaired with drift: never a claim
    # Exit 1 when a mode misses its target on this machine (a smoke run's targets are no verdict).
    return smoke.finish(0 if ok else 1)


if __name__ == "__main__":
    sys.exit(main())
