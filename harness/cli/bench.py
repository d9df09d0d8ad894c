"""``harness bench``: the headline speed and size ratios, measured side by side in one run.

ORT FP32 vs PyTorch eager at batch 1, INT8 vs FP32 (latency and artifact size) and FP16
vs FP32 on the CPU, for the BERT-base-sized encoder and the translator; every other CPU
runtime of the backend registry that runs here (OpenVINO) against the same and against ORT. The contenders
run in interleaved blocks, so every ratio compares numbers taken under the same machine
conditions; each comes with a 95% block-bootstrap interval. Exit 0, or 2 on bad usage.
``HARNESS_BENCH_SMOKE=1``: the smallest configuration (:data:`SMOKE_MODELS`, 2 rounds of 2 calls),
marked as a smoke run (``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import json
import os

from harness.core import RunOptions, Settings, UsageError
from harness.core.writable import ensure_writable_file
from harness.perf import smoke
from harness.report.console import cli_console
from harness.results.envinfo import environment

DEFAULT_ENCODER = "encoder-custom-12x768"
TRANSLATOR, TRANSLATOR_FALLBACK = "numbers-en-zh", "marian-tiny"
#: a smoke run's models when none are given: the smallest encoder and the smallest generative
#: model (one decode-step graph), so both timing paths (forward call, greedy generation) run
SMOKE_MODELS = ["bert-tiny", "llama-tiny"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from harness.settings.commands import add_command_options

    p = sub.add_parser("bench", help="headline ratios: ORT (and OpenVINO) vs PyTorch, INT8/FP16 vs FP32 (latency, size)",
                       description=__doc__.splitlines()[0])
    add_command_options(p, "bench")
    p.set_defaults(func=bench)


def default_models() -> tuple[list[str], list[str]]:
    """The encoder and the translator, falling back when the translator is not in the zoo."""
    from harness.zoo import registered

    notes = []
    translator = TRANSLATOR
    if TRANSLATOR not in registered():
        translator = TRANSLATOR_FALLBACK
        notes.append(f"{TRANSLATOR} is not in the zoo; using {TRANSLATOR_FALLBACK} as the translator")
    return [DEFAULT_ENCODER, translator], notes


def _check(args: argparse.Namespace) -> None:
    for name in ("batch_size", "seq_len", "rounds", "calls"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')}: must be >= 1, got {getattr(args, name)}")
    if args.new_tokens < 2:
        raise UsageError(f"--new-tokens: must be >= 2, got {args.new_tokens}")
    from harness.settings.options import option

    option("threads").parse(args.threads, "--threads")  # the run option's row: as `harness run` and the config
    from harness.runners import parse_provider

    for name in args.providers or []:
        parse_provider(name)  # unknown names: one line, did-you-mean, before anything is measured


def bench(args: argparse.Namespace) -> int:
    _check(args)
    for option in ("json", "markdown"):  # before anything is measured
        if getattr(args, option):
            ensure_writable_file(getattr(args, option), f"--{option}")
    if args.cache:
        os.environ["HARNESS_CACHE"] = str(args.cache)
    changes = smoke.shrink(args, rounds=2, calls=2, new_tokens=2, seq_len=8)
    if smoke.active() and not args.models:
        args.models = SMOKE_MODELS
        changes.insert(0, f"models {' '.join(SMOKE_MODELS)}")
    from harness.judge.workspace import Workspace
    from harness.perf.bench import render, to_markdown
    from harness.perf.headline import measure_headline
    from harness.zoo import resolve

    models, notes = (args.models, []) if args.models else default_models()
    for name in models:
        resolve(name)  # unknown names: one line, did-you-mean
    from harness.runners import parse_provider

    providers = [parse_provider(name) for name in args.providers] if args.providers else None  # checked in _check
    options = RunOptions(models=list(models), settings=Settings(threads=args.threads))
    ws = Workspace(options, args.cache)  # threads reach torch and ORT through the backends
    console = cli_console()
    if smoke.active():
        console.print(smoke.banner(changes), highlight=False, markup=False)
    results = []
    for name in models:
        console.print(f"measuring {name} ...", highlight=False)
        results.append(measure_headline(ws, name, batch_size=args.batch_size, seq_len=args.seq_len,
                                        rounds=args.rounds, calls=args.calls, new_tokens=args.new_tokens,
                                        providers=providers))
    rows = [r for res in results for r in res.ratios]
    notes += [note for res in results for note in res.notes]
    env = environment(args.threads, None)
    threads = env["threads"]
    render(rows, console, title="headline ratios (candidate / base, p50; interleaved in one run)")
    for res in results:
        console.print(f"{res.model}: one sample = {res.unit}; {args.rounds} rounds x {args.calls} per contender",
                      highlight=False)
    for note in notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    console.print(f"threads: torch {threads['torch_num_threads']}, ORT and OpenVINO intra-op "
                  f"{threads['ort_intra_op_threads'] or 'default'}; cpu: {env['cpu']} ({env['cores']} cores)",
                  highlight=False)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        mark = f"{smoke.banner(changes)}\n\n" if smoke.active() else ""
        args.markdown.write_text(mark + to_markdown(rows), encoding="utf-8")
    if args.json:
        from harness.perf.stats import summarize

        payload = {"schema": "harness.bench/1", "env": env, "notes": notes, "smoke": smoke.active(),
                   "settings": {k: getattr(args, k) for k in ("batch_size", "seq_len", "new_tokens", "rounds", "calls",
                                                              "threads", "providers")},
                   "rows": [r.as_dict() for r in rows],
                   "models": {res.model: {"unit": res.unit, "artifact_bytes": res.artifact_bytes,
                                          "summaries": {k: summarize(v).as_dict() for k, v in res.samples.items()}}
                              for res in results}}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return smoke.finish(0, stream=console.file)
