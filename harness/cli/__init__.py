"""``harness`` command line. Every module in this package with a ``register(subparsers)``
function contributes a subcommand (run, doctor, baseline, check, bench, ...).

Exit codes (a contract scripts rely on): 0 all cases passed or were skipped with a reason,
1 a case failed or errored (or a confirmed regression), 2 bad usage or input (one line on
stderr, no traceback), 128+N a run stopped by signal N (130 SIGINT/Ctrl-C, 143 SIGTERM,
129 SIGHUP): finished records kept, summary.md says INTERRUPTED.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Sequence

from harness import __version__
from harness.core import UsageError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description="Regression gate for model deployments.")
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


class _Parser(argparse.ArgumentParser):
    pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed a one-line usage error
        return EXIT_USAGE if exc.code not in (0, None) else EXIT_OK
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        from harness.core.interrupts import exit_code, signal_name, signal_of

        signum = signal_of(exc) or 2
        print(f"harness: interrupted by {signal_name(signum)}; results written so far are kept", file=sys.stderr)
        return exit_code(signum)


def entrypoint() -> None:  # pragma: no cover - console script
    sys.exit(main())
