"""How a judged case ended, as a value: the engine's answer, read by every front end.

A case's checks are decided once, where they are computed (``decide``): an error (the artifact or
the server broke while judged) wins over a failed gate, which wins over a pass. The decision and the
record composed from it travel together as a :class:`CaseResult`; ``harness check``, an endpoint
check and a suite case read the verdict from it, never from an exception caught on the way or from
which pytest phase failed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.results.checks import GateFailure
from harness.results.record import Record, Verdict

if TYPE_CHECKING:  # pragma: no cover
    from harness.judge.numeric import ParityResult


@dataclass(frozen=True)
class Decision:
    """A verdict and the reason behind it (empty for a pass)."""

    verdict: Verdict
    reason: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict in ("fail", "error")

    @classmethod
    def of_exception(cls, exc: BaseException) -> Decision:
        """What an exception that ended the judging says: a ``GateFailure`` is the variant's ``fail``,
        anything else an ``error`` (the first line of ``Type: message``)."""
        message = str(exc).strip()
        if isinstance(exc, GateFailure):
            return cls("fail", message)
        return cls("error", f"{type(exc).__name__}: {message}".splitlines()[0])

    def worse(self, other: Decision | None) -> Decision:
        """The graver of two decisions of one case (error > fail > the rest); ``self`` on a tie."""
        if other is None or _GRAVITY.get(other.verdict, 0) <= _GRAVITY.get(self.verdict, 0):
            return self
        return other

    def as_dict(self) -> dict[str, str]:
        return {"verdict": self.verdict, "reason": self.reason}

    def tell_pytest(self) -> None:
        """End a pytest test as decided (the record's verdict is the decision itself, not this
        exception): a ``GateFailure`` for ``fail``, a :class:`JudgingError` for ``error``."""
        if self.verdict == "fail":
            raise GateFailure(self.reason)
        if self.verdict == "error":
            raise JudgingError(self.reason)


class JudgingError(RuntimeError):
    """Something broke while a case was judged (the artifact, the server, a decoding loop)."""


#: how grave a verdict is when one case reaches two decisions
_GRAVITY = {"fail": 1, "error": 2}


def decide(gates: Callable[[], object], errors: Sequence[str] = ()) -> Decision:
    """error (something broke while judging: ``errors``) > fail (``gates`` raised a ``GateFailure``,
    its message the reason) > pass. Any other exception from ``gates`` is not a verdict: it propagates."""
    if errors:
        return Decision("error", "; ".join(errors))
    try:
        gates()
    except GateFailure as exc:
        return Decision("fail", str(exc))
    return Decision("pass")


@dataclass(frozen=True)
class CaseResult:
    """One judged case: its decision, the record composed from it (once, by the engine), and the
    numeric parity behind it when it has one (a front end reads outputs, coverage and side outputs
    from it instead of parsing the record back)."""

    suite: str
    decision: Decision
    record: Record
    parity: ParityResult | None = None

    @property
    def verdict(self) -> Verdict:
        return self.decision.verdict


__all__ = ["CaseResult", "Decision", "JudgingError", "decide"]
