"""A user's model directory held to the loader's refusals once per content, not once per run.

``harness run`` checks every user directory before any case starts (``zoo.loading.check_intake``:
structure, remote code, pickle weights, a tokenizer that loads, the run's limits). Loading the
tokenizer imports transformers, and with it torch: 4.4 s of a 9-s rerun whose every case replayed
from the cache, which needs neither. So a check that passed leaves an entry in the cache's
``verdicts`` area, keyed by what its answer depends on -- the directory's files (name, size,
modification time), the model's opt-ins, the run's limits, the versions of transformers and
tokenizers, and the source of the harness modules that decide (``zoo``, ``core.admission``) -- and
a rerun with the same key skips it. Any change to one of them checks again; a failed check leaves
nothing, so a bad directory is refused on every run.
"""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.core import admission
from harness.core.admission import Limits
from harness.core.cachedir import package_digest, source_digest
from harness.export.cache import ArtifactCache
from harness.zoo.base import ModelSpec, cache_root
from harness.zoo.loading import check_intake

#: the entry a passed check leaves (its one file says what passed, for a reader of the cache)
PASSED = "intake.json"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def _files(directory: Path) -> list[tuple[str, int, int]]:
    """(relative name, bytes, mtime ns) of every file under ``directory``: a cheap stand-in for
    its content that any edit, copy or replacement changes."""
    out = []
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            st = path.stat()
            out.append((path.relative_to(directory).as_posix(), st.st_size, st.st_mtime_ns))
    return out


def intake_key(spec: ModelSpec, limits: Limits) -> dict[str, Any]:
    """Everything the intake check's answer for ``spec`` depends on (module docstring)."""
    assert spec.path is not None, "only a user's directory is checked at intake"
    directory = Path(spec.path).expanduser().resolve()
    return {"kind": "intake", "directory": str(directory), "files": _files(directory),
            "trust_remote_code": spec.extra.get("trust_remote_code") is True,
            "allow_pickle": spec.extra.get("allow_pickle") is True, "limits": repr(limits),
            "versions": {p: _version(p) for p in ("transformers", "tokenizers", "sentencepiece")},
            "code": [package_digest("harness.zoo"), source_digest(admission)]}


def checked_intake(spec: ModelSpec, limits: Limits) -> bool:
    """``check_intake(spec)`` unless a check of the same key passed before; True when it ran.
    Its refusal (``UsageError``) propagates and nothing is kept."""
    if spec.path is None or not Path(spec.path).expanduser().is_dir():
        check_intake(spec)  # not a directory: the loader's own refusal says what is wrong
        return True
    parts = intake_key(spec, limits)
    ran = False

    def check(tmp: Path) -> None:
        nonlocal ran
        check_intake(spec)
        ran = True
        (tmp / PASSED).write_text(json.dumps({"model": spec.name, "passed": "intake"}) + "\n", encoding="utf-8")

    label = "intake-" + re.sub(r"[^A-Za-z0-9._-]+", "_", spec.name).strip("._")
    ArtifactCache(cache_root() / "verdicts").get_or_build(label, parts, check)
    return ran


__all__ = ["PASSED", "checked_intake", "intake_key"]
