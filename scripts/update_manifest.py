"""Refresh sha256 and line counts in harness/data/corpora/MANIFEST.json.

The manifest pins every corpus so a silent edit fails loudly at load time. After an
*intended* edit, run this script (and bump the corpus "version"); CI runs it with
``--check``, which changes nothing and exits 1 if any entry is stale.

Usage: python scripts/update_manifest.py [--check] [--root harness/data/corpora]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.data.corpus import (  # noqa: E402
    MANIFEST_NAME,
    CorpusError,
    datasets_dir,
    load_corpus_file,
    read_manifest,
    resolve_entry_path,
)


def refresh(root: Path) -> tuple[dict, list[str]]:
    """Manifest with recomputed sha256/lines, and a description of each change."""
    manifest = read_manifest(root)
    changes: list[str] = []
    for name, entry in sorted(manifest["corpora"].items()):
        path = resolve_entry_path(root, name, entry)
        if not path.is_file():
            raise CorpusError(f"{path}: corpus file {name!r} is missing")
        corpus = load_corpus_file(path, fmt=entry.get("format"))
        for key, value in (("sha256", corpus.sha256), ("lines", len(corpus.sources))):
            if entry.get(key) != value:
                changes.append(f"{name}: {key} {entry.get(key)} -> {value}")
                entry[key] = value
    return manifest, changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if stale, write nothing")
    parser.add_argument("--root", type=Path, default=None, help="datasets root (default: harness/data/corpora)")
    args = parser.parse_args(argv)
    root = args.root if args.root is not None else datasets_dir()
    try:
        manifest, changes = refresh(root)
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for change in changes:
        print(change)
    if args.check:
        if changes:
            print(f"{root / MANIFEST_NAME} is stale; run scripts/update_manifest.py", file=sys.stderr)
            return 1
        print(f"{root / MANIFEST_NAME} is up to date")
        return 0
    if changes:
        text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
        (root / MANIFEST_NAME).write_text(text, encoding="utf-8")
        print(f"updated {root / MANIFEST_NAME}")
    else:
        print(f"{root / MANIFEST_NAME} is up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
