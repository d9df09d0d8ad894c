"""Text that came from outside (a corpus line, a decoded output, a model's name) made safe to show."""

from __future__ import annotations


def printable(text: object, *, keep_newlines: bool = False) -> str:
    """Control characters as ``\\xNN`` escapes: random-weight models decode raw bytes such as ESC,
    and a corpus may hold anything, but neither may drive a terminal or make a report binary."""
    raw = "" if text is None else str(text)
    return "".join(c if c.isprintable() or c == " " or (keep_newlines and c == "\n") else f"\\x{ord(c):02x}"
                   for c in raw)


def say(text: object) -> None:
    """Print one line of a command's output with :func:`printable`: the terminal rule for lines
    that carry text from outside (a bundle's case name, a server's error, a model's output)."""
    print(printable(text, keep_newlines=True))
