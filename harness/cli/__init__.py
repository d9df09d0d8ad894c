"""``harness`` command line. Every module in this package with a ``register(subparsers)``
function contributes a subcommand (run, doctor, baseline, check, bench, ...).

Exit codes (a contract scripts rely on): 0 all cases passed or were skipped with a reason,
1 a case failed or errored (or a confirmed regression), 2 bad usage or input (one line on
stderr, no traceback), 128+N a run stopped by signal N (130 SIGINT/Ctrl-C, 143 SIGTERM,
129 SIGHUP): finished records kept, summary.md says INTERRUPTED.
"""

from __future__ import annotations

# first, before anything slow is imported: a signal during start-up is kept, not fatal
from harness.core import early as _early

if _early.launched_as_command():
    _early.install()

import argparse  # noqa: E402
import importlib  # noqa: E402
import pkgutil  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import NoReturn, Sequence  # noqa: E402

from harness import __version__  # noqa: E402
from harness.core import (  # noqa: E402
    UsageError,
    did_you_mean,
    valid_names,
)
from harness.core.interrupts import Interrupted, SignalGuard, exit_code, signal_name, signal_of  # noqa: E402
from harness.report.summary import write_interrupted_run  # noqa: E402

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``harness`` parser with every subcommand; given the command line, with only the command
    it names when a module of this package is that command (``export-triton``: ``export_triton``).

    Why: each command's module imports what its command runs, and a parser of them all imported
    every command's (the history store's, the gate's, the HTML report's...) before any command ran:
    0.2-0.3 s of every ``harness check``. ``--help``, a bare ``harness`` and a command that is
    no module's name (refused with the nearest names) still build all."""
    parser = _Parser(prog="harness", description="Regression gate for model deployments.")
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))
    named = next((a for a in argv or () if not a.startswith("-")), None)
    if named is not None and named.replace("-", "_") in modules:
        modules = [named.replace("-", "_")]
    for name in modules:
        module = importlib.import_module(f"{__name__}.{name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    if named is not None and len(modules) == 1 and named not in sub.choices:
        return build_parser()  # the module is no command (a helper): refused against every command
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse with the harness's refusal format: one line, ``harness: error: <option>: <what>``
    and exit 2, instead of the whole usage (36 lines for ``harness run``) before the error;
    the usage stays on ``--help``."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        """argparse's parse, with an unknown option refused as the option its command takes that
        is nearest (``--modles: unknown option (did you mean '--models'?)``) instead of
        ``unrecognized arguments``; top level only (a subcommand's parser returns its extras up)."""
        parsed, extras = super().parse_known_args(args, namespace)
        unknown = [a.split("=", 1)[0] for a in extras if a.startswith("--")]
        if unknown and self.prog == "harness":
            flags = self._command_flags(getattr(parsed, "command", None))
            hint = did_you_mean(unknown[0], flags)
            self.error(f"{unknown[0]}: unknown option{hint}" if hint else f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def _command_flags(self, command: str | None) -> list[str]:
        """Every long option of ``command`` and its actions (``history show``), or of ``harness``."""
        parsers: list[argparse.ArgumentParser] = [self]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and command in action.choices:
                parsers = [action.choices[command]]
        flags: list[str] = []
        while parsers:
            parser = parsers.pop()
            for action in parser._actions:
                if action.help == argparse.SUPPRESS:  # a deprecated spelling: the hint names the current one
                    continue
                flags += [flag for flag in action.option_strings if flag.startswith("--") and flag not in flags]
                if isinstance(action, argparse._SubParsersAction):
                    parsers += list(action.choices.values())
        return flags

    def error(self, message: str) -> NoReturn:
        message = _refused_choice(message) or re.sub(r"^argument ([^:]+): ", lambda m: f"{m.group(1).split('/')[0]}: ",
                                                     message)
        self.exit(EXIT_USAGE, f"harness: error: {message} (see '{self.prog} --help')\n")


def _refused_choice(message: str) -> str | None:
    """argparse's ``argument COMMAND: invalid choice: 'chek' (choose from 'baseline', ...)`` as the
    harness's refusals read: ``'chek': unknown command (did you mean 'check'?); valid: ...``, the
    option named as given (``--format``) for an option's choices; None for any other message."""
    found = re.match(r"^argument ([^:]+): invalid choice: '?([^']*?)'? \(choose from (.*)\)$", message)
    if found is None:
        return None
    name, value = found.group(1).split("/")[0], found.group(2)
    choices = [c.strip().strip("'") for c in found.group(3).split(",")]
    what = f"{value!r}: unknown command" if not name.startswith("-") else f"{name}: invalid choice {value!r}"
    return f"{what}{did_you_mean(value, choices)}; {valid_names(value, choices)}"


def main(argv: Sequence[str] | None = None) -> int:
    _early.install()  # signals while the parser is built are kept (the command's module is imported)
    started = time.time()
    guard = SignalGuard()
    args: argparse.Namespace | None = None
    try:
        parser = build_parser(sys.argv[1:] if argv is None else argv)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # argparse already printed a one-line usage error
            return EXIT_USAGE if exc.code not in (0, None) else EXIT_OK
        from harness.settings.commands import check_limits

        check_limits(args)  # the table's ranges (argparse checks types and choices only)
        args.signal_guard = guard  # a subcommand asks it which signal stopped it (harness run)
        args.started = started
        out_dir_of = getattr(args, "out_dir_of", None)
        if out_dir_of is not None:  # where a run stopped from now on says so (summary.md, interrupted.json)
            args.interrupt_out = out_dir_of(args)
        guard.install(replaceable=(_early.record,))  # from here a signal raises Interrupted
        if _early.pending() is not None:
            signum = _early.pending() or 2
            _early.clear()
            raise Interrupted(signum)
        if not getattr(args, "func", None):
            parser.print_help()
            return EXIT_USAGE
        return int(args.func(args))
    except UsageError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        signum = signal_of(exc) or 2
        out = getattr(args, "interrupt_out", None)
        if out is not None:  # a run stopped before its pytest session could say so: the run dir says it
            try:
                write_interrupted_run(Path(out), signum, started)
            except OSError:
                pass  # the message below still says what happened
        print(f"harness: interrupted by {signal_name(signum)}; results written so far are kept", file=sys.stderr)
        return exit_code(signum)
    finally:
        guard.uninstall()
        _early.restore()


def entrypoint() -> None:  # pragma: no cover - console script
    sys.exit(main())
