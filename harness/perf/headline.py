"""The seeds' headline claims, measured side by side in one process.

For one model: PyTorch eager FP32 and every ONNX-running provider (ONNX Runtime, and
OpenVINO where installed) at FP32 / INT8 / FP16 on the CPU, timed in interleaved blocks
(``harness.perf.bench``), then turned into ratios: ORT vs PyTorch at batch 1 (practitioners
report 30-60% faster), INT8 vs FP32 latency and artifact size, FP16 vs FP32 latency, and
each further runtime against ONNX Runtime at the same precision. The contenders are derived
from the backend registry (:func:`plan`), not listed here. An encoder is timed per forward call at a chosen
shape; a generative model per fixed-length greedy generation (KV cache on), because a
translation, not one graph call, is what its users wait for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from harness.core import Precision, Provider, Variant
from harness.families.shaped_feeds import shaped_feeds
from harness.generation.decode import prompt_batch
from harness.perf import bench
from harness.perf.generation import generate_timed, prompt_texts, starter
from harness.perf.measure import time_calls, timed_call
from harness.perf.memory import artifact_fields
from harness.runners import PROVIDERS, backends
from harness.runners.base import GraphRef

if TYPE_CHECKING:  # pragma: no cover
    from harness.judge.workspace import Workspace

#: the providers ``harness bench`` compares when none are given: the eager reference and ONNX
#: Runtime, then every other CPU provider that runs ONNX files here (OpenVINO when installed)
BASE_PROVIDERS = ("torch_cpu", "ort_cpu")


@dataclass(frozen=True)
class Contender:
    """One timed side: a provider at a precision. ``name`` is its key in samples and JSON
    (``ort-fp32``, ``ov-int8``: the provider's short name without ``_cpu``)."""

    provider: Provider
    precision: Precision

    @property
    def name(self) -> str:
        return f"{self.provider.short.removesuffix('_cpu')}-{self.precision.value}"


def default_providers() -> list[Provider]:
    """``BASE_PROVIDERS`` plus every other non-GPU provider whose backend runs ONNX files, is a
    deployment runtime (``Backend.timed``) and can run here (derived from the backend registry,
    so a new CPU runtime joins the table)."""
    from harness.judge.runtimes import RuntimeStore

    table = dict(PROVIDERS)
    chosen = [table[s] for s in BASE_PROVIDERS]
    known = backends()
    for provider in table.values():
        backend = known.get(provider.backend)
        if provider in chosen or provider.needs_gpu or backend is None or not backend.runs_onnx_files or \
                not backend.timed:
            continue
        if RuntimeStore.unavailable_reason(Variant("bench", Precision.FP32, provider)) is None:
            chosen.append(provider)
    return chosen


def _display(provider: Provider) -> str:
    """``ORT``, ``OpenVINO``; a backend's further providers add their short name (``ORT ort_cuda``)."""
    backend = backends()[provider.backend]
    return backend.display() if backend.providers[0] == provider else f"{backend.display()} {provider.short}"


def plan(providers: list[Provider]) -> tuple[list[Contender], list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """Contenders and the (label, base, candidate) latency and size comparisons between them.

    A backend that does not run ONNX files (PyTorch eager) is the reference, timed at FP32;
    every ONNX-running provider is timed at FP32, INT8 and FP16 and compared with the eager
    reference (FP32), with its own FP32 (INT8, FP16: latency and size), and -- for a provider
    other than the first ONNX one (ONNX Runtime) -- with that one at the same precision,
    side by side in the same interleaved run.
    """
    known = backends()
    runs_files = [p for p in providers if known[p.backend].runs_onnx_files]
    eager = [p for p in providers if not known[p.backend].runs_onnx_files]
    contenders = [Contender(p, Precision.FP32) for p in eager]
    contenders += [Contender(p, prec) for p in runs_files for prec in (Precision.FP32, Precision.INT8, Precision.FP16)]
    latency: list[tuple[str, str, str]] = []
    size: list[tuple[str, str, str]] = []
    ref = Contender(eager[0], Precision.FP32) if eager else None
    first = runs_files[0] if runs_files else None
    for p in runs_files:
        name = _display(p)
        fp32 = Contender(p, Precision.FP32)
        if ref is not None:
            latency.append((f"{name} FP32 vs {_display(ref.provider)} FP32, latency", ref.name, fp32.name))
        cpu = "" if p.needs_gpu else " (CPU)"
        latency.append((f"{name} INT8 vs {name} FP32, latency", fp32.name, Contender(p, Precision.INT8).name))
        latency.append((f"{name} FP16 vs {name} FP32{cpu}, latency", fp32.name, Contender(p, Precision.FP16).name))
        size.append((f"{name} INT8 vs {name} FP32, artifact size", fp32.name, Contender(p, Precision.INT8).name))
        size.append((f"{name} FP16 vs {name} FP32, artifact size", fp32.name, Contender(p, Precision.FP16).name))
        if first is not None and p != first:
            for prec in (Precision.FP32, Precision.INT8, Precision.FP16):
                latency.append((f"{name} {prec.value.upper()} vs {_display(first)} {prec.value.upper()}, latency",
                                Contender(first, prec).name, Contender(p, prec).name))
    return contenders, latency, size


@dataclass
class HeadlineResult:
    model: str
    unit: str  # what one sample is
    ratios: list[bench.Ratio]
    samples: dict[str, list[float]]
    artifact_bytes: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # contenders that could not be measured, and why


def _blocks(ws: "Workspace", model_name: str, contenders: list[Contender], sized: set[str], batch_size: int,
            seq_len: int, new_tokens: int, notes: list[str]
            ) -> tuple[dict[str, Callable[[int], list[float]]], str, list[Any], dict[str, int]]:
    model = ws.model(model_name)
    family = ws.family(model)
    graphs = family.graphs(model)
    texts = ws.texts(model)
    blocks: dict[str, Callable[[int], list[float]]] = {}
    runners: list[Any] = []
    sizes: dict[str, int] = {}
    generates = family.generates
    if generates:
        ids, mask = prompt_batch(model, prompt_texts(model, texts, batch_size))
        unit = (f"one greedy generation of {new_tokens} tokens, batch {ids.shape[0]}, "
                f"prompt {ids.shape[1]} tokens, KV cache")
    else:
        feeds = shaped_feeds(model, family, graphs[0], texts, batch_size, seq_len)
        unit = f"one forward call, batch {batch_size} x {seq_len} tokens"
    for contender in contenders:
        name, variant = contender.name, Variant(model_name, contender.precision, contender.provider)
        reason = ws.runtimes.unavailable_reason(variant)
        if reason:
            notes.append(f"{model_name} {name}: not measured ({reason})")
            continue
        backend = ws.backend(variant, model)
        try:
            loaded = {g.name: backend.load(GraphRef(model, family, g, variant)) for g in (graphs if generates else graphs[:1])}
        except Exception as exc:  # noqa: BLE001 - an export or session failure costs one contender, not the table
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
        if name in sized:
            sizes[name] = artifact_fields(ws, variant, model, family, graphs)["artifact_bytes"]
    return blocks, unit, runners, sizes


def measure_headline(ws: "Workspace", model_name: str, *, batch_size: int = 1, seq_len: int = 32,
                     rounds: int = 20, calls: int = 10, new_tokens: int = 16,
                     providers: list[Provider] | None = None) -> HeadlineResult:
    """Interleave every contender of ``providers`` (default: :func:`default_providers`) for
    ``rounds`` blocks of ``calls`` samples; the ratios :func:`plan` declares."""
    notes: list[str] = []
    contenders, latency_rows, size_rows = plan(providers or default_providers())
    sized = {name for _, base, cand in size_rows for name in (base, cand)}
    blocks, unit, runners, sizes = _blocks(ws, model_name, contenders, sized, batch_size, seq_len, new_tokens, notes)
    try:
        samples = bench.interleave(blocks, rounds, calls, warmup_rounds=1) if blocks else {}
    finally:
        for runner in runners:
            runner.close()
    ratios = [bench.latency_ratio(model_name, label, samples, base, cand, block_size=calls)
              for label, base, cand in latency_rows if base in samples and cand in samples]
    seen: set[tuple[int, int]] = set()
    for label, base, cand in size_rows:  # files shared by two runtimes are one row (the first runtime's)
        if base in sizes and cand in sizes and (sizes[base], sizes[cand]) not in seen:
            seen.add((sizes[base], sizes[cand]))
            ratios.append(bench.size_ratio(model_name, label, base, cand, sizes[base], sizes[cand]))
    return HeadlineResult(model_name, unit, ratios, samples, sizes, notes)
