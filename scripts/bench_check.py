#!/usr/bin/env python
"""Time ``harness check`` against optimum's own output validation on the same optimum-layout export.

Each round runs, as fresh processes and in an order that rotates round by round (so drift on a
shared machine hits every tool alike): ``harness check`` with an empty cache (cold: what a user's
first check computes -- the PyTorch references, the reference decode and its closed loop), the same
check with a cache filled by one untimed run before the rounds (warm: what a CI cache holds after
the first job; the verdicts are still computed on the files), and optimum's validation, which
computes everything every time. It prints each run's wall time and ``ru_maxrss``, and per mode the
medians and their ratios to optimum's, with the load average at the start and at the end.
optimum-onnx pins transformers 4.57, so it lives in its own venv (``--optimum-python``); without it
the script says why and exits 0 (nothing to compare).

    python -m venv /work/venv-optimum
    /work/venv-optimum/bin/pip install /path/to/torch-2.13.0*.whl optimum-onnx onnxruntime
    python scripts/bench_check.py --runs 3                     # numbers-en-zh, exported by optimum-cli
    python scripts/bench_check.py --reference DIR --export OPTIMUM_DIR --runs 5 --json out.json
    python scripts/bench_check.py --runs 3 --modes cold        # only the empty-cache check beside optimum

The optimum interpreter defaults to ``$HARNESS_EXPORTERS_VENV/bin/python`` (the exporters' venv
CI builds for the exporter tests) when that variable is set, else ``/work/venv-optimum/bin/python``.

What is compared: ``harness check --reference R --onnx E --providers ort_cpu`` (numeric parity of
every graph on padded corpus batches, greedy generation parity over the corpus, the closed-loop
cache check, I/O matching, training-mode lint) against ``scripts/optimum_validate.py`` (optimum's
``validate_models_outputs`` on each sub-model with its dummy shapes: what ``optimum-cli export
onnx`` validates after export).

``HARNESS_BENCH_SMOKE=1``: 1 round, cold only (``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REFERENCE = ROOT / "harness" / "zoo" / "models" / "numbers-en-zh"
#: what each side imports before it can compute anything, run alone in each venv: the floor no
#: check can go below in that venv (transformers 5's modelling imports torch._dynamo and
#: torch.distributed.tensor, 4.57's do not)
IMPORT_FLOOR = ("import sys, torch, onnxruntime, transformers; transformers.AutoTokenizer; "
                "config = transformers.AutoConfig.from_pretrained(sys.argv[1]); "
                "transformers.AutoModelForSeq2SeqLM._model_mapping[type(config)]")
FLOORS = ("imports harness", "imports optimum")
OPTIMUM_FILES = ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, int, int, str]:
    """Wall seconds, exit code, ru_maxrss (KiB) and output of one fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, proc.returncode, int(usage.ru_maxrss), out


def optimum_ready(python: str, env: dict[str, str]) -> str | None:
    """None when ``python`` can import optimum's exporter, else why not."""
    if not Path(python).exists():
        return f"{python} does not exist (create the venv: see this script's docstring)"
    probe = subprocess.run([python, "-c", "import optimum.exporters.onnx, onnxruntime"], capture_output=True,
                           text=True, env=env)
    if probe.returncode:
        return f"{python} cannot import optimum.exporters.onnx ({probe.stderr.strip().splitlines()[-1:]})"
    return None


def has_bytecode(python: str, env: dict[str, str]) -> bool:
    """Whether ``python``'s torch and transformers are compiled to bytecode: a venv installed by uv
    without ``--compile-bytecode``, where PYTHONDONTWRITEBYTECODE is set, compiles them from source in
    every process -- seconds that would dominate the ratio (docs/pitfalls.md #22). Asked by the
    harness's own check (``harness/results/bytecode.py``, standard library only), run by path: the
    optimum venv has no harness installed."""
    probe = ("import runpy, sys; uncompiled = runpy.run_path(sys.argv[1])['uncompiled']; "
             "print(not uncompiled(('torch', 'transformers')))")
    out = subprocess.run([python, "-c", probe, str(ROOT / "harness" / "results" / "bytecode.py")],
                         capture_output=True, text=True, env=env)
    return out.stdout.strip() == "True"


