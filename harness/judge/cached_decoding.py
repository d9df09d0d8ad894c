"""Closed-loop cached decoding: a decoder with past judged on its *own* cache.

The numeric check of ``decoder_with_past`` feeds it the reference's past, so a file whose
present key/value outputs are swapped, whose positions ignore the past length, or whose cache
drops the last step passes it: its logits are right for the right cache, and the cache it
returns is "measured, not gated". Greedy decoding of a tiny random model can then happen not to
flip a token (a swapped-K/V Marian decoder: cached logits off by 0.017, presents off by 0.81,
``harness check`` exited 0).

Here both sides decode the same tokens: each batch of prompts is stepped with the KV cache,
teacher-forced on the reference's (PyTorch FP32's) decoded tokens, every step fed the past that
side's previous step returned. The per-step logits of every still-running row are judged
against PyTorch's with the per-precision numeric thresholds (``cosine``, ``top1_agreement``,
``kl`` gated; ``norm_max_abs`` recorded; the model's own tolerances apply), as
``cached_decoding.logits.*``.
The presents are gated too (``cached_decoding.presents.cosine``, worst step; their
``norm_max_abs`` is recorded) when every present
tensor has the reference's name and shape -- the harness's own layout is optimum's
(``present.<layer>.<decoder|encoder>.<key|value>``, batch x heads x positions x head size, the
layout transformers' cache classes export), and ``harness check`` maps foreign names onto it --
and measured otherwise, with the reason recorded. The check records itself as gated coverage
(``cached_decoding``).
"""

from __future__ import annotations

import math
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from harness.core import Check, Precision
from harness.core import Variant as _Variant
from harness.core.cachedir import source_digest
from harness.families import family_for
from harness.families.steppers import Start
from harness.generation.decode import load_runners, torch_threads
from harness.judge.decoding import decode_parts, decode_threads
from harness.judge.refcache import texts_digest
from harness.judge.tolerances import tolerance_for
from harness.metrics import numeric
from harness.metrics.numeric import compare_arrays
from harness.metrics.registry import metric
from harness.runners import PROVIDERS
from harness.runners.base import GraphRef

if TYPE_CHECKING:  # pragma: no cover
    from harness.core import Variant
    from harness.families import Family
    from harness.families.steppers import Start, Starter, Stepper
    from harness.generation.settings import GenerationSettings
    from harness.judge.workspace import Workspace
    from harness.zoo.loading import LoadedModel

#: the check's name: metric keys, coverage and messages
NAME = "cached_decoding"
#: the thresholds it applies (the numeric registry's defaults at the precision, or the model's)
LOGIT_METRICS = ("norm_max_abs", "cosine", "top1_agreement", "kl")
#: the logits' gates: the distribution-level ones. ``norm_max_abs`` (one element over every step)
#: is recorded: a correct llama-tiny INT8 cache fed back over 96 steps reached 0.18 on one
#: position, past the single-step 0.15, with cosine 0.9996 and top-1 0.96; a swapped key/value
#: at FP32 measured cosine 0.99975 and kl 7e-6 (gates 0.99999 and 1e-6)
LOGIT_GATES = ("cosine", "top1_agreement", "kl")
PRESENT_METRICS = ("norm_max_abs", "cosine")
#: the presents are gated on their direction (cosine), their element error is recorded: INT8
#: quantises the K/V projections themselves, so a correct marian-tiny INT8 cache measured
#: norm_max_abs 0.25 (cosine 0.998) while its logits stayed at 0.059; a swapped key/value
#: measured cosine 0.90 at FP32
PRESENT_GATES = ("cosine",)


@dataclass
class CachedDecoding:
    """What the closed loop compared and how it came out."""

    metrics: dict[str, float]
    checks: list[Check]
    steps: int
    positions: int
    presents: str  # "gated" or "measured: <why>"
    notes: list[str] = field(default_factory=list)
    replayed: bool = False  # read from the output cache (a deterministic variant, nothing changed)

    def describe(self) -> str:
        return (f"{NAME}: closed loop over {self.steps} step(s) ({self.positions} positions), each side fed its "
                f"own presents, teacher-forced on PyTorch's tokens; presents {self.presents}")

    def as_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "positions": self.positions, "presents": self.presents, "notes": self.notes,
                "replayed": self.replayed}


