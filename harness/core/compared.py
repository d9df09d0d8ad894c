"""What a verdict compared: the one rule that "nothing compared" is never OK.

Every gate and comparison (``baseline compare`` accuracy and perf, ``compare``, ``merge``,
``history`` trends, ``calibrate``) counts what it actually compared and lists what the baseline
side has that the candidate lacks. Zero compared, or anything missing, fails (exit 1) with the
list, unless ``--allow-missing`` says a partial candidate is expected; the verdict line then says
so (``(--allow-missing: 3 missing)``), so a reader of the log sees the allowance, not a clean OK.
Before this rule, a baseline from another model set printed ``OK: ... nothing compared`` and
exited 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

#: the flag that lets a partial comparison pass (the same spelling on every command)
ALLOW_MISSING_FLAG = "--allow-missing"
ALLOW_MISSING_HELP = ("pass although the candidate lacks cases the baseline has, or nothing could be compared "
                      "(the verdict line says the allowance was used); without it either is a failure (exit 1)")
#: the same flag on a trend (``harness history show`` / ``changes``): no candidate and baseline there
TREND_ALLOW_MISSING_HELP = ("pass although no series has enough stored runs to compare (the first nights of a "
                            "nightly job; the verdict line says the allowance was used); without it that is a "
                            "failure (exit 1)")
#: names listed in a one-line verdict before "+N more"
SHOWN = 6


def listing(items: Sequence[str], shown: int = SHOWN) -> str:
    """A few names, then how many more."""
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f", +{more} more" if more > 0 else "")


@dataclass(frozen=True)
class Compared:
    """``count`` things of kind ``what`` were compared; ``missing`` are on the baseline side only."""

    what: str
    count: int
    missing: tuple[str, ...] = field(default_factory=tuple)
    allow_missing: bool = False
    #: False: a part of a larger comparison whose caller counts coverage itself (``harness
    #: compare`` counts cases; its perf and accuracy parts neither fail nor annotate on their own)
    gated: bool = True
    #: what the ``missing`` items are, as the verdict names them (a trend's are the series too short
    #: to compare, not a candidate's gaps)
    missing_as: str = "missing in candidate"

    @property
    def problem(self) -> str | None:
        """Why this comparison cannot be green (whether or not the allowance excuses it)."""
        if self.count == 0:
            extra = f"; {self.missing_as}: {listing(self.missing)}" if self.missing else ""
            return f"nothing compared (0 {self.what}){extra}"
        if self.missing:
            return f"{len(self.missing)} {self.missing_as}: {listing(self.missing)}"
        return None

    @property
    def failed(self) -> bool:
        """Zero compared or something missing, and no ``--allow-missing``: exit 1."""
        return self.gated and self.problem is not None and not self.allow_missing

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def verdict_suffix(self) -> str:
        """What the verdict line adds: the failure, or the allowance that excused it."""
        problem = self.problem
        if problem is None or not self.gated:
            return ""
        if self.allow_missing:
            return f" ({ALLOW_MISSING_FLAG}: {problem})"
        return f"; {problem}"

    def headline(self, ok: str, fail: str | None = None) -> str:
        """``fail`` (a regression found) wins; then a coverage failure; then ``ok`` with any allowance."""
        if fail is not None:
            return fail + self.verdict_suffix()
        if self.failed:
            return f"FAIL: {self.problem}; {ok.removeprefix('OK: ')}"
        return ok + self.verdict_suffix()

    def as_dict(self) -> dict[str, object]:
        return {"what": self.what, "count": self.count, "missing": list(self.missing),
                "allow_missing": self.allow_missing, "failed": self.failed}
