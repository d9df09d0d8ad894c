#!/usr/bin/env python
"""Memory and time of ``harness check`` on decoder-only exports from 0.5 GB up: peak RSS against
the weights, as a team judging a 7 B export on a 16-32 GB machine needs to know it.

Opt-in (minutes per GB, GBs of disk): not a test. For each size it builds, in a child process, a
random-weight ``LlamaForCausalLM`` (``transformers.LlamaConfig``, nothing downloaded: hidden 2048,
16 heads, 4 KV heads, FFN 5632 -- TinyLlama's shape -- and as many layers as the size needs; seed
1234) saved as safetensors with the zoo's Llama tokenizer, and its export in the layout teams ship
(optimum's decoder-only ``model.onnx`` with ``past_key_values.*`` inputs and ``present.*``
outputs, every weight in ``model.onnx.data``; the HF config and tokenizer beside it), by the
harness's own exporter. Then it judges the export with

    harness check --reference REF --onnx ONNX/model.onnx --samples 4 --batch-size 4 --gen-samples 4

in a fresh process with a fresh cache, sampling the RSS of the whole process tree (psutil, every
50 ms) and taking the children's ``ru_maxrss``, and prints per size: the weights, the peak (the
larger of both), peak / weights, the floor (the same check's peak on a model of ~0 weights: the
interpreter, torch, transformers, onnxruntime), (peak - floor) / weights, wall and wall per GB.
Each model is deleted once measured. Before each size it checks the memory available now against
what the builder (about 3.5x the weights: module, exporter, protobuf) and the check need, and stops
with the limit when the next size would not fit with 2 GB to spare.

    python scripts/bench_large_models.py                          # 0.5, 1, 2, 4 GB of FP32 weights
    python scripts/bench_large_models.py --gb 0.5 1 2 4 6         # and 6 GB (needs ~24 GB free to build)
    python scripts/bench_large_models.py --release-models never   # the check as it was: module + session

``HARNESS_BENCH_SMOKE=1``: one size of a few MB (hidden 64, 1 layer), no floor run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

CLI = "from harness.cli import entrypoint; raise SystemExit(entrypoint())"
SEED = 1234
#: TinyLlama's shape: 45.1 M parameters (180 MB of FP32) per layer
SHAPE = {"hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 16, "num_key_value_heads": 4}
SMOKE_SHAPE = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 1}
#: what the builder is assumed to hold at its peak, in weights (module, the exporter's copies, the protobuf),
#: until a build is measured; the next size is then estimated from the last (largest) size's ratio
BUILD_FACTOR = 3.5
#: what is kept free beside the next size's estimate (other processes on a shared machine)
SPARE_BYTES = 2 * 1024 ** 3


def layer_bytes(shape: dict[str, int]) -> int:
    """FP32 bytes of one decoder layer of ``shape``."""
    hidden, ffn = shape["hidden_size"], shape["intermediate_size"]
    kv = hidden * shape["num_key_value_heads"] // shape["num_attention_heads"]
    return 4 * (2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * ffn + 2 * hidden)


def build(ref: Path, onnx_dir: Path, layers: int, shape: dict[str, int]) -> None:
    """The reference directory and its export (in its own process: the builder's memory is not the check's)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.export.onnx_export import export_graph
    from harness.families import family_for
    from harness.zoo.base import spec_for_directory
    from harness.zoo.hf_tiny import corpus_texts
    from harness.zoo.loading import load_model
    from harness.zoo.tokenizer import save_tokenizer, train_tokenizer

    tok = train_tokenizer(corpus_texts(), "llama", vocab_size=1000)
    cfg = LlamaConfig(  # type: ignore[call-arg]
        vocab_size=len(tok), num_hidden_layers=layers, max_position_embeddings=256,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        attn_implementation="eager", tie_word_embeddings=False, **shape)  # type: ignore[arg-type]
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(cfg).eval()
    model.generation_config.pad_token_id = tok.pad_token_id
    ref.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(ref), safe_serialization=True, max_shard_size="2GB")
    save_tokenizer(tok, ref)
    del model
    spec = spec_for_directory(ref)
    loaded = load_model(spec)
    family = family_for(spec.family)
    graph = family.graphs(loaded)[0]
    onnx_dir.mkdir(parents=True, exist_ok=True)
    export_graph(family.module(loaded, graph), graph, family.export_example(loaded, graph), onnx_dir,
                 external_data="always")
    for f in ref.iterdir():  # optimum's layout: the config and tokenizer beside the graph
        if f.is_file() and f.suffix != ".safetensors" and not f.name.endswith(".index.json"):
            shutil.copy(f, onnx_dir / f.name)


@dataclass
class Measured:
    code: int
    wall: float
    sampled_peak: int
    children_maxrss: int

    @property
    def peak(self) -> int:
        return max(self.sampled_peak, self.children_maxrss)


