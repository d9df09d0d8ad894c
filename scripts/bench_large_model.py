#!/usr/bin/env python
"""Scale benchmark: a random-weight decoder-only model just above 2 GB, and 1/8, 1/4, 1/2 of it,
each judged by ``harness run`` over FP32/FP16/INT8 x torch_cpu/ort_cpu.

Opt-in (minutes to tens of minutes, several GB of disk): not a test. For each size it builds a
``LlamaForCausalLM`` (hidden 1536, 12 heads, 4 KV heads, FFN 6144; 2 / 4 / 8 / 16 layers, so
the sizes are exact halvings; seed 1234) saved as sharded safetensors with the zoo's Llama
tokenizer (the one ``llama-tiny`` uses), then runs

    harness run --models DIR --precisions fp32 fp16 int8 --providers torch_cpu ort_cpu
                --samples 4 --batch-size 4 --threads 1 --cache <fresh dir> --out <dir>

in a fresh process with a fresh cache (so every export, conversion and reference is really
computed) and prints, per size: wall time, seconds per phase summed over the records
(``harness.core.phases``), the run's peak RSS (the process's ``ru_maxrss`` from ``wait4`` and
the records' per-case ``memory``; the larger is shown) relative to the FP32 weight bytes, the
heaviest case, and disk (model directory, artifacts, references). Then the log-log slope of
time and of peak RSS between consecutive sizes: 1.0 is linear.

    python scripts/bench_large_model.py                        # the four sizes (~2.2 GB largest)
    python scripts/bench_large_model.py --layers 2 4           # quick: 1/8 and 1/4 only
    python scripts/bench_large_model.py --keep --workdir /data/bench   # keep models and caches

Each size's run is sequential (one process at a time): the 2 GB run alone needs ~3x its weights.

``HARNESS_BENCH_SMOKE=1``: one size, 1 layer of a 32-wide model (so no slope line), built in this
process (the builder's own process only keeps its memory out of a measured run), judged at FP32 on
ONNX Runtime on one sentence, two tokens (``harness.perf.smoke``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CLI = "from harness.cli import entrypoint; raise SystemExit(entrypoint())"
SEED = 1234
#: the shape of every size; only the layer count changes (so sizes halve exactly)
SHAPE = {"hidden_size": 1536, "intermediate_size": 6144, "num_attention_heads": 12, "num_key_value_heads": 4}
#: a smoke run's shape (``HARNESS_BENCH_SMOKE``): the same architecture, kilobytes of weights
SMOKE_SHAPE = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1}
#: what each size is judged at, and a smoke run's smallest of it
PRECISIONS, PROVIDERS = ("fp32", "fp16", "int8"), ("torch_cpu", "ort_cpu")
SMOKE_PRECISIONS, SMOKE_PROVIDERS = ("fp32",), ("ort_cpu",)
PHASES = ("build", "export", "reference", "variant", "metrics", "perf", "other")


def build(directory: Path, layers: int, new_tokens: int) -> None:
    """The model directory (runs in its own process: the builder's memory is not the run's)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.perf import smoke
    from harness.zoo.hf_tiny import corpus_texts
    from harness.zoo.tokenizer import save_tokenizer, train_tokenizer

    tok = train_tokenizer(corpus_texts(), "llama", vocab_size=1000)
    cfg = LlamaConfig(  # type: ignore[call-arg]
        vocab_size=len(tok), num_hidden_layers=layers, max_position_embeddings=256,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        attn_implementation="eager", tie_word_embeddings=False, **(SMOKE_SHAPE if smoke.active() else SHAPE))
    with torch.random.fork_rng(devices=[]):  # the caller's generator is left as it was (a smoke run builds in-process)
        torch.manual_seed(SEED)
        model = LlamaForCausalLM(cfg)  # weights ~ N(0, 0.02) (initializer_range), as HF initialises them
    model.generation_config.max_new_tokens = new_tokens
    model.generation_config.max_length = None
    model.generation_config.pad_token_id = tok.pad_token_id
    model.eval()
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory), safe_serialization=True, max_shard_size="500MB")
    save_tokenizer(tok, directory)


def weight_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.safetensors"))


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) if path.exists() else 0


