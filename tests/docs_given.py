"""Files a document prints for the reader to save before its commands, laid in its sandbox.

A command that needs a file the prose *gives* (a config with bounds no model meets, so that a
case fails on purpose and writes a repro bundle; a suite file) can run only if the docs test
has that file too. Rather than a copy kept here, which could drift from what the reader sees,
the file is read from the document itself: a fenced block whose first line is a comment naming
it (``# tight.toml: ...``, ``# test_fixed_positions.py: ...``). Only the names listed in
:data:`PRINTED` are laid, so an example block that merely starts with a comment is not mistaken
for one, and a listed name the document no longer prints fails the test (the list cannot go stale).
"""

from __future__ import annotations

import re
from pathlib import Path

#: per document, the files it prints for the reader to save (relative to where its commands run)
PRINTED: dict[str, tuple[str, ...]] = {
    "docs/repro.md": ("tight.toml", "test_fixed_positions.py"),
}

_BLOCK = re.compile(r"^(?P<indent> *)```[\w-]*[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)


def printed_files(text: str) -> dict[str, str]:
    """``{name: content}`` of every fenced block whose first line is ``# NAME`` or ``# NAME: why``."""
    found: dict[str, str] = {}
    for block in _BLOCK.finditer(text):
        first = block["body"].split("\n", 1)[0].strip()
        named = re.match(r"^#\s*([\w./-]+\.\w+)(:|\s*$)", first)
        if named:
            found[named[1]] = block["body"]
    return found


def lay_printed(document: str, root: Path, repository: Path) -> None:
    """Write, under ``root``, the files :data:`PRINTED` lists for ``document``, as it prints them."""
    names = PRINTED.get(document, ())
    if not names:
        return
    files = printed_files((repository / document).read_text(encoding="utf-8"))
    missing = [name for name in names if name not in files]
    assert not missing, f"{document} no longer prints {missing} (a block whose first line is `# NAME`)"
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(files[name], encoding="utf-8")
