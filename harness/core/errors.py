"""Errors and the one-line messages users read.

A ``UsageError`` is a user mistake (a bad option, file or name): the CLI prints it as one line
with exit code 2 and no traceback. The helpers here make those lines say what is wrong and what
was probably meant.
"""

from __future__ import annotations

import difflib
from typing import Iterable


class UsageError(ValueError):
    """A user mistake (bad option, bad file). Reported as one line, exit code 2."""


def describe_error(exc: BaseException, limit: int = 200) -> str:
    """``Type: first line of the message``: how a library's exception enters a one-line
    error or a record's reason (exporters and loaders raise pages of text)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:limit]}" if text else type(exc).__name__


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean X?)' when a close match exists, else ''."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return f" (did you mean {match[0]!r}?)" if match else ""


#: names a refusal lists before "+N more": a TOML key typo listed all 40 keys, ~600 characters
NEAREST_SHOWN = 8


def valid_names(word: str, choices: Iterable[str], shown: int = NEAREST_SHOWN) -> str:
    """``valid: a, b, c`` for a refusal of ``word``: every choice when there are few, else the
    ``shown`` nearest to ``word`` (by similarity, then in their order) and how many more."""
    names = list(dict.fromkeys(choices))
    if len(names) <= shown:
        return f"valid: {', '.join(names)}"
    rank = {n: i for i, n in enumerate(names)}
    nearest = sorted(names, key=lambda n: (-difflib.SequenceMatcher(None, word, n).ratio(), rank[n]))[:shown]
    return f"nearest valid: {', '.join(nearest)} (+{len(names) - shown} more)"


def split_csv(values: Iterable[str] | str | None) -> list[str]:
    """Accept ``a,b c`` or repeated options; return the flat list of non-empty names."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for value in values:
        out.extend(v for v in value.replace(",", " ").split() if v)
    return out