def _forced(tokens: Sequence[Sequence[int]], length: int, fill: int) -> np.ndarray:
    out = np.full((len(tokens), length), fill, dtype=np.int64)
    for r, row in enumerate(tokens):
        out[r, : min(len(row), length)] = list(row[:length])
    return out


def _present_problem(ref: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]) -> str | None:
    """Why the two sides' caches cannot be compared tensor for tensor (None: same names and shapes)."""
    if set(ref) != set(got):
        only = sorted(set(ref) ^ set(got))
        return f"present names differ from the reference's ({', '.join(only[:4])})"
    for name in sorted(ref):
        if ref[name].shape != got[name].shape:
            return f"{name} has shape {tuple(got[name].shape)}, the reference {tuple(ref[name].shape)}"
    return None


def _read_positions(ref: np.ndarray, got: np.ndarray, running: np.ndarray,
                    keep: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """One present of the running rows, flattened over the positions a query reads (``keep``:
    [rows, positions]); pad positions hold whatever an exporter wrote there (0 from one
    transformers version, real numbers from another) and no query reads them."""
    if keep is None:
        return ref[running].ravel(), got[running].ravel()
    rows = keep[running]
    return (np.swapaxes(ref[running], 1, 2)[rows].ravel(), np.swapaxes(got[running], 1, 2)[rows].ravel())


class WorstPresents:
    """The presents' metrics of the worst step so far: each step's caches are compared when they
    are returned and then dropped. Keeping every step's flattened caches for one comparison at
    the end held O(steps^2) floats (a cache grows by a position per step): the peak of a
    ``harness check`` of a 2+2-layer Marian, 530 MB above its imports."""

    def __init__(self) -> None:
        self.worst: dict[str, float] = {}
        self.steps = 0

    def add(self, ref: np.ndarray, got: np.ndarray) -> None:
        values = compare_arrays(ref, got, only=PRESENT_METRICS).metrics
        self.steps += 1
        for name in PRESENT_METRICS:
            value = float(values.get(name, math.nan))
            old = self.worst.get(name)
            if old is None or math.isnan(value) or metric(name).direction.worse(value, old):
                self.worst[name] = value


@dataclass
class RecordedSide:
    """The reference side of the closed loop over one batch, as it stepped: its prompt, every
    step's logits (all rows) and its caches -- the last step's presents and, per step, how many
    positions (axis -2) each held. The reference's cache is append-only (checked while recording:
    every step's presents are a prefix of the next step's), so step ``t``'s presents are the last
    ones cut to that step's lengths: a batch costs one cache, not one per step, and the whole
    record can be kept in the reference cache (a check of new files against a cached reference
    then needs no PyTorch module)."""

    prompt: np.ndarray
    logits: np.ndarray  # [steps, rows, vocab]
    final: dict[str, np.ndarray]
    lengths: dict[str, np.ndarray]  # name -> [steps]
    append_only: bool = True

    def past(self, t: int) -> dict[str, np.ndarray]:
        return {n: a[..., : int(self.lengths[n][t]), :] for n, a in self.final.items()}

    def as_arrays(self) -> dict[str, np.ndarray]:
        return {"prompt": self.prompt, "logits": self.logits, "append_only": np.array(self.append_only),
                **{f"final/{n}": a for n, a in self.final.items()}, **{f"length/{n}": a for n, a in self.lengths.items()}}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> RecordedSide:
        return cls(arrays["prompt"], arrays["logits"],
                   {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("final/")},
                   {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("length/")},
                   bool(arrays["append_only"]))


def _prefix_of(before: Mapping[str, np.ndarray], after: Mapping[str, np.ndarray]) -> bool:
    """Whether every cache of ``before`` is, bit for bit, the start (axis -2) of ``after``'s."""
    for name, old in before.items():
        new = after.get(name)
        if new is None or new.shape[:-2] != old.shape[:-2] or new.shape[-2] < old.shape[-2] \
                or not np.array_equal(new[..., : old.shape[-2], :], old):
            return False
    return True


class RecordingStepper:
    """A stepper that keeps what it returns: every step's logits (all rows) and how its cache grew.

    The reference side of the closed loop is the reference's greedy decode itself (teacher-forced
    on its own tokens, the histories are the same, step for step): recording the decode's steps
    spares stepping PyTorch a second time over the same batches."""

    def __init__(self, inner: Stepper) -> None:
        self.inner = inner
        self.logits: list[np.ndarray] = []
        self.lengths: dict[str, list[int]] = {}
        self.previous: dict[str, np.ndarray] = {}
        self.append_only = True
        self.reordered = False

    @property
    def calls(self) -> int:
        return int(getattr(self.inner, "calls", 0))

    @property
    def past(self) -> dict[str, np.ndarray] | None:
        past: dict[str, np.ndarray] | None = getattr(self.inner, "past", None)
        return past

    def step(self, history: np.ndarray) -> np.ndarray:
        out = self.inner.step(history)
        self.logits.append(np.asarray(out, dtype=np.float32))
        past = {n: np.asarray(a, np.float32) for n, a in (self.past or {}).items()}
        self.append_only = self.append_only and all(a.ndim >= 2 for a in past.values()) and \
            _prefix_of(self.previous, past)
        for name, array in past.items():
            self.lengths.setdefault(name, []).append(array.shape[-2] if array.ndim >= 2 else 0)
        self.previous = past
        return out

    def reorder(self, rows: np.ndarray) -> None:  # beam search: the record no longer follows one row per input
        self.reordered = True
        self.inner.reorder(rows)

    def side(self, prompt: np.ndarray) -> RecordedSide:
        vocab = self.logits[0].shape[-1] if self.logits else 1
        logits = np.stack(self.logits) if self.logits else np.zeros((0, prompt.shape[0], vocab), np.float32)
        return RecordedSide(np.asarray(prompt), logits, self.previous,
                            {n: np.asarray(v, np.int64) for n, v in self.lengths.items()}, self.append_only)


def record_side(starter: Starter, ids: np.ndarray, mask: np.ndarray, forced: np.ndarray) -> RecordedSide:
    """``starter`` stepped over one batch with its own cache, teacher-forced on ``forced``."""
    start = starter.start(ids, mask, 1, True)
    recording = RecordingStepper(start.stepper)
    for t in range(forced.shape[1]):
        recording.step(np.concatenate([start.prompt, forced[:, :t]], axis=1))
    return recording.side(start.prompt)


class ReferenceSteps:
    """Records the reference decode's batches (``decode_texts(observe=...)``) as the closed loop's
    reference side. Used only when what was recorded is what ``record_side`` would step: one row
    per input (greedy), every batch stepped once per token of its longest decoded row."""

    def __init__(self) -> None:
        self.batches: list[tuple[np.ndarray, RecordingStepper]] = []

    def __call__(self, start: Start) -> Start:
        recording = RecordingStepper(start.stepper)
        self.batches.append((start.prompt, recording))
        return Start(start.prompt, recording, start.ignore_before)

    def sides(self, tokens: Sequence[Sequence[int]], batch_size: int) -> list[RecordedSide] | None:
        """The recorded sides, or None when they are not the teacher-forced steps over ``tokens``."""
        if not self.batches:
            return None
        sides = []
        for (prompt, recording), lo in zip(self.batches, range(0, len(tokens), batch_size)):
            rows = tokens[lo: lo + batch_size]
            steps = max((len(r) for r in rows), default=0)
            if recording.reordered or len(recording.logits) != steps or prompt.shape[0] != len(rows):
                return None
            sides.append(recording.side(prompt))
        return sides if len(sides) * batch_size >= len(tokens) > (len(sides) - 1) * batch_size else None


def closed_loop(reference: Sequence[RecordedSide], variant: Starter, batches: Sequence[tuple[np.ndarray, np.ndarray]],
                tokens: Sequence[Sequence[Sequence[int]]], fill: int
                ) -> tuple[np.ndarray, np.ndarray, WorstPresents, str | None, int]:
    """The variant stepped with its own cache over each batch, teacher-forced on ``tokens`` (per
    batch, per row) and fed the reference's prompt, beside the reference's recorded steps: the
    valid positions' logits (reference, variant), the presents of the running rows compared step
    by step (when comparable), why presents are not, and steps."""
    ref_rows: list[np.ndarray] = []
    var_rows: list[np.ndarray] = []
    presents = WorstPresents()
    problem: str | None = None
    steps = 0
    for recorded, (ids, mask), batch_tokens in zip(reference, batches, tokens):
        length = max((len(t) for t in batch_tokens), default=0)
        forced = _forced(batch_tokens, length, fill)
        var_start = variant.start(ids, mask, 1, True)
        compared: dict[str, tuple[object, tuple[int, ...], bytes]] = {}  # name -> the last comparison's inputs
        if not recorded.append_only:
            problem = problem or "the reference's cache is not append-only (its steps cannot be compared)"
        for t in range(length):
            history = np.concatenate([recorded.prompt, forced[:, :t]], axis=1)
            v = np.asarray(var_start.stepper.step(history), dtype=np.float32)
            running = np.array([t < len(row) for row in batch_tokens])
            ref_rows.append(recorded.logits[t][running])
            var_rows.append(v[running])
            steps += 1
            if not recorded.append_only:
                continue
            ref_past = recorded.past(t)
            var_past = getattr(var_start.stepper, "past", None) or {}
            why = _present_problem(ref_past, var_past)
            if why is not None:
                problem = problem or why
                continue
            kept = getattr(var_start.stepper, "kept_positions", None)  # the same mask feeds both sides
            for name in sorted(ref_past):  # per layer and role, where a query reads the cache
                inputs = (var_past[name], ref_past[name].shape, running.tobytes())
                last = compared.get(name)
                if last is not None and last[0] is inputs[0] and last[1:] == inputs[1:]:
                    continue  # a cache fed back unchanged (cross-attention): the same comparison as the last step's
                compared[name] = inputs
                ref_kv, var_kv = np.asarray(ref_past[name], np.float32), np.asarray(var_past[name], np.float32)
                keep = kept(name, ref_kv.shape[2]) if kept is not None and ref_kv.ndim == 4 else None
                presents.add(*_read_positions(ref_kv, var_kv, running, keep))
    ref_all = np.concatenate(ref_rows) if ref_rows else np.zeros((0, 1), np.float32)
    var_all = np.concatenate(var_rows) if var_rows else np.zeros((0, 1), np.float32)
    return ref_all, var_all, presents, problem, steps


def measure_closed_loop(ref_logits: np.ndarray, var_logits: np.ndarray, presents: WorstPresents,
                        problem: str | None, steps: int) -> CachedDecoding:
    """The metrics of a closed loop, without gates: what the output cache keeps (a warm rerun of
    a deterministic variant replays it; the gates are always attached fresh by :func:`gated`)."""
    metrics: dict[str, float] = {}
    compared = compare_arrays(ref_logits, var_logits, is_logits=True).metrics if len(ref_logits) else {}
    for name in LOGIT_METRICS:
        metrics[f"{NAME}.logits.{name}"] = float(compared.get(name, math.nan))
    presents_state = "gated"
    if problem is not None or not presents.steps:
        presents_state = f"measured, not gated: {problem or 'no present tensor returned'}"
    else:
        for name in PRESENT_METRICS:
            metrics[f"{NAME}.presents.{name}"] = presents.worst.get(name, math.nan)
    return CachedDecoding(metrics, [], steps, int(len(ref_logits)), presents_state)


def gated(measured: CachedDecoding, checks_for: Callable[[bool], Sequence[Check]]) -> CachedDecoding:
    """``measured`` with its gates (``checks_for(is_logits)``: the numeric gates at the
    variant's precision): the logits' always, the presents' when they were comparable."""
    checks = [metric(c.metric).check(c.threshold, within=f"{NAME}.logits")
              for c in checks_for(True) if c.metric in LOGIT_GATES]
    if measured.presents == "gated":
        checks += [metric(c.metric).check(c.threshold, within=f"{NAME}.presents")
                   for c in checks_for(False) if c.metric in PRESENT_GATES]
    return CachedDecoding(dict(measured.metrics), checks, measured.steps, measured.positions, measured.presents,
                          list(measured.notes), measured.replayed)


def judge_closed_loop(ref_logits: np.ndarray, var_logits: np.ndarray, presents: WorstPresents,
                      problem: str | None, steps: int, checks_for: Callable[[bool], Sequence[Check]]
                      ) -> CachedDecoding:
    """The metrics and gates of a closed loop (``checks_for(is_logits)``: the numeric gates)."""
    return gated(measure_closed_loop(ref_logits, var_logits, presents, problem, steps), checks_for)


def cached_decoding(ws: Workspace, model: LoadedModel, family: Family, variant: Variant,
                    reference_tokens: Sequence[Sequence[int]], texts: Sequence[str], settings: GenerationSettings,
                    batch_size: int, recorded: Sequence[RecordedSide] | None = None) -> CachedDecoding:
    """The closed loop for ``variant``'s cached graphs against PyTorch FP32's, on the sentences the
    generation gate decoded (``texts``, in batches of ``batch_size``) and PyTorch's tokens;
    ``recorded``: the reference's steps as its decode took them (``ReferenceSteps``), when it was
    decoded now -- PyTorch is then not stepped again.

    When both sides' outputs are deterministic (``Backend.outputs_key``: CPU runtimes), the
    measurement is kept in the output cache like the variant's decode it judges: a warm rerun of
    an unchanged variant replays the metrics (and attaches the gates fresh) instead of loading
    the PyTorch model and stepping both sides again -- on this machine the closed loop was 85 %
    of a warm ``harness run``'s time (docs/performance.md)."""
    reference, reference_key = reference_side(ws, model)
    sides = (reference, (variant, family))

    def checks_for(is_logits: bool) -> Sequence[Check]:
        return tolerance_for(variant.precision, is_logits=is_logits, overrides=model.spec.tolerances).checks

    backend = ws.backend(variant, model)
    variant_key = {g.name: backend.outputs_key(GraphRef(model, family, g, variant))
                   for g in family.graphs(model) if g.name in family.generation_graphs(True)}

    def measure() -> CachedDecoding:
        return _measure(ws, model, family, sides, reference_tokens, texts, settings, batch_size, reference_key,
                        recorded)

    if reference_key is None or any(k is None for k in variant_key.values()):
        return gated(measure(), checks_for)
    parts = {**decode_parts(ws, model, family, (), texts, settings, batch_size),  # the texts decide
             "reference": reference_key, "variant": variant_key, "reference_tokens": texts_digest(
                 [" ".join(map(str, row)) for row in reference_tokens]),
             "code": [source_digest(cached_decoding), source_digest(numeric.compare_arrays)]}
    fresh: list[CachedDecoding] = []

    def compute() -> dict[str, Any]:
        fresh.append(measure())
        return _as_json(fresh[0])

    value = ws.references.json(f"{model.name}-{NAME}-{variant.precision.value}-{variant.provider.short}", parts,
                               compute)
    if fresh:
        return gated(fresh[0], checks_for)
    return gated(CachedDecoding({k: float(v) for k, v in value["metrics"].items()}, [], int(value["steps"]),
                                int(value["positions"]), str(value["presents"]), list(value["notes"]), replayed=True),
                 checks_for)


def _as_json(measured: CachedDecoding) -> dict[str, Any]:
    return {"metrics": measured.metrics, **measured.as_dict()}


def _measure(ws: Workspace, model: LoadedModel, family: Family, sides: Sequence[tuple[Variant, Family]],
             reference_tokens: Sequence[Sequence[int]], texts: Sequence[str], settings: GenerationSettings,
             batch_size: int, reference_key: Mapping[str, Any] | None,
             recorded_now: Sequence[RecordedSide] | None = None) -> CachedDecoding:
    """The reference's steps (``reference_steps``; ``recorded_now``: as its decode took them), then
    the variant stepped beside them, and the loop measured."""
    recorded = reference_steps(ws, model, family, sides[0], reference_tokens, texts, settings, batch_size,
                               reference_key, recorded_now)
    batches, tokens = _prompt_batches(model, family, reference_tokens, texts, settings, batch_size)
    with ExitStack() as stack:
        stack.enter_context(torch_threads(decode_threads(ws)))
        runners, _ = load_runners(ws.backend(sides[1][0], model), model, sides[1][1], sides[1][0], True, stack)
        variant = sides[1][1].starter(model, runners, settings.decoder_start_token_id)
        ref, got, presents, problem, steps = closed_loop([RecordedSide.from_arrays(r) for r in recorded],
                                                         variant, batches, tokens, settings.fill_token_id)
    return measure_closed_loop(ref, got, presents, problem, steps)


def _prompt_batches(model: LoadedModel, family: Family, reference_tokens: Sequence[Sequence[int]],
                    texts: Sequence[str], settings: GenerationSettings, batch_size: int
                    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[Sequence[Sequence[int]]]]:
    """The decode's batches: each one's prompt (ids, mask) and PyTorch's tokens for its rows."""
    batches, tokens = [], []
    for lo in range(0, len(texts), batch_size):
        batches.append(family.generation_prompts(model, texts[lo: lo + batch_size], settings.max_new_tokens))
        tokens.append(reference_tokens[lo: lo + batch_size])
    return batches, tokens


def reference_side(ws: Workspace, model: LoadedModel) -> tuple[tuple[Variant, Family], Mapping[str, Any] | None]:
    """PyTorch FP32 on the model's own family, and the key of its outputs (None: not deterministic,
    so its steps are recorded afresh each time)."""
    side = (_Variant(model.name, Precision.FP32, PROVIDERS["torch_cpu"]), family_for(model.family))
    backend = ws.backend(side[0], model)
    wanted = side[1].generation_graphs(True)
    keys = {g.name: backend.outputs_key(GraphRef(model, side[1], g, side[0]))
            for g in side[1].graphs(model) if g.name in wanted}
    return side, None if any(k is None for k in keys.values()) else keys


def reference_steps(ws: Workspace, model: LoadedModel, family: Family, side: tuple[Variant, Family],
                    reference_tokens: Sequence[Sequence[int]], texts: Sequence[str], settings: GenerationSettings,
                    batch_size: int, reference_key: Mapping[str, Any] | None,
                    recorded_now: Sequence[RecordedSide] | None = None) -> list[dict[str, np.ndarray]]:
    """PyTorch's side of the closed loop, teacher-forced on its own tokens: recorded once per
    model, texts and tokens -- memoised in the model's memo and, when its outputs are deterministic
    (``reference_key``), kept in the reference cache -- so a check can record it before any of the
    files' sessions opens and free the module (``harness.check.staging``)."""
    batches, tokens = _prompt_batches(model, family, reference_tokens, texts, settings, batch_size)

    def record() -> list[dict[str, np.ndarray]]:
        if recorded_now is not None:  # the reference decode's own steps (``ReferenceSteps``)
            return [side.as_arrays() for side in recorded_now]
        with ExitStack() as stack:
            stack.enter_context(torch_threads(decode_threads(ws)))
            runners, _ = load_runners(ws.backend(side[0], model), model, side[1], side[0], True, stack)
            ref = side[1].starter(model, runners, settings.decoder_start_token_id)
            return [record_side(ref, ids, mask, _forced(t, max((len(r) for r in t), default=0),
                                                        settings.fill_token_id)).as_arrays()
                    for (ids, mask), t in zip(batches, tokens)]

    parts = {**decode_parts(ws, model, family, (), texts, settings, batch_size),
             "reference_family": source_digest(type(side[1])), "reference": dict(reference_key or {}),
             "reference_tokens": texts_digest([" ".join(map(str, row)) for row in reference_tokens]),
             "code": source_digest(record_side)}
    memo = (f"{NAME}-reference", texts_digest([repr(sorted(parts.items(), key=str))]))
    if memo not in model.cache:
        model.cache[memo] = record() if reference_key is None else \
            ws.references.arrays(f"{model.name}-{NAME}-reference", parts, record)
    recorded: list[dict[str, np.ndarray]] = model.cache[memo]
    return recorded
