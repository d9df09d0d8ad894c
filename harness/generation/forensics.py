"""Generation forensics: at which step a variant's decode left the reference's path, and why.

A failing generation gate says *that* text changed; the engineer fixing it needs *where* and
*how close it was*. For the worst diverging sentences this replays both decodes teacher-forced
up to their first divergent step -- the same graph calls the search made (the padded batch the
sentence was decoded in, the KV-cache path or not, the score processors), fed the tokens each
side had chosen so far -- and takes both sides' top-k at that step. The two distributions are
then comparable: same prompt, same prefix, one step.

Whether the divergence *started from a near-tie* is then a question about the reference alone:
how much better did the reference score its own choice than the token the variant picked
(``reference_margin``, in logits, which for one softmax is also the log-prob gap; under greedy
search the reference's choice is its top-1)? Under beam search the final sequences' first
difference need not be any step's top-1 -- the margin can then be small or negative and
``faithful`` is false: read it as "this step did not decide it". Below
``NEAR_TIE_MARGIN`` the reference itself was almost indifferent, so a small numeric error
legitimately flips the choice (a loose text gate or more samples, not a broken artifact); well
above it the variant's numbers moved a clear decision (look at the graph: ``harness bisect``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harness.families.steppers import Starter
from harness.generation.processors import process
from harness.generation.settings import GenerationSettings

#: A divergence "started from a near-tie" when the reference preferred its own token over the
#: variant's by less than this many logits (= nats of log-probability: both tokens share the
#: softmax's normaliser), i.e. the two tokens' probabilities were within a factor e^0.5 = 1.65.
#: Why 0.5: it is the order of the largest logit error INT8 introduces on the zoo's trained model
#: (numbers-en-zh decoder logits, ``harness run`` logits parity on this machine: max_abs 0.72 INT8,
#: mean 0.043; FP16 max_abs 0.023), so quantisation noise alone can swap tokens that close; a
#: real fault moves clear decisions (the same decoder exported without its encoder mask diverged
#: where the reference's margin was 12-18 logits). The per-step ``logit_error`` is recorded
#: beside it, so a reader can compare the margin with the error the variant actually made there.
NEAR_TIE_MARGIN = 0.5
#: candidates shown per side at the divergent step
TOP_K = 5
#: diverging sentences investigated per failing case
MAX_SENTENCES = 3

Prompts = Callable[[Sequence[str]], "tuple[np.ndarray, np.ndarray]"]


@dataclass(frozen=True)
class Candidate:
    """One token of a side's top-k at the divergent step: id, its string, raw logit, log-prob."""

    id: int
    token: str
    logit: float
    logprob: float


@dataclass(frozen=True)
class StepView:
    """One side at the divergent step, teacher-forced on the common prefix."""

    chosen: int | None  # the token this side's decode emitted there (None: it had ended)
    top: tuple[Candidate, ...]  # by the processed score the search ranks (== logit unless a processor acts)
    replayed: int  # the argmax of the replayed step: equals ``chosen`` when the replay is faithful


@dataclass(frozen=True)
class SentenceForensics:
    """Where one sentence's decodes diverged and how close the reference's call was."""

    index: int  # corpus index of the sentence
    step: int  # first divergent decoding step (0 = the first generated token)
    prefix: tuple[int, ...]  # the common prefix both sides generated before it
    reference: StepView
    variant: StepView
    reference_margin: float  # reference logit of its own token minus of the variant's (greedy: its top-1's)
    near_tie: bool  # reference_margin < NEAR_TIE_MARGIN
    logit_error: float  # max |variant - reference| logit over both sides' top-k ids
    faithful: bool  # both replays chose what their decodes chose (false: e.g. beam search)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["prefix"] = list(self.prefix)
        out["near_tie_margin"] = NEAR_TIE_MARGIN
        return out

    def describe(self) -> str:
        """Two lines for a failure message: the step, both sides' top-k, the verdict on the tie."""
        def side(view: StepView) -> str:
            return ", ".join(f"{c.id} {c.token!r} {c.logit:.3f} ({c.logprob:.2f})" for c in view.top)

        kind = "near-tie" if self.near_tie else "clear decision"
        lines = [f"sentence {self.index} step {self.step}: the reference scored its token {self.reference.chosen} "
                 f"above the variant's {self.variant.chosen} by {self.reference_margin:.3f} logits ({kind}, threshold "
                 f"{NEAR_TIE_MARGIN}); "
                 f"max logit error at the step {self.logit_error:.3f}"
                 + ("" if self.faithful else "; replay did not reproduce a side's choice")]
        lines.append(f"  reference top-{len(self.reference.top)}: {side(self.reference)}")
        lines.append(f"  variant   top-{len(self.variant.top)}: {side(self.variant)}")
        return "\n".join(lines)


def near_tie(margin: float) -> bool:
    """The declared rule, in one place."""
    return bool(margin < NEAR_TIE_MARGIN)


def pick_rows(rows: Sequence[Mapping[str, Any]], limit: int = MAX_SENTENCES) -> list[int]:
    """Positions of the rows to investigate: the tokens differ at a step both sides reached,
    worst by normalised edit distance, then earliest divergence."""
    diverged = [k for k, r in enumerate(rows) if r.get("first_divergence") is not None
                and r["first_divergence"] < min(len(r["pytorch_tokens"]), len(r["variant_tokens"]))]
    diverged.sort(key=lambda k: (-float(rows[k].get("norm_edit_distance") or 0.0), rows[k]["first_divergence"], k))
    return diverged[:limit]


def _forced(tokens: Sequence[Sequence[int]], step: int, fill: int) -> np.ndarray:
    """The tokens each row had chosen before ``step`` (finished rows padded as the search pads them)."""
    out = np.full((len(tokens), step), fill, dtype=np.int64)
    for r, row in enumerate(tokens):
        kept = list(row[:step])
        out[r, : len(kept)] = kept
    return out