def run_harness(model: Path, cache: Path, out: Path, extra: list[str], precisions: tuple[str, ...] = PRECISIONS,
                providers: tuple[str, ...] = PROVIDERS) -> dict[str, Any]:
    """One ``harness run`` in a fresh process: wall time, its ru_maxrss, the records."""
    args = [sys.executable, "-c", CLI, "run", "--models", str(model), "--precisions", *precisions,
            "--providers", *providers, "--cache", str(cache), "--out", str(out), *extra]
    env = {**os.environ, "HARNESS_CACHE": str(cache), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    log = out.parent / f"{out.name}.log"
    start = time.perf_counter()
    with log.open("w") as fh:
        fh.write("$ harness " + " ".join(args[3:]) + "\n")
        fh.flush()
        proc = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()
               if line.strip()] if (out / "results.jsonl").is_file() else []
    return {"wall": wall, "code": proc.returncode, "maxrss": usage.ru_maxrss * 1024, "records": records,
            "log": log}


def summarise(run: dict[str, Any], weights: int) -> dict[str, Any]:
    phases = dict.fromkeys(PHASES, 0.0)
    peak_case, case_peak, process_peak, warm_peak = "", 0, 0, 0
    for rec in run["records"]:
        claimed = 0.0
        for name, seconds in (rec.get("phases") or {}).items():
            phases[name] = phases.get(name, 0.0) + seconds
            claimed += seconds
        phases["other"] += max(float(rec.get("duration_s", 0.0)) - claimed, 0.0)
        memory = rec.get("memory") or {}
        if int(memory.get("peak_rss_bytes", 0)) > case_peak:
            case_peak, peak_case = int(memory["peak_rss_bytes"]), str(rec.get("id"))
        process_peak = max(process_peak, int(memory.get("process_peak_rss_bytes", 0)))
        if not built_artifact(rec):  # what a rerun with the artifacts cached needs
            warm_peak = max(warm_peak, int(memory.get("peak_rss_bytes", 0)))
    peak = max(run["maxrss"], case_peak, process_peak)
    verdicts: dict[str, int] = {}
    for rec in run["records"]:
        verdicts[rec["verdict"]] = verdicts.get(rec["verdict"], 0) + 1
    return {"phases": phases, "peak": peak, "ratio": peak / weights, "peak_case": peak_case,
            "warm_peak": warm_peak, "warm_ratio": warm_peak / weights, "verdicts": verdicts}


def built_artifact(record: dict[str, Any]) -> bool:
    """The case exported or converted an ONNX artifact (``cache_hit`` false on one of its files)."""
    return any(isinstance(a, dict) and a.get("cache_hit") is False for a in (record.get("artifacts") or {}).values())


