"""``harness doctor``: what this machine can run, and why a variant would be skipped."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.table import Table


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("doctor", help="versions, execution providers, and which variants would be skipped")
    from harness.settings.options import add_cli_arguments

    add_cli_arguments(p, names=("models", "precisions", "providers", "config"))
    p.set_defaults(func=doctor)


def doctor(args: argparse.Namespace) -> int:
    from harness.core import PROVIDERS
    from harness.judge.workspace import Workspace
    from harness.plugin import matrix
    from harness.report.console import cli_console
    from harness.results.envinfo import environment
    from harness.runners import backends
    from harness.settings.options import cli_values
    from harness.settings.resolve import build_options
    from harness.zoo.base import cache_root

    values = cli_values(args)
    values.setdefault("providers", list(PROVIDERS))  # doctor's point: every provider, runnable or not
    options = build_options(values)
    console = cli_console()
    env = environment()
    console.print(f"[bold]harness doctor[/]  cpu: {env['cpu']} ({env['cores']} cores), gpu: {env['gpu'] or 'none'}")
    for lib, version in env["versions"].items():
        console.print(f"  {lib:22s} {version}")
    console.print("runtimes (one line per registered backend):")
    for backend in backends().values():  # each says what it sees here: version, devices, or why not
        try:
            line = backend.runtime_summary()
        except Exception as exc:  # noqa: BLE001 - a broken runtime install is a finding, not a doctor crash
            line = f"{backend.name}: cannot be queried ({type(exc).__name__}: {exc})"
        console.print(f"  {escape(line)}", highlight=False)
    from harness.families import family_names

    console.print(f"families: {', '.join(family_names())}", highlight=False)  # built-in and entry points
    console.print(f"cache: {cache_root()}")
    zoo = Table(title="models")
    for col in ("name", "family", "default", "description"):
        zoo.add_column(col)
    for name, spec in (options.catalog.registered() if options.catalog else {}).items():
        zoo.add_row(name, spec.family, "yes" if spec.default else "opt-in", spec.description)
    console.print(zoo)
    table = Table(title="variants")
    table.add_column("variant")
    table.add_column("status")
    runnable = 0
    for variant in matrix(options):
        reason = Workspace.unavailable_reason(variant)
        runnable += reason is None
        table.add_row(escape(variant.id), "[green]runs[/]" if reason is None else f"[yellow]skip:[/] {escape(reason)}")
    console.print(table)
    console.print(f"{runnable} variant(s) run here.")
    return 0