def replay(starter: Starter, ids: np.ndarray, mask: np.ndarray, forced: np.ndarray,
           settings: GenerationSettings) -> tuple[np.ndarray, np.ndarray]:
    """Raw logits and the processed scores the search ranks, at the step after ``forced``, for
    every row of the batch: the decode's graph calls again, with the tokens given instead of chosen."""
    import torch  # here: importing the judges imports no torch (a replayed run needs none)

    start = starter.start(ids, mask, 1, settings.use_cache)
    history = start.prompt
    max_length = history.shape[1] + settings.max_new_tokens
    logits = np.zeros(0, np.float32)
    for t in range(forced.shape[1] + 1):
        history = np.concatenate([start.prompt, forced[:, :t]], axis=1)
        logits = np.ascontiguousarray(start.stepper.step(history), dtype=np.float32)
    raw = torch.from_numpy(logits)
    ignore = None if start.ignore_before is None else torch.from_numpy(start.ignore_before)
    scores = raw if settings.num_beams == 1 else torch.log_softmax(raw, dim=-1)  # as greedy / beam search do
    processed = process(torch.from_numpy(history), scores, settings, max_length, ignore)
    return logits, processed.numpy()


def view(raw: np.ndarray, processed: np.ndarray, chosen: int | None, piece: Callable[[int], str],
         k: int = TOP_K) -> StepView:
    """A side's top-k at the step (ranked by the processed scores, shown with raw logit and log-prob)."""
    import torch  # here: importing the judges imports no torch (a replayed run needs none)

    logprobs = torch.log_softmax(torch.from_numpy(raw.astype(np.float32)), dim=-1).numpy()
    order = np.argsort(-processed, kind="stable")[:k]
    top = tuple(Candidate(int(i), piece(int(i)), float(raw[i]), float(logprobs[i])) for i in order)
    return StepView(chosen, top, int(np.argmax(processed)))


def compare(index: int, step: int, prefix: Sequence[int], ref: StepView, ref_raw: np.ndarray,
            var: StepView, var_raw: np.ndarray) -> SentenceForensics:
    """Both sides at one step: the reference's margin over the variant's choice, the tie flag,
    the largest logit error over the candidates either side considered."""
    ours = ref.chosen if ref.chosen is not None else ref.replayed
    theirs = var.chosen if var.chosen is not None else var.replayed
    margin = float(ref_raw[ours] - ref_raw[theirs])  # greedy: ours is the reference's top-1
    ids = sorted({c.id for c in ref.top} | {c.id for c in var.top})
    error = float(np.max(np.abs(var_raw[ids].astype(np.float64) - ref_raw[ids].astype(np.float64))))
    faithful = ref.replayed == ref.chosen and var.replayed == var.chosen
    return SentenceForensics(index, step, tuple(int(t) for t in prefix), ref, var, margin, near_tie(margin), error,
                             faithful)


def replay_side(starter: Starter, prompts: Prompts, texts: Sequence[str], tokens: Sequence[Sequence[int]], k: int,
                step: int, settings: GenerationSettings, batch_size: int, piece: Callable[[int], str]
                ) -> tuple[StepView, np.ndarray]:
    """One side at row ``k``'s step ``step``: its batch (rows ``texts`` were decoded in, batches of
    ``batch_size``) replayed on that side's own decoded ``tokens``; the view and the raw logits."""
    lo = (k // batch_size) * batch_size
    batch = range(lo, min(lo + batch_size, len(texts)))
    ids, mask = prompts(texts[batch.start: batch.stop])
    forced = _forced([tokens[j] for j in batch], step, settings.fill_token_id)
    raw, processed = replay(starter, ids, mask, forced, settings)
    row = tokens[k]
    chosen = int(row[step]) if step < len(row) else None
    return view(raw[k - lo], processed[k - lo], chosen, piece), raw[k - lo]


def investigate(reference: Starter, variant: Starter, prompts: Prompts, texts: Sequence[str],
                rows: Sequence[Mapping[str, Any]], settings: GenerationSettings, batch_size: int,
                piece: Callable[[int], str], limit: int = MAX_SENTENCES) -> list[SentenceForensics]:
    """Forensics of the worst diverging rows (``make_rows``' rows, in the order decoded in
    batches of ``batch_size`` from ``texts``): each side replayed on its own decode's history."""
    out = []
    ref_tokens = [r["pytorch_tokens"] for r in rows]
    var_tokens = [r["variant_tokens"] for r in rows]
    for k in pick_rows(rows, limit):
        step = int(rows[k]["first_divergence"])
        ref, ref_raw = replay_side(reference, prompts, texts, ref_tokens, k, step, settings, batch_size, piece)
        var, var_raw = replay_side(variant, prompts, texts, var_tokens, k, step, settings, batch_size, piece)
        out.append(compare(int(rows[k]["index"]), step, ref_tokens[k][:step], ref, ref_raw, var, var_raw))
    return out


def from_dict(data: Mapping[str, Any]) -> SentenceForensics:
    """A record's ``generation_forensics`` entry read back (reports, repro)."""
    def side(d: Mapping[str, Any]) -> StepView:
        return StepView(d.get("chosen"), tuple(Candidate(int(c["id"]), str(c["token"]), float(c["logit"]),
                                                         float(c["logprob"])) for c in d["top"]), int(d["replayed"]))

    return SentenceForensics(int(data["index"]), int(data["step"]), tuple(data.get("prefix") or ()),
                             side(data["reference"]), side(data["variant"]), float(data["reference_margin"]),
                             bool(data["near_tie"]), float(data["logit_error"]), bool(data.get("faithful", True)))
