"""Generation speed: time to first token, time per output token, tokens/s, with and
without the KV cache.

The graph calls go through the families' steppers (``harness.families.steppers``), the same code the
generation-parity suite decodes with, so what is timed is what is judged. The loop
around them is a fixed-length greedy argmax: every timed generation produces exactly
``new_tokens`` tokens (EOS does not stop it), so runs and variants do equal work and
their numbers compare. Cached and uncached generations alternate, so drift hits both.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from harness.generation.decode import prompt_batch
from harness.perf.measure import PerfSettings, latency_entry, latency_key

if TYPE_CHECKING:  # pragma: no cover
    from harness.families import Family
    from harness.runners.base import GraphRunner
    from harness.zoo.loading import LoadedModel

Clock = Callable[[], int]


@dataclass
class GenerationSamples:
    """Per generation: first-token latency; per later token: its step latency (ms)."""

    ttft_ms: list[float]
    tpot_ms: list[float]
    total_ms: list[float]
    tokens: list[np.ndarray]

    def tokens_per_s(self, batch_size: int, new_tokens: int) -> float:
        seconds = sum(self.total_ms) / 1000.0
        return batch_size * new_tokens * len(self.total_ms) / seconds if seconds > 0 else float("inf")


def starter(model: "LoadedModel", family: "Family", runners: Mapping[str, "GraphRunner"]) -> Any:
    """The family's batch starter over ``runners`` (runs the encoder, if any)."""
    return family.starter(model, runners)


def generate_timed(start_fn: Any, ids: np.ndarray, mask: np.ndarray, new_tokens: int, use_cache: bool,
                   clock: Clock = time.perf_counter_ns) -> tuple[int, list[int], int, np.ndarray]:
    """One fixed-length greedy generation: (ttft ns, per-token step ns, total ns, tokens)."""
    t0 = clock()
    start = start_fn.start(ids, mask, 1, use_cache)
    history = start.prompt
    marks: list[int] = []
    for _ in range(new_tokens):
        logits = start.stepper.step(history)
        history = np.concatenate([history, np.argmax(logits, axis=-1).astype(np.int64)[:, None]], axis=1)
        marks.append(clock())
    steps = [b - a for a, b in zip(marks, marks[1:])]
    return marks[0] - t0, steps, marks[-1] - t0, history[:, start.prompt.shape[1]:]


def sample_generation(start_fn: Any, ids: np.ndarray, mask: np.ndarray, new_tokens: int, repeats: int,
                      warmup: int = 1, clock: Clock = time.perf_counter_ns) -> dict[bool, GenerationSamples]:
    """``repeats`` timed generations per cache mode, alternating modes, after ``warmup`` each."""
    for _ in range(warmup):
        for use_cache in (True, False):
            generate_timed(start_fn, ids, mask, new_tokens, use_cache, clock)
    out = {mode: GenerationSamples([], [], [], []) for mode in (True, False)}
    for _ in range(repeats):
        for use_cache in (True, False):
            first, steps, total, tokens = generate_timed(start_fn, ids, mask, new_tokens, use_cache, clock)
            s = out[use_cache]
            s.ttft_ms.append(first / 1e6)
            s.tpot_ms += [n / 1e6 for n in steps]
            s.total_ms.append(total / 1e6)
            s.tokens.append(tokens)
    return out


def prompt_texts(model: "LoadedModel", texts: Sequence[str], batch_size: int, pool: int = 64) -> list[str]:
    """``batch_size`` corpus sentences of median token length among the first ``pool``.

    The first sentence of a corpus is whatever it happens to be (numbers-en-zh's is two
    tokens long); a median-length prompt makes "one generation" a typical one.
    """
    candidates = list(texts[:max(pool, batch_size)])
    lengths = [len(model.tokenizer(t)["input_ids"]) for t in candidates]
    order = sorted(range(len(candidates)), key=lambda i: (lengths[i], i))
    start = max(0, min(len(order) - batch_size, len(order) // 2 - batch_size // 2))
    return [candidates[i] for i in sorted(order[start:start + batch_size])]


def repeats_for(settings: PerfSettings) -> int:
    """Enough generations that the per-token metric has ``samples`` calls (3..30)."""
    return max(3, min(30, settings.samples // max(1, settings.new_tokens - 1)))


def generation_prompt(model: "LoadedModel", texts: Sequence[str], settings: PerfSettings
                      ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The prompt a generation measurement times: (texts, token ids, mask) of the first batch size."""
    chosen = prompt_texts(model, texts, settings.batch_sizes[0])
    ids, mask = prompt_batch(model, chosen)
    return chosen, ids, mask


def measure_generation(model: "LoadedModel", family: "Family", runners: Mapping[str, "GraphRunner"],
                       texts: Sequence[str], settings: PerfSettings) -> dict[str, Any]:
    """The perf fields of one variant's generation: TTFT/TPOT samples per cache mode and a
    ``generation`` summary (tokens/s, the KV-cache speed-up, and what was generated)."""
    _, ids, mask = generation_prompt(model, texts, settings)
    return generation_fields(starter(model, family, runners), ids, mask, settings.new_tokens, repeats_for(settings))


def generation_fields(start_fn: Any, ids: np.ndarray, mask: np.ndarray, new_tokens: int,
                      repeats: int) -> dict[str, Any]:
    """Time ``repeats`` generations of ``new_tokens`` per cache mode from the prompt ``ids``/``mask``
    and summarise them as perf fields (also what ``harness repro`` re-measures a bundle with)."""
    samples = sample_generation(start_fn, ids, mask, new_tokens, repeats)
    fields: dict[str, Any] = {}
    summary: dict[str, Any] = {"batch_size": int(ids.shape[0]), "prompt_tokens": int(ids.shape[1]),
                               "new_tokens": new_tokens, "repeats": repeats,
                               "loop": "harness.generation steppers, fixed-length greedy argmax"}
    for use_cache, s in samples.items():
        tag = "on" if use_cache else "off"
        ttft = latency_entry(s.ttft_ms, warmup=1, engine="harness", items_per_call=int(ids.shape[0]), kv=tag)
        tpot = latency_entry(s.tpot_ms, warmup=1, engine="harness", items_per_call=int(ids.shape[0]), kv=tag)
        fields[latency_key(gen="ttft", kv=tag)] = ttft
        fields[latency_key(gen="tpot", kv=tag)] = tpot
        summary[f"kv={tag}"] = {"tokens_per_s": s.tokens_per_s(int(ids.shape[0]), new_tokens),
                                "ttft_ms_p50": ttft["summary"]["p50"], "tpot_ms_p50": tpot["summary"]["p50"]}
    on, off = samples[True], samples[False]
    summary["kv_speedup"] = summary["kv=on"]["tokens_per_s"] / summary["kv=off"]["tokens_per_s"]
    summary["same_tokens_with_and_without_cache"] = bool(np.array_equal(on.tokens[0], off.tokens[0]))
    fields["generation"] = summary
    return fields
