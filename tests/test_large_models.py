"""``harness check`` of a decoder-only export with external data holds one copy of the weights at a
time (harness/check/staging.py, docs/large-models.md).

One random-weight Llama of ~208 MB (hidden 512, 13 layers: big enough that a second copy of its
weights stands out of the allocator's noise, small enough for CI), exported in optimum's
decoder-only layout (``model.onnx`` + ``model.onnx.data``), is judged in a fresh interpreter that
records, from the harness's own calls, the resident set when the PyTorch module loads and when
each session opens, and whether the other was alive then. The staged check (``--release-models
always``, what ``auto`` does from 1 GB of files) must never hold both and peak at most 1.5x the
weights plus a fixed allowance above its floor; the check as it was (``never``) is the negative
control: its session is open when the module loads and it exceeds the bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import PATIENCE

ROOT = Path(__file__).resolve().parents[1]
#: ~208 MB of FP32 weights (15.7 MB per layer, 4 MB of embeddings): half of it must stand out of
#: the allocator's and the arenas' variation between runs (tens of MB)
SHAPE = {"hidden_size": 512, "intermediate_size": 2048, "num_attention_heads": 8, "num_key_value_heads": 2,
         "num_hidden_layers": 13}
#: the bound the staged check is held to: BOUND x the weights + ALLOWANCE above the floor (the
#: resident set when it first loads either copy: interpreter, torch, transformers, onnxruntime,
#: tokenizer, corpus -- about 0.45 GB here)
BOUND = 1.5
#: what judging adds whatever the size (measured here on 110 MB and 0.57 GB decoders: 80-140 MB):
#: the references, feeds and decodes kept for the session stage (~30 MB), ONNX Runtime's arena and
#: its transient at session creation (~25 MB), the decoding loops' and the closed loop's arrays
ALLOWANCE = 150e6

#: the judging child: the CLI, with the module loader and the session opener watched
_WATCHED_CHECK = """
import gc, json, sys, weakref
import onnxruntime, transformers  # in the floor: what any check imports, whatever the model's size
from transformers import LlamaForCausalLM
from harness.core.rss import current_rss
from harness.runners import prebuilt
from harness.zoo import loading

events, modules, sessions = [], [], []

def alive(refs):
    return sum(1 for r in refs if r() is not None)

load_module = loading._load_torch_model
def watched_load(*args, **kwargs):
    events.append({"what": "module", "rss": current_rss(), "sessions_alive": len(sessions)})
    module = load_module(*args, **kwargs)
    modules.append(weakref.ref(module))
    return module
loading._load_torch_model = watched_load

open_onnx = prebuilt.open_onnx
def watched_open(*args, **kwargs):
    gc.collect()
    events.append({"what": "session", "rss": current_rss(), "modules_alive": alive(modules)})
    session = open_onnx(*args, **kwargs)
    sessions.append(session)
    return session
prebuilt.open_onnx = watched_open

from harness.judge import cached_decoding
stepped = []  # batches PyTorch stepped again for the closed loop (not recorded while it decoded)
record_side = cached_decoding.record_side
def watched_record(*args, **kwargs):
    stepped.append(1)
    return record_side(*args, **kwargs)
# the reference cache keys the closed loop by record_side's source file: the watcher names the same file
watched_record.__code__ = watched_record.__code__.replace(co_filename=record_side.__code__.co_filename)
cached_decoding.record_side = watched_record

from harness.cli import main
try:
    code = main(sys.argv[1:])
finally:
    peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
    print("WATCHED " + json.dumps({"events": events, "peak": peak, "stepped_again": len(stepped)}))
raise SystemExit(code)
"""


@pytest.fixture(scope="module")
def decoder_export(tmp_path_factory) -> tuple[Path, Path, int]:
    """(reference directory, export directory, weight bytes): built by the benchmark's builder in a
    child, so this process holds none of it."""
    root = tmp_path_factory.mktemp("large-model")
    ref, onnx_dir = root / "ref", root / "onnx"
    layers = SHAPE["num_hidden_layers"]
    sizes = json.dumps({k: v for k, v in SHAPE.items() if k != "num_hidden_layers"})
    subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_large_models.py"), "--build", str(ref), str(onnx_dir),
                    str(layers), sizes], check=True, cwd=ROOT, timeout=PATIENCE, capture_output=True)
    assert (onnx_dir / "model.onnx.data").stat().st_size > 200e6
    return ref, onnx_dir, sum(f.stat().st_size for f in ref.glob("*.safetensors"))


def _watched_check(ref: Path, onnx_dir: Path, out: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _WATCHED_CHECK, "check", "--reference", str(ref), "--onnx",
                           str(onnx_dir / "model.onnx"), "--out", str(out), "--samples", "2", "--batch-size", "2",
                           "--threads", "1", *args], capture_output=True, text=True, cwd=ROOT, timeout=PATIENCE,
                          env={**os.environ, "HARNESS_CACHE": str(out.parent / f"{out.name}-cache")})
    line = next((x for x in done.stdout.splitlines() if x.startswith("WATCHED ")), None)
    assert done.returncode == 0 and line, done.stdout[-3000:] + done.stderr[-3000:]
    watched: dict = json.loads(line[len("WATCHED "):])
    return watched


def test_a_decoder_export_is_judged_with_one_copy_of_its_weights_at_a_time(decoder_export, tmp_path):
    ref, onnx_dir, weights = decoder_export
    staged = _watched_check(ref, onnx_dir, tmp_path / "staged", "--release-models", "always", "--gen-samples", "2")
    loads = [e for e in staged["events"] if e["what"] == "module"]
    opens = [e for e in staged["events"] if e["what"] == "session"]
    # every reference (numeric, decode, closed-loop steps) before the session: the module loads once
    assert len(loads) == 1 and len(opens) == 1, staged["events"]
    assert loads[0]["sessions_alive"] == 0 and opens[0]["modules_alive"] == 0, staged["events"]
    # the closed loop's PyTorch side is the greedy decode's own steps: PyTorch stepped the corpus once
    assert staged["stepped_again"] == 0, staged
    floor = min(e["rss"] for e in staged["events"])
    assert staged["peak"] - floor <= BOUND * weights + ALLOWANCE, (staged, weights)

    # negative control: judged as before, the session is open when the module loads, and the bound breaks
    # (numeric parity only: the order of loads shows without decoding, at a third of the time)
    before = _watched_check(ref, onnx_dir, tmp_path / "unstaged", "--release-models", "never", "--no-generation")
    loads = [e for e in before["events"] if e["what"] == "module"]
    assert loads and loads[0]["sessions_alive"] == 1, before["events"]
    floor = min(e["rss"] for e in before["events"])
    assert before["peak"] - floor > BOUND * weights + ALLOWANCE, (before, weights)