def slope(x0: float, x1: float, y0: float, y1: float) -> float:
    return math.log(y1 / y0) / math.log(x1 / x0) if min(x0, x1, y0, y1) > 0 and x0 != x1 else float("nan")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, nargs="+", default=[2, 4, 8, 16],
                   help="layer counts (one model each; 16 layers = 2.27 GB of FP32 weights)")
    p.add_argument("--samples", type=int, default=4, help="corpus sentences per run (default 4)")
    p.add_argument("--new-tokens", type=int, default=8, help="tokens each generation case decodes (default 8)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1: a shared machine)")
    p.add_argument("--release-models", default="always", choices=("auto", "always", "never"),
                   help="--release-models of the runs (default always: the same policy at every size)")
    p.add_argument("--workdir", type=Path, default=None, help="where models and caches go (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the models, caches and run directories")
    p.add_argument("--harness-args", nargs=argparse.REMAINDER, default=[], help="more `harness run` arguments")
    p.add_argument("--build", type=Path, help=argparse.SUPPRESS)  # internal: build one model and exit
    args = p.parse_args()
    if args.build:
        build(args.build, args.layers[0], args.new_tokens)
        return 0
    from harness.perf import smoke

    changes = smoke.shrink(args, layers=[1], samples=1, new_tokens=2)
    judged = (SMOKE_PRECISIONS, SMOKE_PROVIDERS) if smoke.active() else (PRECISIONS, PROVIDERS)
    if smoke.active():
        changes += [f"hidden {SMOKE_SHAPE['hidden_size']}", "built in this process", f"precisions {' '.join(judged[0])}",
                    f"providers {' '.join(judged[1])}"]
    smoke.announce(changes)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="harness-bench-large-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    try:
        for layers in sorted(args.layers):
            model = work / f"llama-{layers}l"
            start = time.perf_counter()
            if smoke.active():
                build(model, layers, args.new_tokens)
            else:
                subprocess.run([sys.executable, __file__, "--build", str(model), "--layers", str(layers),
                                "--new-tokens", str(args.new_tokens)], check=True)
            built = time.perf_counter() - start
            weights = weight_bytes(model)
            cache, out = work / f"cache-{layers}l", work / f"run-{layers}l"
            extra = ["--samples", str(args.samples), "--batch-size", str(args.samples),
                     "--threads", str(args.threads), "--release-models", args.release_models, *args.harness_args,
                     "--pytest-args", "--harness-gen-samples", str(args.samples), "--harness-gen-batch-size",
                     str(args.samples), "--harness-gen-max-new-tokens", str(args.new_tokens)]
            run = run_harness(model, cache, out, extra, *judged)
            row = {"layers": layers, "weights": weights, "built_s": built, "wall": run["wall"], "code": run["code"],
                   "disk_model": disk_bytes(model), "disk_artifacts": disk_bytes(cache / "artifacts"),
                   "disk_references": disk_bytes(cache / "references"), **summarise(run, weights)}
            rows.append(row)
            print(f"{layers:>2} layers  {weights / 1e9:5.2f} GB  wall {row['wall']:7.1f} s  exit {row['code']}  "
                  f"peak RSS {row['peak'] / 1e9:5.2f} GB = {row['ratio']:.2f}x weights  "
                  f"(heaviest case {row['peak_case']})  verdicts {row['verdicts']}  log {run['log']}", flush=True)
            if not args.keep:
                for path in (model, cache):
                    shutil.rmtree(path, ignore_errors=True)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print_table(rows)
    # exit 1 of a run is a gate verdict (random weights drift at INT8): the benchmark still measured
    # it; anything else (usage error, crash, interrupt) means a size was not measured
    return smoke.finish(0 if all(r["code"] in (0, 1) for r in rows) else 1, verdicts=())


def print_table(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    used = [ph for ph in PHASES if any(r["phases"].get(ph, 0.0) > 0.05 for r in rows)]
    print()
    print("| layers | FP32 weights | wall s | " + " | ".join(f"{ph} s" for ph in used)
          + " | peak RSS | peak / weights | heaviest case | peak / weights, cases that built no artifact "
          "| disk: model + artifacts + references |")
    print("|---:|---:|---:|" + "---:|" * len(used) + "---:|---:|---|---:|---:|")
    for r in rows:
        disk = r["disk_model"] + r["disk_artifacts"] + r["disk_references"]
        print(f"| {r['layers']} | {r['weights'] / 1e9:.2f} GB | {r['wall']:.0f} | "
              + " | ".join(f"{r['phases'].get(ph, 0.0):.0f}" for ph in used)
              + f" | {r['peak'] / 1e9:.2f} GB | {r['ratio']:.2f}x | {r['peak_case'].split('[')[-1].rstrip(']')} | "
              f"{r['warm_ratio']:.2f}x | "
              f"{r['disk_model'] / 1e9:.2f} + {r['disk_artifacts'] / 1e9:.2f} + {r['disk_references'] / 1e9:.3f} "
              f"= {disk / 1e9:.2f} GB |")
    if len(rows) > 1:
        print()
        print("| sizes | time slope (log-log) | peak RSS slope |")
        print("|---|---:|---:|")
        for a, b in zip(rows, rows[1:]):
            print(f"| {a['weights'] / 1e9:.2f} -> {b['weights'] / 1e9:.2f} GB | "
                  f"{slope(a['weights'], b['weights'], a['wall'], b['wall']):.2f} | "
                  f"{slope(a['weights'], b['weights'], a['peak'], b['peak']):.2f} |")
        first, last = rows[0], rows[-1]
        print(f"\nover {first['weights'] / 1e9:.2f} -> {last['weights'] / 1e9:.2f} GB: time slope "
              f"{slope(first['weights'], last['weights'], first['wall'], last['wall']):.2f}, peak RSS slope "
              f"{slope(first['weights'], last['weights'], first['peak'], last['peak']):.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