def export(python: str, reference: Path, target: Path, env: dict[str, str]) -> None:
    cli = Path(python).with_name("optimum-cli")
    subprocess.run([str(cli), "export", "onnx", "--model", str(reference), "--task", "text2text-generation-with-past",
                    str(target)], check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def harness_verdicts(run_dir: Path) -> dict[str, str]:
    out = {}
    results = run_dir / "results.jsonl"
    if results.is_file():
        for line in results.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            out[record["id"]] = record["verdict"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="the HF model directory")
    parser.add_argument("--export", type=Path, help="an optimum-layout export of it (default: made by optimum-cli)")
    exporters = os.environ.get("HARNESS_EXPORTERS_VENV")
    parser.add_argument("--optimum-python",
                        default=str(Path(exporters) / "bin" / "python") if exporters else "/work/venv-optimum/bin/python",
                        help="interpreter of the venv with optimum-onnx (default: $HARNESS_EXPORTERS_VENV's, else "
                             "/work/venv-optimum's)")
    parser.add_argument("--modes", default="cold,warm",
                        help="harness modes beside optimum, comma-separated: cold (empty cache each run), warm "
                             "(a cache filled by one untimed run); default both")
    parser.add_argument("--cold", action="store_true", help="the same as --modes cold")
    parser.add_argument("--runs", type=int, default=3, help="rounds (default 3; the medians are compared)")
    parser.add_argument("--json", metavar="OUT", help="write every run as JSON")
    args = parser.parse_args(argv)
    from harness.perf import smoke

    smoke.announce(smoke.shrink(args, runs=1, modes="cold"))  # one round, no untimed priming run
    modes = ["cold"] if args.cold else [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or set(modes) - {"cold", "warm"}:
        print(f"--modes: expected cold and/or warm, got {args.modes!r}", file=sys.stderr)
        return 2
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    optimum_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}  # its own site-packages only
    why = optimum_ready(args.optimum_python, optimum_env)
    if why:
        print(f"SKIP: optimum's validation cannot run: {why}")
        return 0
    compiled = {"harness": has_bytecode(sys.executable, env), "optimum": has_bytecode(args.optimum_python, optimum_env)}
    print("bytecode compiled (torch, transformers): "
          + ", ".join(f"{tool} {'yes' if yes else 'NO'}" for tool, yes in compiled.items()), flush=True)
    if not all(compiled.values()):
        print("  a venv without bytecode compiles its imports from source in every process: compare venvs "
              "installed as users install them (pip compiles; uv needs --compile-bytecode)", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        export_dir = args.export
        if export_dir is None:
            export_dir = Path(tmp) / "optimum-export"
            print(f"exporting {args.reference.name} with optimum-cli ...", flush=True)
            export(args.optimum_python, args.reference, export_dir, optimum_env)
        missing = [f for f in OPTIMUM_FILES if not (export_dir / f).is_file()]
        if missing:
            print(f"{export_dir}: not optimum's seq2seq layout (missing {', '.join(missing)})", file=sys.stderr)
            return 2
        harness_argv = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))",
                        "check", "--reference", str(args.reference),
                        "--onnx", str(export_dir), "--providers", "ort_cpu"]
        optimum_argv = [args.optimum_python, str(ROOT / "scripts" / "optimum_validate.py"), str(args.reference),
                        str(export_dir)]
        runs: list[dict[str, Any]] = []
        warm_env = {**env, "HARNESS_CACHE": str(Path(tmp) / "cache")}
        if "warm" in modes:  # fill the cache once, untimed
            timed([*harness_argv, "--out", str(Path(tmp) / "harness-prime")], warm_env)
        floor_argv = ["-c", IMPORT_FLOOR, str(args.reference)]
        tools = [*(f"harness {m}" for m in modes), "optimum", *FLOORS]
        load_start = os.getloadavg()
        for i in range(args.runs):
            order = tools[i % len(tools):] + tools[: i % len(tools)]
            for tool in order:
                load = os.getloadavg()[0]
                if tool.startswith("harness"):
                    run_dir = Path(tmp) / f"{tool.replace(' ', '-')}-{i}"
                    run_env = {**env, "HARNESS_CACHE": str(Path(tmp) / f"cache-{i}")} if tool == "harness cold" \
                        else warm_env
                    wall, code, rss, out = timed([*harness_argv, "--out", str(run_dir)], run_env)
                    verdicts = harness_verdicts(run_dir)
                elif tool in FLOORS:
                    python, tool_env = (sys.executable, env) if tool == "imports harness" \
                        else (args.optimum_python, optimum_env)
                    wall, code, rss, out = timed([python, *floor_argv], tool_env)
                    verdicts = {}
                else:
                    wall, code, rss, out = timed(optimum_argv, optimum_env)
                    line = next((x for x in reversed(out.splitlines()) if x.startswith("{")), "{}")
                    verdicts = {"optimum-validation": json.loads(line).get("verdict", "error")}
                runs.append({"tool": tool, "round": i, "wall_s": round(wall, 2), "exit": code, "load1": load,
                             "ru_maxrss_mib": round(rss / 1024, 1), "verdicts": verdicts})
                print(f"round {i} {tool:<16} {wall:7.2f} s  exit {code}  ru_maxrss {rss / 1024:6.0f} MiB  "
                      f"load {load:4.1f}  {verdicts}", flush=True)
    med = {tool: statistics.median(r["wall_s"] for r in runs if r["tool"] == tool) for tool in tools}
    peak = {tool: statistics.median(r["ru_maxrss_mib"] for r in runs if r["tool"] == tool) for tool in tools}
    load_end = os.getloadavg()
    print(f"\n{args.runs} round(s), order rotating; load average {load_start[0]:.1f}/{load_start[1]:.1f}/"
          f"{load_start[2]:.1f} at the start, {load_end[0]:.1f}/{load_end[1]:.1f}/{load_end[2]:.1f} at the end, "
          f"{os.cpu_count()} cores")
    print(f"{'':<16} {'median wall':>12} {'/ optimum':>10} {'median ru_maxrss':>17} {'/ optimum':>10}")
    for tool in tools:
        print(f"{tool:<16} {med[tool]:>10.2f} s {med[tool] / med['optimum']:>10.2f} {peak[tool]:>13.0f} MiB "
              f"{peak[tool] / peak['optimum']:>10.2f}")
    if all(t in med for t in ("harness cold", *FLOORS)):
        harness_work, optimum_work = med["harness cold"] - med["imports harness"], med["optimum"] - med["imports optimum"]
        print(f"beyond its venv's import floor: harness cold {harness_work:.2f} s, optimum {optimum_work:.2f} s; "
              f"the floors differ by {med['imports harness'] - med['imports optimum']:+.2f} s (the venvs' "
              "transformers and their imports)")
    print("imports: torch, onnxruntime, transformers, the tokenizer's and the model class's modules in each venv, "
          "nothing run; harness cold: an empty cache (PyTorch references, reference decode and its closed loop computed); "
          "harness warm: a cache filled by one untimed run; ru_maxrss of the harness is a lower bound (it resets "
          "its high-water mark per case)")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "median_wall_s": med, "median_ru_maxrss_mib": peak,
                                               "bytecode": compiled,
                                               "ratio_wall": {t: med[t] / med["optimum"] for t in tools},
                                               "ratio_ru_maxrss": {t: peak[t] / peak["optimum"] for t in tools},
                                               "loadavg_start": load_start, "loadavg_end": load_end}, indent=1)
                                   + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    from harness.perf import smoke

    sys.exit(smoke.finish(main(), verdicts=()))
