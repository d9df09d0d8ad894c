"""``harness check`` of a decoder-only export with external data holds one copy of the weights at a
time (harness/check/staging.py, docs/large-models.md).

One random-weight Llama of ~40 MB (hidden 256, 10 layers: big enough that a second copy of its
weights stands out of the allocator's noise, small enough for CI), exported in optimum's
decoder-only layout (``model.onnx`` + ``model.onnx.data``), is judged in a fresh interpreter that
records, from the harness's own calls, the resident set when the PyTorch module loads and when
each session opens, and whether the other was alive then. The staged check (``--release-models
always``, what ``auto`` does from 1 GB of files) must never hold both and peak at most 1.5x the
weights above its floor; the check as it was (``never``, numeric parity only) is the negative
control: its session is open when the module loads and it exceeds the bound.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import PATIENCE

ROOT = Path(__file__).resolve().parents[1]
#: ~40 MB of FP32 weights (3.9 MB per layer, 2 MB of embeddings)
SHAPE = {"hidden_size": 256, "intermediate_size": 1024, "num_attention_heads": 4, "num_key_value_heads": 2,
         "num_hidden_layers": 10}
#: the bound the staged check is held to, above the floor (the resident set when it first loads
#: either copy: interpreter, torch, transformers, onnxruntime, tokenizer, corpus -- about 0.5 GB here)
BOUND = 1.5

#: the judging child: the CLI, with the module loader and the session opener watched
_WATCHED_CHECK = """
import gc, json, sys, weakref
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

from harness.cli import main
try:
    code = main(sys.argv[1:])
finally:
    peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
    print("WATCHED " + json.dumps({"events": events, "peak": peak}))
raise SystemExit(code)
"""


@pytest.fixture(scope="module")
def decoder_export(tmp_path_factory) -> tuple[Path, Path, int]:
    """(reference directory, export directory, weight bytes): built in a child, so this process
    holds none of it."""
    root = tmp_path_factory.mktemp("large-model")
    ref, onnx_dir = root / "ref", root / "onnx"
    build = f"""
import shutil, sys, torch
from pathlib import Path
from transformers import LlamaConfig, LlamaForCausalLM
from harness.export.onnx_export import export_graph
from harness.families import family_for
from harness.zoo.base import spec_for_directory
from harness.zoo.hf_tiny import corpus_texts
from harness.zoo.loading import load_model
from harness.zoo.tokenizer import save_tokenizer, train_tokenizer
ref, out = Path({str(ref)!r}), Path({str(onnx_dir)!r})
tok = train_tokenizer(corpus_texts(), "llama", vocab_size=1000)
cfg = LlamaConfig(vocab_size=len(tok), max_position_embeddings=256, bos_token_id=tok.bos_token_id,
                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, attn_implementation="eager",
                  tie_word_embeddings=False, **{SHAPE!r})
torch.manual_seed(1234)
LlamaForCausalLM(cfg).eval().save_pretrained(str(ref), safe_serialization=True)
save_tokenizer(tok, ref)
spec = spec_for_directory(ref)
model = load_model(spec)
family = family_for(spec.family)
graph = family.graphs(model)[0]
export_graph(family.module(model, graph), graph, family.export_example(model, graph), out, external_data="always")
"""
    subprocess.run([sys.executable, "-c", build], check=True, cwd=ROOT, timeout=PATIENCE)
    for f in ref.iterdir():  # optimum's layout: config and tokenizer beside the graph
        if f.suffix != ".safetensors":
            shutil.copy(f, onnx_dir / f.name)
    assert (onnx_dir / "model.onnx.data").stat().st_size > 30e6
    return ref, onnx_dir, sum(f.stat().st_size for f in ref.glob("*.safetensors"))


def _watched_check(ref: Path, onnx_dir: Path, out: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _WATCHED_CHECK, "check", "--reference", str(ref), "--onnx",
                           str(onnx_dir / "model.onnx"), "--out", str(out), "--samples", "4", "--batch-size", "4",
                           "--threads", "1", *args], capture_output=True, text=True, cwd=ROOT, timeout=PATIENCE,
                          env={**os.environ, "HARNESS_CACHE": str(out.parent / f"{out.name}-cache")})
    line = next((x for x in done.stdout.splitlines() if x.startswith("WATCHED ")), None)
    assert done.returncode == 0 and line, done.stdout[-3000:] + done.stderr[-3000:]
    watched: dict = json.loads(line[len("WATCHED "):])
    return watched


def test_a_decoder_export_is_judged_with_one_copy_of_its_weights_at_a_time(decoder_export, tmp_path):
    ref, onnx_dir, weights = decoder_export
    staged = _watched_check(ref, onnx_dir, tmp_path / "staged", "--release-models", "always", "--gen-samples", "4")
    loads = [e for e in staged["events"] if e["what"] == "module"]
    opens = [e for e in staged["events"] if e["what"] == "session"]
    # every reference (numeric, decode, closed-loop steps) before the session: the module loads once
    assert len(loads) == 1 and len(opens) == 1, staged["events"]
    assert loads[0]["sessions_alive"] == 0 and opens[0]["modules_alive"] == 0, staged["events"]
    floor = min(e["rss"] for e in staged["events"])
    assert staged["peak"] - floor <= BOUND * weights, (staged, weights)

    # negative control: judged as before, the session is open when the module loads, and the bound breaks
    before = _watched_check(ref, onnx_dir, tmp_path / "unstaged", "--release-models", "never", "--no-generation")
    loads = [e for e in before["events"] if e["what"] == "module"]
    assert loads and loads[0]["sessions_alive"] == 1, before["events"]
    floor = min(e["rss"] for e in before["events"])
    assert before["peak"] - floor > BOUND * weights, (before, weights)
