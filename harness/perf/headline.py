"""The seeds' headline claims, measured side by side in one process.

For one model: PyTorch eager FP32 and ONNX Runtime FP32 / INT8 / FP16 on the CPU, timed
in interleaved blocks (``harness.perf.bench``), then turned into ratios:
ORT vs PyTorch at batch 1 (practitioners report 30-60% faster), INT8 vs FP32 latency and
artifact size, FP16 vs FP32 latency. An encoder is timed per forward call at a chosen
shape; a generative model per fixed-length greedy generation (KV cache on), because a
translation, not one graph call, is what its users wait for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from harness.core import PROVIDERS, Precision, Variant
from harness.perf import bench
from harness.perf.measure import time_calls, timed_call

if TYPE_CHECKING:  # pragma: no cover
    from harness.judge.workspace import Workspace

#: contender name -> (precision, provider)
CONTENDERS: dict[str, tuple[Precision, str]] = {
    "torch-fp32": (Precision.FP32, "torch_cpu"),
    "ort-fp32": (Precision.FP32, "ort_cpu"),
    "ort-int8": (Precision.INT8, "ort_cpu"),
    "ort-fp16": (Precision.FP16, "ort_cpu"),
}
#: (label, base, candidate) of every latency ratio
LATENCY_RATIOS = (
    ("ORT FP32 vs PyTorch eager FP32, latency", "torch-fp32", "ort-fp32"),
    ("ORT INT8 vs ORT FP32, latency", "ort-fp32", "ort-int8"),
    ("ORT FP16 vs ORT FP32 (CPU), latency", "ort-fp32", "ort-fp16"),
)
SIZE_RATIOS = (
    ("ORT INT8 vs ORT FP32, artifact size", "ort-fp32", "ort-int8"),
    ("ORT FP16 vs ORT FP32, artifact size", "ort-fp32", "ort-fp16"),
)

#: contenders whose artifact size is measured: those a size ratio compares
_SIZED = frozenset(name for _, base, cand in SIZE_RATIOS for name in (base, cand))


@dataclass
class HeadlineResult:
    model: str
    unit: str  # what one sample is
    ratios: list[bench.Ratio]
    samples: dict[str, list[float]]
    artifact_bytes: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # contenders that could not be measured, and why


def _blocks(ws: "Workspace", model_name: str, batch_size: int, seq_len: int, new_tokens: int,
            notes: list[str]) -> tuple[dict[str, Callable[[int], list[float]]], str, list[Any], dict[str, int]]:
    from harness.perf.feeds import shaped_feeds
    from harness.perf.generation import generate_timed, starter
    from harness.perf.memory import artifact_fields

    model = ws.model(model_name)
    family = ws.family(model)
    graphs = family.graphs(model)
    texts = ws.texts(model)
    blocks: dict[str, Callable[[int], list[float]]] = {}
    runners: list[Any] = []
    sizes: dict[str, int] = {}
    generates = family.generates
    if generates:
        from harness.generation.decode import prompt_batch
        from harness.perf.generation import prompt_texts

        ids, mask = prompt_batch(model, prompt_texts(model, texts, batch_size))
        unit = (f"one greedy generation of {new_tokens} tokens, batch {ids.shape[0]}, "
                f"prompt {ids.shape[1]} tokens, KV cache")
    else:
        feeds = shaped_feeds(model, family, graphs[0], texts, batch_size, seq_len)
        unit = f"one forward call, batch {batch_size} x {seq_len} tokens"
    for name, (precision, provider) in CONTENDERS.items():
        variant = Variant(model_name, precision, PROVIDERS[provider])
        reason = ws.unavailable_reason(variant)
        if reason:
            notes.append(f"{model_name} {name}: not measured ({reason})")
            continue
        backend = ws.backend(variant, model)
        try:
            loaded = {g.name: backend.load(model, family, g, variant) for g in (graphs if generates else graphs[:1])}
        except Exception as exc:  # an export or session failure costs one contender, not the table
            notes.append(f"{model_name} {name}: not measured ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})")
            continue
        runners += loaded.values()
        if generates:
            start_fn = starter(model, family, loaded)

            def block(n: int, bound: Any = start_fn) -> list[float]:
                return [generate_timed(bound, ids, mask, new_tokens, True)[2] / 1e6 for _ in range(n)]
        else:
            call = timed_call(loaded[graphs[0].name], feeds)

            def block(n: int, bound: Any = call) -> list[float]:
                return time_calls(bound, n)
        blocks[name] = block
        if name in _SIZED:
            sizes[name] = artifact_fields(ws, variant, model, family, graphs)["artifact_bytes"]
    return blocks, unit, runners, sizes


def measure_headline(ws: "Workspace", model_name: str, *, batch_size: int = 1, seq_len: int = 32,
                     rounds: int = 20, calls: int = 10, new_tokens: int = 16) -> HeadlineResult:
    """Interleave the four contenders for ``rounds`` blocks of ``calls`` samples; the ratios."""
    notes: list[str] = []
    blocks, unit, runners, sizes = _blocks(ws, model_name, batch_size, seq_len, new_tokens, notes)
    try:
        samples = bench.interleave(blocks, rounds, calls, warmup_rounds=1) if blocks else {}
    finally:
        for runner in runners:
            runner.close()
    ratios = [bench.latency_ratio(model_name, label, samples, base, cand, block_size=calls)
              for label, base, cand in LATENCY_RATIOS if base in samples and cand in samples]
    ratios += [bench.size_ratio(model_name, label, base, cand, sizes[base], sizes[cand])
               for label, base, cand in SIZE_RATIOS if base in sizes and cand in sizes]
    return HeadlineResult(model_name, unit, ratios, samples, sizes, notes)
