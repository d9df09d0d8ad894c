"""One judged check and the one way a case says its checks failed.

Numeric parity, generation parity, sentence embeddings, ``harness check`` and the perf budgets all
end the same way: a list of checks that did not hold, turned into the ``reason`` of a ``fail``
record. The text is read by people (terminal, ``summary.md``) and matched by tests, so it is built
here once: a header ``<subject>: N check(s) failed`` and one indented line per failed check.
``GateFailure`` is the exception that carries it; the pytest plugin maps it to verdict ``fail``
(any other exception is an ``error``: the harness, not the variant, broke).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, NoReturn

from harness.core.direction import Direction
from harness.core.verdict_text import ComparedText, compared_text
from harness.metrics.registry import METRICS

Op = Literal["<=", ">="]


class GateFailure(AssertionError):
    """A variant computed something else than the reference: verdict ``fail``, not ``error``."""


def holds(value: float, op: str, threshold: float) -> bool:
    """Whether ``value op threshold`` (``Direction.holds``); a NaN never holds (a metric that
    could not be computed must not pass its gate by comparing False both ways)."""
    return Direction.from_op(op).holds(value, threshold)


@dataclass(frozen=True)
class CheckResult:
    """One gate applied to one measured number.

    ``subject`` is what was measured (``decoder/logits``; empty for a case-level metric such as
    ``bleu``), ``where`` the worst element or detail that locates it (empty when nothing does).
    """

    metric: str
    value: float
    op: str
    threshold: float
    subject: str = ""
    where: str = ""

    @property
    def passed(self) -> bool:
        return holds(self.value, self.op, self.threshold)

    @property
    def unit(self) -> str:
        """The unit the metric registry declares for this metric ('' for none or output units)."""
        spec = METRICS.get(self.metric)
        return "" if spec is None or spec.unit == "output units" else spec.unit

    def text(self) -> ComparedText:
        """The value and threshold as every surface prints them: digits enough that the printed
        value cannot contradict the verdict (``harness.core.verdict_text``)."""
        return compared_text(self.value, self.threshold, Direction.from_op(self.op), self.unit)

    def line(self) -> str:
        """``decoder/logits: max_abs = 0.31 (must be <= 0.01)``: the check without its location."""
        head = f"{self.subject}: " if self.subject else ""
        return f"{head}{self.metric} = {self.text().must_be()}"

    def message(self) -> str:
        """``decoder/logits: max_abs = 0.31 (must be <= 0.01); worst element at batch=3, ...``"""
        tail = f"; worst element at {self.where}" if self.where else ""
        return f"{self.line()}{tail}"


def failure_text(subject: str, lines: Sequence[str], what: str = "check(s) failed",
                 trailer: Iterable[str] = ()) -> str:
    """``<subject>: N <what>`` then each line indented by two spaces (``trailer`` lines too,
    uncounted: context such as the first diverging token)."""
    body = [f"  {line}" for line in [*lines, *trailer]]
    return "\n".join([f"{subject}: {len(lines)} {what}", *body])


def outcomes_text(subject: str, failed: Sequence[CheckResult], trailer: Iterable[str] = ()) -> str:
    """``failure_text`` of failed checks, one ``message()`` each."""
    return failure_text(subject, [f.message() for f in failed], trailer=trailer)


def raise_failures(subject: str, lines: Sequence[str], what: str = "check(s) failed",
                   trailer: Iterable[str] = ()) -> None:
    """Raise ``GateFailure`` with ``failure_text`` when ``lines`` is not empty; else return."""
    if lines:
        fail(failure_text(subject, lines, what, trailer))


def raise_outcomes(subject: str, outcomes: Iterable[CheckResult], trailer: Iterable[str] = ()) -> None:
    """Raise ``GateFailure`` listing every outcome that did not pass; return when all passed."""
    failed = [o for o in outcomes if not o.passed]
    if failed:
        fail(outcomes_text(subject, failed, trailer))


def fail(reason: str) -> NoReturn:
    """The one raise path of a failed gate."""
    raise GateFailure(reason)