def measure(args: list[str], log: Path, env: dict[str, str]) -> Measured:
    """Run ``args`` with the RSS of its whole process tree sampled; ``ru_maxrss`` of the child too."""
    import psutil

    start = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, env=env)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            root = psutil.Process(proc.pid)
            while not done.is_set():
                try:
                    tree = [root, *root.children(recursive=True)]
                    peak[0] = max(peak[0], sum(p.memory_info().rss for p in tree))
                except psutil.Error:
                    pass
                done.wait(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        done.set()
        sampler.join()
    return Measured(os.waitstatus_to_exitcode(status), time.perf_counter() - start, peak[0], usage.ru_maxrss * 1024)


def available_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def check(ref: Path, onnx_dir: Path, out: Path, cache: Path, extra: list[str]) -> Measured:
    args = [sys.executable, "-c", CLI, "check", "--reference", str(ref), "--onnx", str(onnx_dir / "model.onnx"),
            "--out", str(out), *extra]
    env = {**os.environ, "HARNESS_CACHE": str(cache), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    return measure(args, out.parent / f"{out.name}.log", env)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gb", type=float, nargs="+", default=[0.5, 1, 2, 4],
                   help="sizes in GB of FP32 weights (rounded to whole layers of 180 MB)")
    p.add_argument("--samples", type=int, default=4, help="corpus sentences, numeric and generation (default 4)")
    p.add_argument("--release-models", default="auto", choices=("auto", "always", "never"),
                   help="the check's --release-models (auto: staged from 1 GB of files)")
    p.add_argument("--workdir", type=Path, default=None, help="where models and caches go (default: a temp dir)")
    # internal (and tests/test_large_models.py): REF ONNX LAYERS SHAPE (full, smoke or a JSON object of LlamaConfig sizes)
    p.add_argument("--build", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args()
    from harness.perf import smoke

    if args.build:
        named = {"full": SHAPE, "smoke": SMOKE_SHAPE}
        build(Path(args.build[0]), Path(args.build[1]), int(args.build[2]),
              named.get(args.build[3]) or json.loads(args.build[3]))
        return 0
    shape = SMOKE_SHAPE if smoke.active() else SHAPE
    changes = smoke.shrink(args, gb=[0.0], samples=1)
    if smoke.active():
        changes.append(f"hidden {shape['hidden_size']}, 1 layer, no floor run")
    smoke.announce(changes)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="harness-bench-large-models-"))
    work.mkdir(parents=True, exist_ok=True)
    extra = ["--samples", str(args.samples), "--batch-size", str(args.samples), "--gen-samples", str(args.samples),
             "--threads", "1", "--release-models", args.release_models]
    per_layer = layer_bytes(shape)
    rows: list[tuple[int, int, Measured]] = []
    floor = 0
    limit = ""
    build_factor = BUILD_FACTOR  # until a build of this shape is measured
    try:
        sizes = [0.0] if smoke.active() else [0.0, *sorted(args.gb)]  # 0: the floor (one layer of hidden 64)
        for gb in sizes:
            layers = max(1, round(gb * 1e9 / per_layer))
            weights = layers * per_layer if gb else 0
            need = int(weights * build_factor) + SPARE_BYTES
            if available_bytes() < need:
                limit = (f"stopped before {weights / 1e9:.2f} GB: building it needs about {need / 1e9:.1f} GB "
                         f"free with the spare, {available_bytes() / 1e9:.1f} GB are available")
                break
            ref, onnx_dir = work / f"ref-{layers}l", work / f"onnx-{layers}l"
            tiny = smoke.active() or not gb
            built = measure([sys.executable, __file__, "--build", str(ref), str(onnx_dir), str(1 if tiny else layers),
                             "smoke" if tiny else "full"], work / f"build-{layers}l.log", dict(os.environ))
            if built.code != 0:
                raise SystemExit(f"building {layers} layers failed (exit {built.code}): "
                                 f"{work / f'build-{layers}l.log'}")
            weights = sum(f.stat().st_size for f in ref.glob("*.safetensors"))
            if gb and weights:  # the next size's estimate: the ratio of the largest size built so far (same regime)
                build_factor = built.peak / weights
                print(f"built {layers} layers: {weights / 1e9:.2f} GB in {built.wall:.0f} s, builder peak "
                      f"{built.peak / 1e9:.2f} GB = {built.peak / weights:.2f}x weights", flush=True)
            got = check(ref, onnx_dir, work / f"check-{layers}l", work / f"cache-{layers}l", extra)
            shutil.rmtree(ref, ignore_errors=True)
            shutil.rmtree(onnx_dir, ignore_errors=True)
            shutil.rmtree(work / f"cache-{layers}l", ignore_errors=True)
            if not gb and not smoke.active():
                floor = got.peak
                print(f"floor (one tiny layer): peak {got.peak / 1e9:.2f} GB, wall {got.wall:.0f} s, exit {got.code}",
                      flush=True)
                continue
            rows.append((layers, weights, got))
            print(f"{layers:>2} layers  {weights / 1e9:5.2f} GB  exit {got.code}  wall {got.wall:6.0f} s  peak "
                  f"{got.peak / 1e9:5.2f} GB = {got.peak / max(weights, 1):.2f}x weights  load {os.getloadavg()[0]:.1f}",
                  flush=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print("| layers | FP32 weights | peak RSS | peak / weights | (peak - floor) / weights | wall s | wall s / GB | exit |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for layers, weights, got in rows:
        gb = max(weights / 1e9, 1e-9)
        print(f"| {layers} | {weights / 1e9:.2f} GB | {got.peak / 1e9:.2f} GB | {got.peak / max(weights, 1):.2f}x | "
              f"{(got.peak - floor) / max(weights, 1):.2f}x | {got.wall:.0f} | {got.wall / gb:.0f} | {got.code} |")
    print(f"\nfloor {floor / 1e9:.2f} GB; release-models {args.release_models}; load average now "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}" + (f"\n{limit}" if limit else ""))
    return smoke.finish(0 if rows and all(got.code in (0, 1) for _, _, got in rows) else 1, verdicts=())


if __name__ == "__main__":
    raise SystemExit(main())
