"""Re-render the metric tables in docs/*.md and README.md from harness/metrics/registry.py.

The pages mark each generated region ``<!-- metrics:NAME -->`` ... ``<!-- /metrics:NAME -->``
(``harness/settings/doc_tables.py`` lists the names). Run after declaring or changing a metric;
``--check`` rewrites nothing and exits 1 naming the stale pages (CI and a test run it).

Usage:
    python scripts/render_metric_docs.py [--check] [--root DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.settings.doc_tables import rewrite, stale  # noqa: E402  (runnable without an install)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale pages (exit 1 if any)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose docs/ and README.md to render")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.check:
        pages = stale(root)
        for page in pages:
            print(f"{page.relative_to(root)}: metric tables are stale; run python scripts/render_metric_docs.py")
        return 1 if pages else 0
    for page in rewrite(root):
        print(f"rewrote {page.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
